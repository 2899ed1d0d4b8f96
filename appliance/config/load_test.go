package config

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestFileOverrides(t *testing.T) {
	tests := []struct {
		name string
		file string
		got  func(c Config) any
		want any
	}{
		{"top-level field", `{"DataDir": "/var/lib/gantry"}`, func(c Config) any { return c.DataDir }, "/var/lib/gantry"},
		{"mqtt port", `{"Mqtt": {"Port": 1884}}`, func(c Config) any { return c.Mqtt.Port }, 1884},
		{"mqtt port off", `{"Mqtt": {"Port": 0}}`, func(c Config) any { return c.Mqtt.Port }, 0},
		{"uint32 maximum", `{"Mqtt": {"MaxSessionExpirySeconds": 4294967295}}`,
			func(c Config) any { return c.Mqtt.MaxSessionExpirySeconds }, uint32(4294967295)},
		{"boolean", `{"Mqtt": {"RetainAvailable": false}}`, func(c Config) any { return c.Mqtt.RetainAvailable }, false},
		{"ops", `{"Ops": {"Port": 9101, "BindIP": "127.0.0.1"}}`, func(c Config) any { return [2]any{c.Ops.Port, c.Ops.BindIP} }, [2]any{9101, "127.0.0.1"}},
		{"logging", `{"Logging": {"Level": "debug", "Format": "json"}}`,
			func(c Config) any { return c.Logging.Level + "/" + c.Logging.Format }, "debug/json"},
		{"value case folded", `{"Logging": {"Level": "WARN"}, "Cluster": {"RaftTransport": "tcp"}}`,
			func(c Config) any { return c.Logging.Level + "/" + c.Cluster.RaftTransport }, "warn/Tcp"},
		{"float", `{"Cluster": {"HeartbeatThreshold": 0.1}}`, func(c Config) any { return c.Cluster.HeartbeatThreshold }, 0.1},
		{"zeroconf discovery", `{"Cluster": {"Enabled": true, "Discovery": "zeroconf"}}`,
			func(c Config) any { return c.Cluster.Discovery }, DiscoveryZeroconf},
		{"empty object", `{}`, func(c Config) any { return c.Mqtt.Port }, 1883},
		{"empty section", `{"Cluster": {}}`, func(c Config) any { return c.Cluster.Port }, 9200},
		{"byte order mark", "\ufeff{\"Mqtt\": {\"Port\": 1885}}", func(c Config) any { return c.Mqtt.Port }, 1885},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, tt.file), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestEnvOverridesFile(t *testing.T) {
	file := writeConfig(t, `{"Mqtt": {"Port": 1884, "AllowAnonymous": true}, "Logging": {"Level": "debug"},
		"Cluster": {"Seeds": ["a:9200"], "ClusterId": "from-file"}}`)
	tests := []struct {
		name string
		env  func(string) (string, bool)
		got  func(c Config) any
		want any
	}{
		{"no variable keeps the file", env(), func(c Config) any { return c.Mqtt.Port }, 1884},
		{"number", env("COREFLUX_MQTT_PORT", "1999"), func(c Config) any { return c.Mqtt.Port }, 1999},
		{"number with spaces", env("COREFLUX_MQTT_PORT", " 1999 "), func(c Config) any { return c.Mqtt.Port }, 1999},
		{"boolean", env("COREFLUX_MQTT_ALLOW_ANONYMOUS", "false"), func(c Config) any { return c.Mqtt.AllowAnonymous }, false},
		{"string", env("COREFLUX_LOG_LEVEL", "error"), func(c Config) any { return c.Logging.Level }, "error"},
		{"string set empty", env("COREFLUX_CLUSTER_ID", ""), func(c Config) any { return c.Cluster.ClusterId }, ""},
		{"list", env("COREFLUX_CLUSTER_SEEDS", "b:9200; c:9200"), func(c Config) any { return c.Cluster.Seeds }, []string{"b:9200", "c:9200"}},
		{"variable of another field", env("COREFLUX_OPS_PORT", "9300"), func(c Config) any { return [2]int{c.Mqtt.Port, c.Ops.Port} }, [2]int{1884, 9300}},
		{"derived from an overridden field", env("COREFLUX_CLUSTER_PORT", "9400"),
			func(c Config) any { return c.Cluster.AdvertisedPort }, 9400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(file, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestEnvBooleans(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{
		{"true", true}, {"false", false}, {"1", true}, {"0", false},
		{"TRUE", true}, {"False", false}, {" true ", true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.value), func(t *testing.T) {
			c, err := Load("", env("COREFLUX_DURABILITY_ENABLED", tt.value, "COREFLUX_MQTT_RETAIN_AVAILABLE", tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if c.Durability.Enabled != tt.want || c.Mqtt.RetainAvailable != tt.want {
				t.Errorf("got %v and %v, want %v", c.Durability.Enabled, c.Mqtt.RetainAvailable, tt.want)
			}
		})
	}
	for _, bad := range []string{"yes", "on", "2", ""} {
		t.Run("rejects "+strconv.Quote(bad), func(t *testing.T) {
			_, err := Load("", env("COREFLUX_DURABILITY_ENABLED", bad))
			want := "config: COREFLUX_DURABILITY_ENABLED = " + strconv.Quote(bad) + ": want true, false, 1 or 0"
			if got := problemLines(t, err); len(got) != 1 || got[0] != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestSeeds(t *testing.T) {
	want := []string{"a:9200", "b:9200", "c:9200"}
	tests := []struct {
		name, file string
		env        []string
	}{
		{"array", `{"Cluster": {"Seeds": ["a:9200", "b:9200", "c:9200"]}}`, nil},
		{"string with commas", `{"Cluster": {"Seeds": "a:9200,b:9200,c:9200"}}`, nil},
		{"string with semicolons and spaces", `{"Cluster": {"Seeds": "a:9200; b:9200 c:9200"}}`, nil},
		{"environment", `{}`, []string{"COREFLUX_CLUSTER_SEEDS", "a:9200,b:9200,c:9200"}},
		{"environment over the file", `{"Cluster": {"Seeds": ["x:1"]}}`, []string{"COREFLUX_CLUSTER_SEEDS", "a:9200 b:9200;c:9200"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, tt.file), env(tt.env...))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Cluster.Seeds, want) {
				t.Errorf("Seeds = %q, want %q", c.Cluster.Seeds, want)
			}
		})
	}
}

func TestSeedExamples(t *testing.T) {
	tests := []struct {
		file                 string
		discovery, node, dns string
		seeds                int
	}{
		{"seed_seeds.json", "seeds", "broker-a", "", 3},
		{"seed_kubernetes.json", "kubernetes", "coreflux-broker-0", "coreflux-broker-headless.default.svc.cluster.local", 0},
		{"seed_multicast.json", "multicast", "broker-1", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", tt.file), nil)
			if err != nil {
				t.Fatal(err)
			}
			cl := c.Cluster
			if !cl.Enabled || !c.Durability.Enabled || cl.Discovery != tt.discovery || cl.NodeName != tt.node ||
				cl.KubernetesServiceDns != tt.dns || len(cl.Seeds) != tt.seeds || cl.DataPlaneUsername != "cluster" {
				t.Errorf("loaded %+v, durability %v", cl, c.Durability.Enabled)
			}
		})
	}
	t.Run("environment variables (Docker)", func(t *testing.T) {
		c, err := Load("", env(readSeedEnv(t)...))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"broker-a:9200", "broker-b:9200", "broker-c:9200"}
		if cl := c.Cluster; !cl.Enabled || cl.ClusterId != "factory-floor" || cl.NodeName != "broker-a" ||
			!reflect.DeepEqual(cl.Seeds, want) || !c.Durability.Enabled || cl.SharedSecret == "" {
			t.Errorf("loaded %+v", cl)
		}
	})
}

// readSeedEnv reads testdata/seed_env.yaml, the seed's `NAME: "value"` lines.
func readSeedEnv(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "seed_env.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pairs []string
	for s := bufio.NewScanner(f); s.Scan(); {
		name, quoted, ok := strings.Cut(s.Text(), ": ")
		value, err := strconv.Unquote(quoted)
		if !ok || err != nil {
			t.Fatalf("bad line %q", s.Text())
		}
		pairs = append(pairs, name, value)
	}
	return pairs
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.json")
	_, err := Load(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("Load(missing) = %v, want an error naming %s", err, path)
	}
}

// LoadNode reads DataDir/setup.json (the setup wizard's) over the file,
// field by field, and the environment over both; without one it is Load.
// A setup.json with a mistake is refused by its path.
func TestLoadNodeSetupFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gantry.json")
	writeTestFile(t, path, `{"DataDir": `+strconv.Quote(dir)+`, "Durability": {"Enabled": false},
		"Cluster": {"NodeName": "from-file", "ClusterId": "file-cluster"}}`)
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	c, err := LoadNode(path, false, env(nil))
	if err != nil || c.Cluster.NodeName != "from-file" || c.Durability.Enabled {
		t.Fatalf("without setup.json: %v, node %q durability %v", err, c.Cluster.NodeName, c.Durability.Enabled)
	}
	writeTestFile(t, filepath.Join(dir, SetupFile), `{"Cluster": {"Enabled": false, "NodeName": "gw-a"}, "Durability": {"Enabled": true}}`)
	c, err = LoadNode(path, false, env(nil))
	if err != nil || c.Cluster.NodeName != "gw-a" || !c.Durability.Enabled || c.Cluster.ClusterId != "file-cluster" {
		t.Fatalf("with setup.json: %v, node %q durability %v cluster %q", err, c.Cluster.NodeName, c.Durability.Enabled, c.Cluster.ClusterId)
	}
	c, err = LoadNode(path, false, env(map[string]string{"COREFLUX_DURABILITY_ENABLED": "false"}))
	if err != nil || c.Durability.Enabled {
		t.Fatalf("the environment must win over setup.json: %v, durability %v", err, c.Durability.Enabled)
	}
	writeTestFile(t, filepath.Join(dir, SetupFile), `{"Durability": {"Enabeld": true}}`)
	if _, err := LoadNode(path, false, env(nil)); err == nil || !strings.Contains(err.Error(), SetupFile) || !strings.Contains(err.Error(), "Enabeld") {
		t.Fatalf("a bad setup.json: %v", err)
	}
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
