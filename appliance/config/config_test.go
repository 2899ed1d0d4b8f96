package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from Markdown()")

// env returns a lookup over the pairs "NAME", "value", ...
func env(pairs ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// writeConfig writes content to a file in a fresh directory and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gantry.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// problemLines returns the lines of a *Error, failing on any other error.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	return ce.Problems
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Skip("no host name:", err)
	}
	return h
}

func TestDefaults(t *testing.T) {
	c := Default()
	host := hostname(t)
	tests := []struct {
		name      string
		got, want any
	}{
		{"DataDir", c.DataDir, "./data"},
		{"Mqtt.Port", c.Mqtt.Port, 1883},
		{"Mqtt.BindIP", c.Mqtt.BindIP, "0.0.0.0"},
		{"Mqtt.TlsPort", c.Mqtt.TlsPort, 8883},
		{"Mqtt.CertFile", c.Mqtt.CertFile, ""},
		{"Mqtt.WebSocketPort", c.Mqtt.WebSocketPort, 8083},
		{"Mqtt.AllowAnonymous", c.Mqtt.AllowAnonymous, false},
		{"Mqtt.AnonymousLoopbackOnly", c.Mqtt.AnonymousLoopbackOnly, false},
		{"Mqtt.MaxPacketSize", c.Mqtt.MaxPacketSize, 1 << 20},
		{"Mqtt.ReceiveMaximum", c.Mqtt.ReceiveMaximum, 1024},
		{"Mqtt.MaxInflight", c.Mqtt.MaxInflight, 1024},
		{"Mqtt.MaxQueuedMessages", c.Mqtt.MaxQueuedMessages, 10000},
		{"Mqtt.MaxSessionExpirySeconds", c.Mqtt.MaxSessionExpirySeconds, uint32(0)},
		{"Mqtt.TopicAliasMaximum", c.Mqtt.TopicAliasMaximum, 64},
		{"Mqtt.ConnectTimeoutSeconds", c.Mqtt.ConnectTimeoutSeconds, 10},
		{"Mqtt.RetainAvailable", c.Mqtt.RetainAvailable, true},
		{"Ops.Port", c.Ops.Port, 9100},
		{"Ops.BindIP", c.Ops.BindIP, "0.0.0.0"},
		{"Logging.Level", c.Logging.Level, "info"},
		{"Logging.Format", c.Logging.Format, "text"},
		{"Durability.Enabled", c.Durability.Enabled, false},
		{"Cluster.Enabled", c.Cluster.Enabled, false},
		{"Cluster.ClusterId", c.Cluster.ClusterId, "coreflux-cluster"},
		{"Cluster.NodeName", c.Cluster.NodeName, host},
		{"Cluster.Discovery", c.Cluster.Discovery, "multicast"},
		{"Cluster.Seeds", c.Cluster.Seeds, []string(nil)},
		{"Cluster.KubernetesPeerPort", c.Cluster.KubernetesPeerPort, 9200},
		{"Cluster.BindIP", c.Cluster.BindIP, "0.0.0.0"},
		{"Cluster.AdvertisedHost", c.Cluster.AdvertisedHost, host},
		{"Cluster.AdvertisedPort", c.Cluster.AdvertisedPort, 9200},
		{"Cluster.DataPlaneMqttPort", c.Cluster.DataPlaneMqttPort, 1883},
		{"Cluster.DataDir", c.Cluster.DataDir, filepath.Join("data", "cluster")},
		{"Cluster.PeerOpsPort", c.Cluster.PeerOpsPort, 9100},
		{"Cluster.HeartbeatThreshold", c.Cluster.HeartbeatThreshold, 0.25},
		{"Cluster.RaftTransport", c.Cluster.RaftTransport, "Deadline"},
		{"EffectiveReplicationFactor", c.Cluster.EffectiveReplicationFactor(), 3},
		{"EffectiveElectionRpcTimeoutMs", c.Cluster.EffectiveElectionRpcTimeoutMs(), 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	loaded, err := Load("", nil)
	if err != nil || !reflect.DeepEqual(loaded, c) {
		t.Errorf("Load(\"\", nil) = %+v, %v; want Default()", loaded, err)
	}
}

func TestDerivedFollowTheirSource(t *testing.T) {
	c, err := Load(writeConfig(t, `{"DataDir": "/srv/g", "Mqtt": {"BindIP": "127.0.0.2", "Port": 1884},
		"Ops": {"Port": 9101}, "Cluster": {"NodeName": "gw-b", "Port": 9300}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster
	got := []any{c.Ops.BindIP, cl.BindIP, cl.AdvertisedHost, cl.AdvertisedPort, cl.KubernetesPeerPort,
		cl.DataPlaneMqttPort, cl.DataDir, cl.PeerOpsPort}
	want := []any{"127.0.0.2", "127.0.0.2", "gw-b", 9300, 9300, 1884, filepath.Join("/srv/g", "cluster"), 9101}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("derived fields = %v, want %v", got, want)
	}
}

func TestDev(t *testing.T) {
	d := Dev()
	want := Default()
	want.Mqtt.AllowAnonymous, want.Mqtt.AnonymousLoopbackOnly = true, true
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Dev() = %+v\nwant %+v", d, want)
	}
	d, err := LoadDev(env("COREFLUX_MQTT_PORT", "1999"))
	if err != nil || d.Mqtt.Port != 1999 || !d.Mqtt.AllowAnonymous {
		t.Errorf("LoadDev with COREFLUX_MQTT_PORT=1999 = port %d, anonymous %v, %v", d.Mqtt.Port, d.Mqtt.AllowAnonymous, err)
	}
}

func TestExampleLoads(t *testing.T) {
	c, err := load("example.json", exampleJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cluster.Enabled || len(c.Cluster.Seeds) != 3 || c.Mqtt.CertFile == "" {
		t.Errorf("example loaded as %+v", c)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("the documented example has warnings: %q", w)
	}
}

func TestDocsUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	got := Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./appliance/config/ -run TestDocsUpToDate -update", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date; run go test ./appliance/config/ -run TestDocsUpToDate -update", path)
	}
}

func TestMarkdownNamesEveryField(t *testing.T) {
	md := Markdown()
	for _, f := range schema.fields {
		if !strings.Contains(md, "| `"+f.name+"` | `"+f.env+"` |") {
			t.Errorf("Markdown() has no row for %s", f.path)
		}
	}
}
