package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Config is the whole configuration of one node. Every field is described
// once, by its struct tags (see the package documentation); Default, Load,
// Validate and Markdown are all derived from them.
type Config struct {
	DataDir    string     `json:"DataDir" env:"COREFLUX_DATA_DIR" default:"./data" required:"true" format:"path" doc:"Directory of the node's state: users, the initial root password, durable sessions and retained messages, and the cluster's data unless Cluster.DataDir says otherwise. Must be on persistent storage."`
	Mqtt       Mqtt       `json:"Mqtt" doc:"MQTT listeners (TCP, TLS, WebSocket), client authentication and the limits the broker enforces per client."`
	Ops        Ops        `json:"Ops" doc:"The operations HTTP server: /health, /info, /metrics, /cluster and the web console under /ui/."`
	Logging    Logging    `json:"Logging" doc:"Log output on standard error."`
	Durability Durability `json:"Durability" doc:"MQTT state durability: persistent sessions, their subscriptions, the messages queued for them and retained messages survive a restart of the node. Turn it on on every node of a cluster."`
	Cluster    Cluster    `json:"Cluster" doc:"High-availability clustering, compatible with the Cluster section of the Coreflux broker. Use the same values on every node, except NodeName, AdvertisedHost and BindIP."`

	// clusterProblems are the validation problems of the Cluster section:
	// they do not stop the node, only clustering (see ClusterProblems).
	clusterProblems []string
}

// ClusterProblems lists the problems Load found in the Cluster section,
// one line each as in Error. They do not make Load fail: the node runs
// without clustering, as the Coreflux reference requires ("clustering does
// not start, the log names the problem"), and the caller logs them.
func (c *Config) ClusterProblems() []string { return c.clusterProblems }

// Mqtt configures the MQTT listeners and the broker's limits.
type Mqtt struct {
	Port                      int    `json:"Port" env:"COREFLUX_MQTT_PORT" default:"1883" range:"0..65535" doc:"MQTT over TCP port. 0 turns the TCP listener off."`
	BindIP                    string `json:"BindIP" env:"COREFLUX_MQTT_BIND_IP" default:"0.0.0.0" format:"ip" doc:"Address the MQTT listeners bind, and every other listener whose own bind address is not set (Ops.BindIP, Cluster.BindIP)."`
	TlsPort                   int    `json:"TlsPort" env:"COREFLUX_MQTT_TLS_PORT" default:"8883" range:"0..65535" doc:"MQTT over TLS port. The TLS listener is on only when CertFile is set; 0 turns it off."`
	CertFile                  string `json:"CertFile" env:"COREFLUX_MQTT_CERT_FILE" format:"path" doc:"PEM certificate (chain) of the TLS listener. Setting it turns the TLS listener on; KeyFile must be set with it."`
	KeyFile                   string `json:"KeyFile" env:"COREFLUX_MQTT_KEY_FILE" format:"path" doc:"PEM private key of CertFile."`
	ClientCaFile              string `json:"ClientCaFile" env:"COREFLUX_MQTT_CLIENT_CA_FILE" format:"path" doc:"PEM bundle of the certificate authorities that sign client certificates. When set, TLS clients must present a certificate signed by one of them (mutual TLS). Needs CertFile."`
	WebSocketPort             int    `json:"WebSocketPort" env:"COREFLUX_MQTT_WEBSOCKET_PORT" default:"8083" range:"0..65535" doc:"MQTT over WebSocket port. 0 turns the WebSocket listener off."`
	AllowAnonymous            bool   `json:"AllowAnonymous" env:"COREFLUX_MQTT_ALLOW_ANONYMOUS" default:"false" doc:"Accepts clients that connect without a user name."`
	AnonymousLoopbackOnly     bool   `json:"AnonymousLoopbackOnly" env:"COREFLUX_MQTT_ANONYMOUS_LOOPBACK_ONLY" default:"false" doc:"With AllowAnonymous, accepts anonymous clients only from loopback source addresses (127.0.0.0/8, ::1); others must log in."`
	MaxPacketSize             int    `json:"MaxPacketSize" env:"COREFLUX_MQTT_MAX_PACKET_SIZE" default:"1048576" range:"64..268435455" doc:"Largest MQTT packet the broker accepts, in bytes (1 MiB by default). A client that sends a larger one is disconnected (MQTT 5 reason 0x95). Announced to MQTT 5 clients as Maximum Packet Size."`
	ReceiveMaximum            int    `json:"ReceiveMaximum" env:"COREFLUX_MQTT_RECEIVE_MAXIMUM" default:"1024" range:"1..65535" doc:"QoS 1/2 publishes a client may have unacknowledged towards the broker at once. Announced to MQTT 5 clients as Receive Maximum."`
	MaxInflight               int    `json:"MaxInflight" env:"COREFLUX_MQTT_MAX_INFLIGHT" default:"1024" range:"1..65535" doc:"QoS 1/2 messages the broker sends a client before it waits for acknowledgements; an MQTT 5 client's smaller Receive Maximum wins."`
	MaxQueuedMessages         int    `json:"MaxQueuedMessages" env:"COREFLUX_MQTT_MAX_QUEUED_MESSAGES" default:"10000" range:"1..10000000" doc:"Messages queued per session while the client is offline or slow. Beyond it the oldest queued message is dropped and counted (gantry_messages_dropped_total)."`
	MaxSessionExpirySeconds   uint32 `json:"MaxSessionExpirySeconds" env:"COREFLUX_MQTT_MAX_SESSION_EXPIRY_SECONDS" default:"0" range:"0..4294967295" doc:"Longest session expiry the broker grants, in seconds; a client asking for more (or an MQTT 3.1.1 persistent session) gets this value. 0 = no cap: the client's value is kept, and 4294967295 means the session never expires. MaxQueuedMessages bounds what an abandoned session costs."`
	TopicAliasMaximum         int    `json:"TopicAliasMaximum" env:"COREFLUX_MQTT_TOPIC_ALIAS_MAXIMUM" default:"64" range:"0..65535" doc:"Topic aliases an MQTT 5 client may use towards the broker. 0 turns topic aliases off."`
	MaxKeepAliveSeconds       int    `json:"MaxKeepAliveSeconds" env:"COREFLUX_MQTT_MAX_KEEP_ALIVE_SECONDS" default:"0" range:"0..65535" doc:"Longest keep-alive the broker accepts; a longer (or zero) client keep-alive is replaced by this value (MQTT 5 Server Keep Alive). 0 = no cap."`
	ServerKeepAliveSeconds    int    `json:"ServerKeepAliveSeconds" env:"COREFLUX_MQTT_SERVER_KEEP_ALIVE_SECONDS" default:"0" range:"0..65535" doc:"Keep-alive the broker imposes on every MQTT 5 client. 0 = accept the client's. Must not exceed MaxKeepAliveSeconds when that is set."`
	MaxConnections            int    `json:"MaxConnections" env:"COREFLUX_MQTT_MAX_CONNECTIONS" default:"0" range:"0..100000000" doc:"Client connections the node accepts at once, over all listeners; beyond it a CONNECT is refused (reason 0x97, quota exceeded; MQTT 3.1.1 return code 3) and counted (gantry_connections_refused_total). 0 = unlimited."`
	MaxConnectionsPerListener int    `json:"MaxConnectionsPerListener" env:"COREFLUX_MQTT_MAX_CONNECTIONS_PER_LISTENER" default:"0" range:"0..100000000" doc:"Client connections each MQTT listener (TCP, TLS, WebSocket) accepts at once, within MaxConnections; beyond it a CONNECT on that listener is refused like one beyond MaxConnections. 0 = unlimited."`
	MaxConnectRatePerSecond   int    `json:"MaxConnectRatePerSecond" env:"COREFLUX_MQTT_MAX_CONNECT_RATE_PER_SECOND" default:"0" range:"0..1000000" doc:"New connections the node takes per second over all listeners, in bursts of up to as many; beyond it a CONNECT is refused before authentication (reason 0x9F, connection rate exceeded; MQTT 3.1.1 return code 3) and counted (gantry_connect_rate_refused_total). Refused clients retry, so it smooths a reconnect storm after an outage. 0 = unlimited."`
	MaxSubscriptionsPerClient int    `json:"MaxSubscriptionsPerClient" env:"COREFLUX_MQTT_MAX_SUBSCRIPTIONS_PER_CLIENT" default:"0" range:"0..10000000" doc:"Subscriptions one session may hold; beyond it a SUBSCRIBE is refused (reason 0x97). 0 = unlimited."`
	ConnectTimeoutSeconds     int    `json:"ConnectTimeoutSeconds" env:"COREFLUX_MQTT_CONNECT_TIMEOUT_SECONDS" default:"10" range:"1..3600" doc:"Time a new connection has to send its CONNECT packet before it is closed and counted (gantry_connect_timeouts_total)."`
	MaxOutboundBytesPerClient int    `json:"MaxOutboundBytesPerClient" env:"COREFLUX_MQTT_MAX_OUTBOUND_BYTES_PER_CLIENT" default:"8388608" range:"0..2147483647" doc:"Bytes waiting to be written to one client connection (8 MiB by default). A client that reads more slowly than its messages arrive loses the QoS 0 messages beyond it, counted (gantry_slow_consumer_drops_total); its QoS 1/2 messages wait in its session queue (MaxQueuedMessages). 0 = unlimited."`
	StuckClientTimeoutSeconds int    `json:"StuckClientTimeoutSeconds" env:"COREFLUX_MQTT_STUCK_CLIENT_TIMEOUT_SECONDS" default:"30" range:"1..3600" doc:"A client whose connection takes no data for this long while the broker has data for it (it stopped reading) is disconnected and counted (gantry_slow_consumer_disconnects_total)."`
	RetainAvailable           bool   `json:"RetainAvailable" env:"COREFLUX_MQTT_RETAIN_AVAILABLE" default:"true" doc:"Stores retained messages. When false, a publish with the retain flag is refused (MQTT 5 reason 0x9A)."`
	MaxTopicLevels            int    `json:"MaxTopicLevels" env:"COREFLUX_MQTT_MAX_TOPIC_LEVELS" default:"0" range:"0..65535" doc:"Levels a topic name or filter may have (a shared subscription's $share/{group}/ prefix does not count). A PUBLISH or will with a deeper topic is refused as invalid (reason 0x90), a deeper subscription gets SUBACK 0x8F; counted (gantry_topic_levels_exceeded_total). 0 = unlimited."`
}

// Ops configures the operations HTTP server.
type Ops struct {
	Port               int    `json:"Port" env:"COREFLUX_OPS_PORT" default:"9100" range:"0..65535" doc:"Operations HTTP port (health, metrics, cluster view, web console). 0 turns it off."`
	BindIP             string `json:"BindIP" env:"COREFLUX_OPS_BIND_IP" derive:"Mqtt.BindIP" format:"ip" doc:"Address the operations server binds."`
	SysIntervalSeconds int    `json:"SysIntervalSeconds" env:"COREFLUX_OPS_SYS_INTERVAL_SECONDS" default:"10" range:"0..3600" doc:"How often the retained $SYS/broker/... statistics topics are refreshed (a topic is republished only when its value changed). 0 turns them off."`
}

// Logging configures the log output.
type Logging struct {
	Level  string `json:"Level" env:"COREFLUX_LOG_LEVEL" default:"info" values:"debug|info|warn|error" doc:"Least severe level written."`
	Format string `json:"Format" env:"COREFLUX_LOG_FORMAT" default:"text" values:"text|json" doc:"text writes key=value lines (log/slog TextHandler); json writes one JSON object per line."`
}

// Durability configures MQTT state durability.
type Durability struct {
	Enabled bool `json:"Enabled" env:"COREFLUX_DURABILITY_ENABLED" default:"false" doc:"Keeps persistent sessions, their subscriptions and queued messages, and retained messages on disk under DataDir, so that they survive a restart. A production cluster needs it on every node."`
}

// Discovery modes of Cluster.Discovery.
const (
	DiscoverySeeds      = "seeds"
	DiscoveryKubernetes = "kubernetes"
	DiscoveryMulticast  = "multicast"
	DiscoveryZeroconf   = "zeroconf"
)

// Cluster configures high-availability clustering. Field names, defaults,
// ranges and environment variables follow the Coreflux configuration
// reference; Discovery also accepts zeroconf.
type Cluster struct {
	Enabled              bool     `json:"Enabled" env:"COREFLUX_CLUSTER_ENABLED" default:"false" group:"Identity and discovery" doc:"Turns clustering on."`
	ClusterId            string   `json:"ClusterId" env:"COREFLUX_CLUSTER_ID" default:"coreflux-cluster" doc:"Name of the cluster. Required."`
	NodeName             string   `json:"NodeName" env:"COREFLUX_CLUSTER_NODE_NAME" derive:"hostname" doc:"This node's identity in the cluster. Must be unique and must not change; in Kubernetes, use the StatefulSet pod name."`
	Discovery            string   `json:"Discovery" env:"COREFLUX_CLUSTER_DISCOVERY" default:"multicast" values:"seeds|kubernetes|multicast|zeroconf" doc:"How nodes find each other: seeds (the Seeds list), kubernetes (a headless Service), multicast (UDP on one LAN) or zeroconf (mDNS/DNS-SD on one LAN; a Gantry extension)."`
	Seeds                []string `json:"Seeds" env:"COREFLUX_CLUSTER_SEEDS" format:"hostport" doc:"Peer addresses as host:port. In the file a JSON array of strings, or one string; in either string form separated by commas, semicolons or spaces. Required with seeds discovery."`
	KubernetesServiceDns string   `json:"KubernetesServiceDns" env:"COREFLUX_CLUSTER_K8S_SERVICE_DNS" doc:"DNS name of the headless Service. Required with kubernetes discovery."`
	KubernetesPeerPort   int      `json:"KubernetesPeerPort" env:"COREFLUX_CLUSTER_K8S_PEER_PORT" derive:"Cluster.Port" range:"0..65535" doc:"Cluster port of the pods found through that Service."`
	MulticastGroup       string   `json:"MulticastGroup" env:"COREFLUX_CLUSTER_MULTICAST_GROUP" default:"239.63.114.71" format:"multicast" doc:"Multicast group for multicast discovery."`
	MulticastPort        int      `json:"MulticastPort" env:"COREFLUX_CLUSTER_MULTICAST_PORT" default:"9201" range:"1..65535" doc:"UDP port for multicast discovery."`
	SharedSecret         string   `json:"SharedSecret" env:"COREFLUX_CLUSTER_SHARED_SECRET" doc:"Signs all traffic between nodes so it cannot be forged; with multicast (and zeroconf), also keeps foreign nodes out. Set it in production; the node logs a warning when it is missing."`

	BindIP                string `json:"BindIP" env:"COREFLUX_CLUSTER_BIND_IP" derive:"Mqtt.BindIP" format:"ip" group:"Network" doc:"Local address of the cluster port."`
	Port                  int    `json:"Port" env:"COREFLUX_CLUSTER_PORT" default:"9200" range:"1..65535" doc:"Cluster TCP port (leader election and membership). Keep it on a private network: it is neither encrypted nor authenticated."`
	AdvertisedHost        string `json:"AdvertisedHost" env:"COREFLUX_CLUSTER_ADVERTISED_HOST" derive:"Cluster.NodeName" doc:"Address the other nodes use to reach this node. Set it when the node's own address is not reachable from its peers (containers, NAT)."`
	AdvertisedPort        int    `json:"AdvertisedPort" env:"COREFLUX_CLUSTER_ADVERTISED_PORT" derive:"Cluster.Port" range:"0..65535" doc:"The port the other nodes use to reach this node."`
	DataPlaneUsername     string `json:"DataPlaneUsername" env:"COREFLUX_CLUSTER_DATAPLANE_USERNAME" doc:"The cluster service user. It must exist, with a password, on every node. Without it, nodes do not exchange messages or LoT changes. If it is set but missing from a node's users, clustering does not start on that node."`
	DataPlaneMqttPort     int    `json:"DataPlaneMqttPort" env:"COREFLUX_CLUSTER_DATAPLANE_MQTT_PORT" derive:"Mqtt.Port" range:"0..65535" doc:"MQTT port nodes use to reach each other."`
	DataPlaneEnabled      bool   `json:"DataPlaneEnabled" env:"COREFLUX_CLUSTER_DATAPLANE_ENABLED" default:"true" doc:"Forwards QoS 0 messages between nodes. When false, QoS 0 messages stay on the node they were published on."`
	Topology              string `json:"Topology" env:"COREFLUX_CLUSTER_TOPOLOGY" default:"mesh" values:"mesh|ring" doc:"How QoS 0 messages travel: mesh (every node to every node, recommended) or ring (to two neighbours only; complete only for up to 3 nodes)."`
	UseTls                bool   `json:"UseTls" env:"COREFLUX_CLUSTER_TLS" default:"false" doc:"Uses TLS for the links between nodes, on the peers' TLS port (Mqtt.TlsPort; needs Mqtt.CertFile). Gantry encrypts QoS 1/2 there as well as QoS 0. It does not encrypt the cluster (Raft) port."`
	DataDir               string `json:"DataDir" env:"COREFLUX_CLUSTER_DATA_DIR" derive:"DataDir/cluster" format:"path" doc:"Where the node keeps its cluster state and partition copies. Must be on persistent storage."`
	PublishInternalRoutes bool   `json:"PublishInternalRoutes" env:"COREFLUX_CLUSTER_PUBLISH_INTERNAL_ROUTES" default:"false" doc:"Troubleshooting aid: publishes the connectors the cluster generates between nodes, password redacted, on $SYS/Coreflux/Cluster/DataPlane/Routes/{name}."`

	ReplicationEnabled             bool `json:"ReplicationEnabled" env:"COREFLUX_CLUSTER_REPLICATION_ENABLED" default:"true" group:"Replication" doc:"Stores QoS 1/2 messages on several nodes, delivers them reliably to other nodes, and lets sessions follow clients. When false, QoS 1/2 messages travel between nodes like QoS 0, and a follower can't pass LoT changes or connector calls to other nodes."`
	QuorumGateEnabled              bool `json:"QuorumGateEnabled" env:"COREFLUX_CLUSTER_QUORUM_GATE" default:"true" doc:"Waits for a majority before acknowledging QoS 1/2 publishes. When false, publishes are acknowledged once the receiving node has them, and are no longer protected against that node's loss."`
	ReplicationFactor              int  `json:"ReplicationFactor" env:"COREFLUX_CLUSTER_REPLICATION_FACTOR" default:"0" range:"0..7" doc:"Copies of each partition, owner included; 0 means 3. Limited by the number of nodes up. 1 gives no protection across nodes."`
	PartitionCount                 int  `json:"PartitionCount" env:"COREFLUX_CLUSTER_PARTITION_COUNT" default:"32" range:"1..4096" doc:"Number of partitions. Choose it once: changing it on a running cluster reassigns every client."`
	ReplicationTimeoutMs           int  `json:"ReplicationTimeoutMs" env:"COREFLUX_CLUSTER_REPLICATION_TIMEOUT_MS" default:"5000" range:"100..60000" doc:"How long a publish may wait for a majority before it is rejected."`
	ReplicationWindow              int  `json:"ReplicationWindow" env:"COREFLUX_CLUSTER_REPLICATION_WINDOW" default:"1024" range:"1..65536" doc:"QoS 1/2 publishes that may wait for a majority at the same time on a node. Beyond it, publishes are rejected at once with 0x97."`
	ReplicationReplaySeconds       int  `json:"ReplicationReplaySeconds" env:"COREFLUX_CLUSTER_REPLICATION_REPLAY_SECONDS" default:"300" range:"0..86400" doc:"Messages re-delivered after a failover, in seconds (0 = none). Longer means more duplicates, shorter means more risk of a gap."`
	ReplicationForwardQueueEntries int  `json:"ReplicationForwardQueueEntries" env:"COREFLUX_CLUSTER_REPLICATION_FORWARD_QUEUE_ENTRIES" default:"8192" range:"64..1000000" doc:"QoS 1/2 messages kept for a node that is down. Beyond it, the oldest are dropped for that node."`
	ReplicationCompactEveryRecords int  `json:"ReplicationCompactEveryRecords" env:"COREFLUX_CLUSTER_REPLICATION_COMPACT_EVERY" default:"50000" range:"1000..10000000" doc:"Compacts a partition's stored messages after this many records, to bound disk use."`
	ReplicationDedupDelivered      bool `json:"ReplicationDedupDelivered" env:"COREFLUX_CLUSTER_REPLICATION_DEDUP_DELIVERED" default:"true" doc:"The node remembers which quorum-durable messages it delivered and drops failover-replay copies of them. false delivers every copy."`
	ReplicationTrace               bool `json:"ReplicationTrace" env:"COREFLUX_CLUSTER_REPLICATION_TRACE" default:"false" doc:"Records each QoS 1 or 2 message on the node under replication/trace. Read it with GET /cluster/trace on the operations port. About 50 MB per hour per node at 100 messages per second."`
	ReplicationTraceMaxMegabytes   int  `json:"ReplicationTraceMaxMegabytes" env:"COREFLUX_CLUSTER_REPLICATION_TRACE_MAX_MB" default:"512" range:"8..8192" doc:"Cap on those trace files, in megabytes. The oldest files are deleted first."`

	BootstrapGraceSeconds            int     `json:"BootstrapGraceSeconds" env:"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS" default:"30" range:"1..3600" group:"Membership and startup" doc:"How long a node with no cluster state waits to be added to a running cluster before it may start a new one. Also how long a node retries resolving its AdvertisedHost and looking for peers that moved."`
	BootstrapPeerCheck               bool    `json:"BootstrapPeerCheck" env:"COREFLUX_CLUSTER_BOOTSTRAP_PEER_CHECK" default:"true" doc:"Before starting a new cluster, asks each peer's operations endpoint whether it already belongs to one. A peer that doesn't answer counts as one that might, so the node keeps waiting. Turn off only if the operations ports cannot be reached between nodes."`
	PeerOpsPort                      int     `json:"PeerOpsPort" env:"COREFLUX_CLUSTER_PEER_OPS_PORT" derive:"Ops.Port" range:"0..65535" doc:"Operations port of the peers, for that check. 0 means this node's Ops.Port."`
	MemberRemovalGraceSeconds        int     `json:"MemberRemovalGraceSeconds" env:"COREFLUX_CLUSTER_MEMBER_REMOVAL_GRACE_SECONDS" default:"300" range:"0..86400" doc:"The leader removes a node that stays unreachable for this long from the membership, so it no longer counts toward the majority. It is added back once discovery lists it and it answers. A member that Kubernetes discovery has stopped listing is removed after MemberAbsentFromDiscoverySeconds instead. 0 turns off removal of an unreachable node."`
	MemberAbsentFromDiscoverySeconds int     `json:"MemberAbsentFromDiscoverySeconds" env:"COREFLUX_CLUSTER_MEMBER_ABSENT_FROM_DISCOVERY_SECONDS" default:"120" range:"10..86400" doc:"With Kubernetes discovery, the leader removes a member that DNS has stopped listing and that fails a TCP probe, after this many seconds."`
	MemberAddResignSeconds           int     `json:"MemberAddResignSeconds" env:"COREFLUX_CLUSTER_MEMBER_ADD_RESIGN_SECONDS" default:"60" range:"0|15..3600" doc:"The leader resigns if it has tried this long to add a member that discovery lists and that answers a TCP probe, without the member joining (0 = never). The next leader tries again."`
	ElectionTimeoutLowerMs           int     `json:"ElectionTimeoutLowerMs" env:"COREFLUX_CLUSTER_ELECTION_LOWER_MS" default:"150" range:"10..60000" doc:"Lower bound of the randomised election timeout. Lower values detect a lost leader sooner."`
	ElectionTimeoutUpperMs           int     `json:"ElectionTimeoutUpperMs" env:"COREFLUX_CLUSTER_ELECTION_UPPER_MS" default:"300" range:"11..120000" doc:"Upper bound of the randomised election timeout; must be greater than ElectionTimeoutLowerMs."`
	ElectionRpcTimeoutMs             int     `json:"ElectionRpcTimeoutMs" env:"COREFLUX_CLUSTER_ELECTION_RPC_TIMEOUT_MS" default:"0" range:"0..60000" doc:"How long a node waits for a vote, pre-vote or heartbeat reply, and to connect. 0 means 2/3 of ElectionTimeoutLowerMs (100 ms with the defaults). Otherwise must be shorter than ElectionTimeoutLowerMs."`
	HeartbeatThreshold               float64 `json:"HeartbeatThreshold" env:"COREFLUX_CLUSTER_HEARTBEAT_THRESHOLD" default:"0.25" range:"0.05..0.5" doc:"The leader sends a heartbeat every election timeout multiplied by this value."`
	RaftTransport                    string  `json:"RaftTransport" env:"COREFLUX_CLUSTER_RAFT_TRANSPORT" default:"Deadline" values:"Deadline|Tcp" doc:"Deadline gives votes, pre-votes and heartbeats their own reply deadline. Tcp is the fallback."`
}

// EffectiveReplicationFactor is ReplicationFactor with 0 read as its
// documented meaning, 3 copies.
func (c *Cluster) EffectiveReplicationFactor() int {
	if c.ReplicationFactor == 0 {
		return 3
	}
	return c.ReplicationFactor
}

// EffectiveElectionRpcTimeoutMs is ElectionRpcTimeoutMs with 0 read as its
// documented meaning, 2/3 of ElectionTimeoutLowerMs.
func (c *Cluster) EffectiveElectionRpcTimeoutMs() int {
	if c.ElectionRpcTimeoutMs == 0 {
		return c.ElectionTimeoutLowerMs * 2 / 3
	}
	return c.ElectionRpcTimeoutMs
}

//go:embed dev.json
var devJSON []byte

// Default returns the built-in configuration with derived defaults (the
// host name, "same as" fields) filled in: what Load returns for no file
// and an empty environment.
func Default() Config {
	c := defaults()
	c.resolve()
	return c
}

// Dev returns the embedded development configuration used by `make run`:
// the defaults, with anonymous clients allowed from loopback addresses only.
func Dev() Config {
	c, err := LoadDev(nil)
	if err != nil {
		panic(err) // dev.json is embedded and checked by the tests
	}
	return c
}

// LoadDev is Load for the embedded development configuration instead of a
// file: the environment still wins over it.
func LoadDev(env func(string) (string, bool)) (Config, error) {
	return load("dev.json", devJSON, env)
}

// Load reads the JSON file at path over the defaults, then the environment
// (looked up through env, os.LookupEnv in production; nil means none) over
// the file, fills in derived defaults and validates the result. path ""
// means no file. A bad configuration returns an *Error that lists every
// problem; a file that cannot be read returns the I/O error.
func Load(path string, env func(string) (string, bool)) (Config, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}
	return load(path, data, env)
}

// SetupFile is the file in DataDir where the console's setup wizard keeps
// the settings it was given (node name, cluster, discovery, durability).
const SetupFile = "setup.json"

// LoadNode is what a starting node reads: Load(path) (LoadDev when dev and
// path is ""), then DataDir/setup.json, when the wizard has written one,
// over the file, and the environment over both. So the wizard's choices
// take effect on every start, whichever configuration file (or none) the
// node runs from, and a variable still overrides them. A setup.json that
// does not load is a problem like one in the file, named with its path.
func LoadNode(path string, dev bool, env func(string) (string, bool)) (Config, error) {
	name, data := path, []byte(nil)
	if dev && path == "" {
		name, data = "dev.json", devJSON
	} else if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}
	c, err := load(name, data, env)
	if err != nil {
		return c, err
	}
	setup := filepath.Join(c.DataDir, SetupFile)
	sdata, err := os.ReadFile(setup)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err = load(name, data, env, file{setup, sdata})
	var ce *Error
	if errors.As(err, &ce) { // the file and the environment alone loaded
		ps := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			ps[i] = setup + " (written by the setup wizard): " + strings.TrimPrefix(p, "config: ")
		}
		return Config{}, &Error{Problems: ps}
	}
	return c, err
}

// file is a configuration file's name and contents.
type file struct {
	name string
	data []byte
}

// load applies the file contents data (skipped when name is "") and the
// overlays, in order, then env over the defaults.
func load(name string, data []byte, env func(string) (string, bool), overlays ...file) (Config, error) {
	c := defaults()
	l := loader{root: reflect.ValueOf(&c).Elem(), fromEnv: map[string]string{}}
	if name != "" {
		l.decodeFile(name, data)
	}
	for _, o := range overlays {
		l.decodeFile(o.name, o.data)
	}
	if env != nil {
		l.applyEnv(env)
	}
	c.resolve()
	for _, p := range c.problems() {
		line := p.withSource(l.fromEnv[p.path])
		if strings.HasPrefix(p.path, "Cluster.") {
			c.clusterProblems = append(c.clusterProblems, line)
			continue
		}
		l.add(line)
	}
	if len(l.lines) > 0 {
		return Config{}, &Error{Problems: append(l.lines, c.clusterProblems...)}
	}
	return c, nil
}
