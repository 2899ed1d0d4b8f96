package config

import (
	"strings"
	"testing"
)

// TestContractNames checks the names, defaults and ranges that DESIGN.md
// and the Coreflux configuration reference (the seed document) fix.
// Defaults are in docs form: derived ones as Markdown renders them.
func TestContractNames(t *testing.T) {
	tests := []struct{ path, env, def, rng string }{
		{"DataDir", "COREFLUX_DATA_DIR", "`./data`", ""},
		{"Mqtt.Port", "COREFLUX_MQTT_PORT", "`1883`", "0..65535"},
		{"Mqtt.BindIP", "COREFLUX_MQTT_BIND_IP", "`0.0.0.0`", ""},
		{"Mqtt.TlsPort", "COREFLUX_MQTT_TLS_PORT", "`8883`", "0..65535"},
		{"Mqtt.CertFile", "COREFLUX_MQTT_CERT_FILE", "—", ""},
		{"Mqtt.KeyFile", "COREFLUX_MQTT_KEY_FILE", "—", ""},
		{"Mqtt.ClientCaFile", "COREFLUX_MQTT_CLIENT_CA_FILE", "—", ""},
		{"Mqtt.WebSocketPort", "COREFLUX_MQTT_WEBSOCKET_PORT", "`8083`", "0..65535"},
		{"Mqtt.AllowAnonymous", "COREFLUX_MQTT_ALLOW_ANONYMOUS", "`false`", ""},
		{"Mqtt.MaxPacketSize", "COREFLUX_MQTT_MAX_PACKET_SIZE", "`1048576`", "64..268435455"},
		{"Ops.Port", "COREFLUX_OPS_PORT", "`9100`", "0..65535"},
		{"Ops.BindIP", "COREFLUX_OPS_BIND_IP", "same as `Mqtt.BindIP`", ""},
		{"Logging.Level", "COREFLUX_LOG_LEVEL", "`info`", ""},
		{"Logging.Format", "COREFLUX_LOG_FORMAT", "`text`", ""},
		{"Durability.Enabled", "COREFLUX_DURABILITY_ENABLED", "`false`", ""},

		{"Cluster.Enabled", "COREFLUX_CLUSTER_ENABLED", "`false`", ""},
		{"Cluster.ClusterId", "COREFLUX_CLUSTER_ID", "`coreflux-cluster`", ""},
		{"Cluster.NodeName", "COREFLUX_CLUSTER_NODE_NAME", "host name", ""},
		{"Cluster.Discovery", "COREFLUX_CLUSTER_DISCOVERY", "`multicast`", ""},
		{"Cluster.Seeds", "COREFLUX_CLUSTER_SEEDS", "—", ""},
		{"Cluster.KubernetesServiceDns", "COREFLUX_CLUSTER_K8S_SERVICE_DNS", "—", ""},
		{"Cluster.KubernetesPeerPort", "COREFLUX_CLUSTER_K8S_PEER_PORT", "same as `Cluster.Port`", "0..65535"},
		{"Cluster.MulticastGroup", "COREFLUX_CLUSTER_MULTICAST_GROUP", "`239.63.114.71`", ""},
		{"Cluster.MulticastPort", "COREFLUX_CLUSTER_MULTICAST_PORT", "`9201`", "1..65535"},
		{"Cluster.SharedSecret", "COREFLUX_CLUSTER_SHARED_SECRET", "—", ""},
		{"Cluster.BindIP", "COREFLUX_CLUSTER_BIND_IP", "same as `Mqtt.BindIP`", ""},
		{"Cluster.Port", "COREFLUX_CLUSTER_PORT", "`9200`", "1..65535"},
		{"Cluster.AdvertisedHost", "COREFLUX_CLUSTER_ADVERTISED_HOST", "same as `Cluster.NodeName`", ""},
		{"Cluster.AdvertisedPort", "COREFLUX_CLUSTER_ADVERTISED_PORT", "same as `Cluster.Port`", "0..65535"},
		{"Cluster.DataPlaneUsername", "COREFLUX_CLUSTER_DATAPLANE_USERNAME", "—", ""},
		{"Cluster.DataPlaneMqttPort", "COREFLUX_CLUSTER_DATAPLANE_MQTT_PORT", "same as `Mqtt.Port`", "0..65535"},
		{"Cluster.DataPlaneEnabled", "COREFLUX_CLUSTER_DATAPLANE_ENABLED", "`true`", ""},
		{"Cluster.Topology", "COREFLUX_CLUSTER_TOPOLOGY", "`mesh`", ""},
		{"Cluster.UseTls", "COREFLUX_CLUSTER_TLS", "`false`", ""},
		{"Cluster.DataDir", "COREFLUX_CLUSTER_DATA_DIR", "`cluster` in the top-level `DataDir`", ""},
		{"Cluster.PublishInternalRoutes", "COREFLUX_CLUSTER_PUBLISH_INTERNAL_ROUTES", "`false`", ""},
		{"Cluster.ReplicationEnabled", "COREFLUX_CLUSTER_REPLICATION_ENABLED", "`true`", ""},
		{"Cluster.QuorumGateEnabled", "COREFLUX_CLUSTER_QUORUM_GATE", "`true`", ""},
		{"Cluster.ReplicationFactor", "COREFLUX_CLUSTER_REPLICATION_FACTOR", "`0`", "0..7"},
		{"Cluster.PartitionCount", "COREFLUX_CLUSTER_PARTITION_COUNT", "`32`", "1..4096"},
		{"Cluster.ReplicationTimeoutMs", "COREFLUX_CLUSTER_REPLICATION_TIMEOUT_MS", "`5000`", "100..60000"},
		{"Cluster.ReplicationWindow", "COREFLUX_CLUSTER_REPLICATION_WINDOW", "`1024`", "1..65536"},
		{"Cluster.ReplicationReplaySeconds", "COREFLUX_CLUSTER_REPLICATION_REPLAY_SECONDS", "`300`", "0..86400"},
		{"Cluster.ReplicationForwardQueueEntries", "COREFLUX_CLUSTER_REPLICATION_FORWARD_QUEUE_ENTRIES", "`8192`", "64..1000000"},
		{"Cluster.ReplicationCompactEveryRecords", "COREFLUX_CLUSTER_REPLICATION_COMPACT_EVERY", "`50000`", "1000..10000000"},
		{"Cluster.ReplicationDedupDelivered", "COREFLUX_CLUSTER_REPLICATION_DEDUP_DELIVERED", "`true`", ""},
		{"Cluster.ReplicationTrace", "COREFLUX_CLUSTER_REPLICATION_TRACE", "`false`", ""},
		{"Cluster.ReplicationTraceMaxMegabytes", "COREFLUX_CLUSTER_REPLICATION_TRACE_MAX_MB", "`512`", "8..8192"},
		{"Cluster.BootstrapGraceSeconds", "COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS", "`30`", "1..3600"},
		{"Cluster.BootstrapPeerCheck", "COREFLUX_CLUSTER_BOOTSTRAP_PEER_CHECK", "`true`", ""},
		{"Cluster.PeerOpsPort", "COREFLUX_CLUSTER_PEER_OPS_PORT", "same as `Ops.Port`", "0..65535"},
		{"Cluster.MemberRemovalGraceSeconds", "COREFLUX_CLUSTER_MEMBER_REMOVAL_GRACE_SECONDS", "`300`", "0..86400"},
		{"Cluster.MemberAbsentFromDiscoverySeconds", "COREFLUX_CLUSTER_MEMBER_ABSENT_FROM_DISCOVERY_SECONDS", "`120`", "10..86400"},
		{"Cluster.MemberAddResignSeconds", "COREFLUX_CLUSTER_MEMBER_ADD_RESIGN_SECONDS", "`60`", "0 or 15..3600"},
		{"Cluster.ElectionTimeoutLowerMs", "COREFLUX_CLUSTER_ELECTION_LOWER_MS", "`150`", "10..60000"},
		{"Cluster.ElectionTimeoutUpperMs", "COREFLUX_CLUSTER_ELECTION_UPPER_MS", "`300`", "11..120000"},
		{"Cluster.ElectionRpcTimeoutMs", "COREFLUX_CLUSTER_ELECTION_RPC_TIMEOUT_MS", "`0`", "0..60000"},
		{"Cluster.HeartbeatThreshold", "COREFLUX_CLUSTER_HEARTBEAT_THRESHOLD", "`0.25`", "0.05..0.5"},
		{"Cluster.RaftTransport", "COREFLUX_CLUSTER_RAFT_TRANSPORT", "`Deadline`", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			f := schema.byPath[tt.path]
			if f == nil {
				t.Fatalf("no field %s", tt.path)
			}
			if f.env != tt.env || defaultCell(f) != tt.def || f.rng != tt.rng {
				t.Errorf("env %s, default %s, range %q; want %s, %s, %q", f.env, defaultCell(f), f.rng, tt.env, tt.def, tt.rng)
			}
		})
	}
	var clusterFields int
	for _, f := range schema.fields {
		if strings.HasPrefix(f.path, "Cluster.") {
			clusterFields++
		}
	}
	if clusterFields != 44 {
		t.Errorf("Cluster has %d fields, the seed's reference 44", clusterFields)
	}
}

func TestEnvNames(t *testing.T) {
	seen := map[string]string{}
	for _, f := range schema.fields {
		if !strings.HasPrefix(f.env, "COREFLUX_") {
			t.Errorf("%s: variable %s lacks the COREFLUX_ prefix", f.path, f.env)
		}
		if other, dup := seen[f.env]; dup {
			t.Errorf("%s and %s share %s", other, f.path, f.env)
		}
		seen[f.env] = f.path
		if strings.HasPrefix(f.path, "Mqtt.") && f.env != "COREFLUX_MQTT_"+upperSnake(f.name) &&
			!fixedByDesign[f.path] {
			t.Errorf("%s: variable %s, want COREFLUX_MQTT_%s", f.path, f.env, upperSnake(f.name))
		}
	}
}

// fixedByDesign are the Mqtt variables DESIGN.md names, exceptions to the
// COREFLUX_MQTT_<UPPER_SNAKE> pattern.
var fixedByDesign = map[string]bool{"Mqtt.BindIP": true, "Mqtt.TlsPort": true, "Mqtt.WebSocketPort": true}

func upperSnake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"commas", "a:1,b:2,c:3", []string{"a:1", "b:2", "c:3"}},
		{"semicolons", "a:1;b:2", []string{"a:1", "b:2"}},
		{"spaces and tabs", " a:1 \tb:2\n", []string{"a:1", "b:2"}},
		{"mixed with empties", "a:1,, ;b:2", []string{"a:1", "b:2"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitList(tt.in)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || (got == nil) != (tt.want == nil) {
				t.Errorf("splitList(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	keys := schema.keys["Mqtt"]
	tests := []struct{ key, want string }{
		{"Prot", "Port"},
		{"port", "Port"},
		{"MaxPacketSise", "MaxPacketSize"},
		{"Color", ""},
		{"X", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := suggest(tt.key, keys); got != tt.want {
				t.Errorf("suggest(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}
