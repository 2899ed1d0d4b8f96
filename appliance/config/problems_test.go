package config

import (
	"strings"
	"testing"
)

// TestProblems loads bad configurations and checks every reported line.
// Problems of the Cluster section do not make Load fail (the node runs
// without clustering): they come from ClusterProblems, or after the others
// when something else does.
func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		file string   // "" means no file
		env  []string // pairs
		want []string
	}{
		{"unknown top-level key", `{"Colour": 1}`, nil,
			[]string{`config: unknown key "Colour"`}},
		{"unknown nested key", `{"Mqtt": {"Prot": 1884}}`, nil,
			[]string{`config: unknown key "Mqtt.Prot" (did you mean "Mqtt.Port"?)`}},
		{"key in the wrong case", `{"mqtt": {}, "Cluster": {"nodeName": "a"}}`, nil, []string{
			`config: unknown key "mqtt" (did you mean "Mqtt"?)`,
			`config: unknown key "Cluster.nodeName" (did you mean "Cluster.NodeName"?)`}},
		{"duplicate key", `{"Mqtt": {"Port": 1, "Port": 2}}`, nil,
			[]string{`config: duplicate key "Mqtt.Port"`}},
		{"string for an integer", `{"Mqtt": {"Port": "1883"}}`, nil,
			[]string{`config: Mqtt.Port = "1883": want an integer`}},
		{"fraction for an integer", `{"Mqtt": {"Port": 1883.5}}`, nil,
			[]string{`config: Mqtt.Port = 1883.5: want an integer`}},
		{"string for a boolean", `{"Durability": {"Enabled": "true"}}`, nil,
			[]string{`config: Durability.Enabled = "true": want true or false`}},
		{"number for a string", `{"Logging": {"Level": 3}}`, nil,
			[]string{`config: Logging.Level = 3: want a string`}},
		{"null", `{"Ops": {"Port": null}}`, nil,
			[]string{`config: Ops.Port = null: want an integer`}},
		{"object for a list", `{"Cluster": {"Seeds": {"a": 1}}}`, nil,
			[]string{`config: Cluster.Seeds = {"a":1}: want a string or an array of strings`}},
		{"number in a list", `{"Cluster": {"Seeds": ["a:1", 2]}}`, nil,
			[]string{`config: Cluster.Seeds = ["a:1",2]: want a string or an array of strings`}},
		{"section not an object", `{"Mqtt": [1883]}`, nil,
			[]string{`config: Mqtt = [1883]: want an object`}},
		{"out of range mqtt", `{"Mqtt": {"Port": 70000, "MaxPacketSize": 10}}`, nil, []string{
			`config: Mqtt.Port = 70000, want 0..65535`,
			`config: Mqtt.MaxPacketSize = 10, want 64..268435455`}},
		{"out of range negative uint32", `{"Mqtt": {"MaxSessionExpirySeconds": -1}}`, nil,
			[]string{`config: Mqtt.MaxSessionExpirySeconds = -1, want 0..4294967295`}},
		{"out of range beyond uint32", `{"Mqtt": {"MaxSessionExpirySeconds": 4294967296}}`, nil,
			[]string{`config: Mqtt.MaxSessionExpirySeconds = 4294967296, want 0..4294967295`}},
		{"out of range beyond int64", `{"Ops": {"Port": 99999999999999999999}}`, nil,
			[]string{`config: Ops.Port = 99999999999999999999, want 0..65535`}},
		{"out of range ops", `{"Ops": {"Port": -1}}`, nil,
			[]string{`config: Ops.Port = -1, want 0..65535`}},
		{"not an IP", `{"Ops": {"BindIP": "localhost"}}`, nil,
			[]string{`config: Ops.BindIP = "localhost", want an IP address`}},
		{"logging values", `{"Logging": {"Level": "verbose", "Format": "xml"}}`, nil, []string{
			`config: Logging.Level = "verbose", want debug, info, warn or error`,
			`config: Logging.Format = "xml", want text or json`}},
		{"empty data dir", `{"DataDir": ""}`, nil,
			[]string{`config: DataDir = "", want a value`}},
		{"out of range cluster", `{"Cluster": {"ReplicationFactor": 9, "HeartbeatThreshold": 0.9, "MemberAddResignSeconds": 5}}`, nil, []string{
			`config: Cluster.ReplicationFactor = 9, want 0..7`,
			`config: Cluster.MemberAddResignSeconds = 5, want 0 or 15..3600`,
			`config: Cluster.HeartbeatThreshold = 0.9, want 0.05..0.5`}},
		{"cluster values", `{"Cluster": {"Discovery": "dns", "Topology": "star", "MulticastGroup": "10.0.0.1"}}`, nil, []string{
			`config: Cluster.Discovery = "dns", want seeds, kubernetes, multicast or zeroconf`,
			`config: Cluster.MulticastGroup = "10.0.0.1", want a multicast IP address`,
			`config: Cluster.Topology = "star", want mesh or ring`}},
		{"bad seed address", `{"Cluster": {"Seeds": ["a:9200", "b", "c:0", ":9200"]}}`, nil, []string{
			`config: Cluster.Seeds[1] = "b", want host:port`,
			`config: Cluster.Seeds[2] = "c:0", want host:port`,
			`config: Cluster.Seeds[3] = ":9200", want host:port`}},
		{"environment not a number", "", []string{"COREFLUX_MQTT_PORT", "abc"},
			[]string{`config: COREFLUX_MQTT_PORT = "abc": want an integer`}},
		{"environment not a float", "", []string{"COREFLUX_CLUSTER_HEARTBEAT_THRESHOLD", "NaN"},
			[]string{`config: COREFLUX_CLUSTER_HEARTBEAT_THRESHOLD = "NaN": want a number`}},
		{"environment out of range", "", []string{"COREFLUX_MQTT_PORT", "70000"},
			[]string{`config: Mqtt.Port = 70000, want 0..65535 (from COREFLUX_MQTT_PORT)`}},
		{"environment beyond the type", "", []string{"COREFLUX_MQTT_MAX_SESSION_EXPIRY_SECONDS", "5000000000"},
			[]string{`config: Mqtt.MaxSessionExpirySeconds = 5000000000, want 0..4294967295 (from COREFLUX_MQTT_MAX_SESSION_EXPIRY_SECONDS)`}},
		{"syntax error", "{\n  \"Mqtt\": {\"Port\": 1883,}\n}", nil,
			[]string{`config: gantry.json:2:25: invalid character '}' looking for beginning of object key string`}},
		{"syntax error after blank lines", "\n\n{\"Mqtt\": {},}", nil,
			[]string{`config: gantry.json:3:13: invalid character '}' looking for beginning of object key string`}},
		{"truncated", `{"Mqtt": {"Port": 1883}`, nil,
			[]string{`config: gantry.json:1:24: unexpected end of file`}},
		{"trailing data", `{} {}`, nil,
			[]string{`config: gantry.json:1:4: unexpected data after the top-level object`}},
		{"not an object", `[1, 2]`, nil,
			[]string{`config: gantry.json: want a JSON object at the top level`}},
		{"empty file", " \n", nil,
			[]string{`config: gantry.json: empty file, want a JSON object`}},
		{"several problems together", `{"Mqtt": {"Prot": 1, "Port": 70000, "TlsPort": "x"}, "Logging": {"Level": "loud"},
			"Cluster": {"ElectionTimeoutUpperMs": 100}}`,
			[]string{"COREFLUX_OPS_PORT", "x", "COREFLUX_CLUSTER_PARTITION_COUNT", "0"}, []string{
				`config: unknown key "Mqtt.Prot" (did you mean "Mqtt.Port"?)`,
				`config: Mqtt.TlsPort = "x": want an integer`,
				`config: COREFLUX_OPS_PORT = "x": want an integer`,
				`config: Mqtt.Port = 70000, want 0..65535`,
				`config: Logging.Level = "loud", want debug, info, warn or error`,
				`config: Cluster.PartitionCount = 0, want 1..4096 (from COREFLUX_CLUSTER_PARTITION_COUNT)`,
				`config: Cluster.ElectionTimeoutUpperMs = 100, want more than Cluster.ElectionTimeoutLowerMs (150)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeConfig(t, tt.file)
			}
			c, err := Load(path, env(tt.env...))
			got := problemLines(t, err)
			if err == nil {
				got = c.ClusterProblems()
			}
			for i := range got { // name the file as the cases do
				if path != "" {
					got[i] = strings.Replace(got[i], path, "gantry.json", 1)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

// TestRules checks the rules across fields, on a Config built in code.
func TestRules(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string
	}{
		{"defaults pass", func(c *Config) {}, nil},
		{"upper election timeout equal to lower", func(c *Config) { c.Cluster.ElectionTimeoutUpperMs = 150 },
			[]string{`config: Cluster.ElectionTimeoutUpperMs = 150, want more than Cluster.ElectionTimeoutLowerMs (150)`}},
		{"rpc timeout not shorter than lower", func(c *Config) { c.Cluster.ElectionRpcTimeoutMs = 150 },
			[]string{`config: Cluster.ElectionRpcTimeoutMs = 150, want 0 or less than Cluster.ElectionTimeoutLowerMs (150)`}},
		{"rpc timeout shorter than lower", func(c *Config) { c.Cluster.ElectionRpcTimeoutMs = 149 }, nil},
		{"seeds required with seeds discovery", func(c *Config) { enable(c, DiscoverySeeds) },
			[]string{`config: Cluster.Seeds = [], want at least one host:port with seeds discovery`}},
		{"seeds present", func(c *Config) { enable(c, DiscoverySeeds); c.Cluster.Seeds = []string{"a:9200"} }, nil},
		{"seeds not required while clustering is off", func(c *Config) { c.Cluster.Discovery = DiscoverySeeds }, nil},
		{"service DNS required with kubernetes", func(c *Config) { enable(c, DiscoveryKubernetes) },
			[]string{`config: Cluster.KubernetesServiceDns = "", want the headless Service's DNS name with kubernetes discovery`}},
		{"multicast needs neither", func(c *Config) { enable(c, DiscoveryMulticast) }, nil},
		{"zeroconf needs neither", func(c *Config) { enable(c, DiscoveryZeroconf) }, nil},
		{"cluster identity required", func(c *Config) { enable(c, DiscoveryMulticast); c.Cluster.ClusterId = ""; c.Cluster.NodeName = "" }, []string{
			`config: Cluster.ClusterId = "", want a name when Cluster.Enabled is true`,
			`config: Cluster.NodeName = "", want a name when Cluster.Enabled is true (the host name is unknown)`}},
		{"certificate without key", func(c *Config) { c.Mqtt.CertFile = "server.crt" },
			[]string{`config: Mqtt.KeyFile = "", want the key of Mqtt.CertFile`}},
		{"key without certificate", func(c *Config) { c.Mqtt.KeyFile = "server.key" },
			[]string{`config: Mqtt.CertFile = "", want the certificate of Mqtt.KeyFile`}},
		{"client CA without TLS", func(c *Config) { c.Mqtt.ClientCaFile = "ca.pem" },
			[]string{`config: Mqtt.ClientCaFile = "ca.pem", want Mqtt.CertFile and Mqtt.KeyFile set too (client certificates need the TLS listener)`}},
		{"server keep-alive above the cap", func(c *Config) { c.Mqtt.MaxKeepAliveSeconds = 60; c.Mqtt.ServerKeepAliveSeconds = 120 },
			[]string{`config: Mqtt.ServerKeepAliveSeconds = 120, want at most Mqtt.MaxKeepAliveSeconds (60)`}},
		{"ports clash", func(c *Config) { c.Mqtt.WebSocketPort = 1883; c.Ops.Port = 1883 }, []string{
			`config: Mqtt.WebSocketPort = 1883, want a port not taken by Mqtt.Port`,
			`config: Ops.Port = 1883, want a port not taken by Mqtt.Port`}},
		{"same port on other addresses", func(c *Config) {
			c.Mqtt.BindIP, c.Ops.BindIP, c.Ops.Port = "127.0.0.1", "127.0.0.2", 1883
		}, nil},
		{"ipv4 port and ipv6 loopback", func(c *Config) { c.Ops.BindIP, c.Ops.Port = "::1", 1883 }, nil},
		{"TLS port clashes only when on", func(c *Config) { c.Mqtt.TlsPort = 9100 }, nil},
		{"TLS port clash", func(c *Config) { c.Mqtt.TlsPort, c.Mqtt.CertFile, c.Mqtt.KeyFile = 9100, "c", "k" },
			[]string{`config: Ops.Port = 9100, want a port not taken by Mqtt.TlsPort`}},
		{"cluster port clash", func(c *Config) { enable(c, DiscoveryMulticast); c.Cluster.Port = 1883 },
			[]string{`config: Cluster.Port = 1883, want a port not taken by Mqtt.Port`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			got := problemLines(t, c.Validate())
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func enable(c *Config, discovery string) {
	c.Cluster.Enabled = true
	c.Cluster.Discovery = discovery
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string
	}{
		{"defaults", func(c *Config) {}, nil},
		{"development", func(c *Config) { *c = Dev() }, nil},
		{"anonymous from anywhere", func(c *Config) { c.Mqtt.AllowAnonymous = true },
			[]string{"config: Mqtt.AllowAnonymous is true: clients from any address may connect without a user name"}},
		{"bare cluster", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.ReplicationFactor = 1 }, []string{
			"config: Cluster.SharedSecret is empty: traffic between nodes is not signed; set it in production",
			"config: Cluster.DataPlaneUsername is empty: nodes do not exchange messages or LoT changes",
			"config: Durability.Enabled is false with clustering on: queued messages and retained messages of this node do not survive its restart",
			"config: Cluster.ReplicationFactor is 1: an acknowledged message does not survive the loss of its node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			if got := c.Warnings(); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
