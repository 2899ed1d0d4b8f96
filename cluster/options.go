package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"gantry/cluster/discovery"
)

// Options configure a Node. The appliance builds them from the Cluster
// section of the configuration (appliance/wire_cluster.go); tests build
// them directly, usually from DefaultOptions.
type Options struct {
	ClusterID string // name of the cluster; peers with another one are ignored
	NodeName  string // identity of this node: its Raft server ID, never its address

	BindAddr      string // ip:port the cluster (Raft) listener binds
	AdvertiseAddr string // host:port the other nodes dial to reach this node
	// AdvertiseLearn lets the node replace the host of AdvertiseAddr with
	// the address its peers see it connect from, when they agree on one:
	// for a host that was not set explicitly, on a gateway with several
	// network interfaces.
	AdvertiseLearn bool
	// AdvertisedHost is the host name this node is meant to be reached at
	// (Cluster.AdvertisedHost, or the NodeName it defaults to); "" or an
	// IP address turns resolving off. The node resolves it through
	// Resolver (nil: net.DefaultResolver), retrying for BootstrapGrace:
	// see resolveAdvertised in bootstrap.go.
	AdvertisedHost string
	Resolver       discovery.Resolver
	OpsAddr        string // host:port of this node's operations endpoint, as peers reach it
	PeerOpsPort    int    // operations port of the peers, for addresses discovery gives without one

	DataDir string // Raft log, stable state and snapshots

	ElectionTimeoutLower time.Duration // lower bound of the randomised election timeout
	ElectionTimeoutUpper time.Duration // upper bound; see doc.go for how it maps onto hashicorp/raft
	RPCTimeout           time.Duration // reply deadline of votes, pre-votes and heartbeats, and dial timeout
	HeartbeatThreshold   float64       // heartbeat interval as a fraction of the election timeout
	DeadlineTransport    bool          // true: RPCTimeout bounds every Raft RPC; false: the library's 10 s

	BootstrapGrace     time.Duration // how long a node without state waits to be added before it may form a cluster
	BootstrapPeerCheck bool          // ask each peer whether it already belongs to a cluster first

	MemberRemovalGrace        time.Duration // remove a member unreachable this long (0 = never)
	MemberAbsentFromDiscovery time.Duration // remove a member discovery stopped listing and that fails a probe
	MemberAddResign           time.Duration // resign after failing this long to add a reachable member (0 = never)
	FailoverDelay             time.Duration // silence after which a member's partitions move to their copies

	PartitionCount    int // partitions of QoS 1/2 traffic
	ReplicationFactor int // copies of each partition, owner included

	SharedSecret []byte // signs every message between nodes that is not Raft itself; empty = unsigned

	// Discovery finds the peers. Nil means none: the node can only be
	// added by a leader that finds it, or form a cluster alone.
	Discovery PeerSource
	// HTTPClient reaches the peers' operations endpoints; nil means one
	// with a timeout of RPCTimeout plus a second.
	HTTPClient *http.Client
	// Listen and Dial, when set, replace TCP for the Raft port: the test
	// harness (cluster/clustertest) injects partitions and freezes there.
	Listen func(addr string) (net.Listener, error)
	Dial   func(addr string, timeout time.Duration) (net.Conn, error)
	// ReconcileInterval is how often the leader compares the membership
	// with what discovery finds, and how often a node without state looks
	// for a cluster to join.
	ReconcileInterval time.Duration
	Logger            *slog.Logger
}

// DefaultOptions are the documented defaults of the Cluster section.
func DefaultOptions() Options {
	return Options{
		ClusterID:                 "coreflux-cluster",
		ElectionTimeoutLower:      150 * time.Millisecond,
		ElectionTimeoutUpper:      300 * time.Millisecond,
		RPCTimeout:                100 * time.Millisecond,
		HeartbeatThreshold:        0.25,
		DeadlineTransport:         true,
		BootstrapGrace:            30 * time.Second,
		BootstrapPeerCheck:        true,
		MemberRemovalGrace:        5 * time.Minute,
		MemberAbsentFromDiscovery: 2 * time.Minute,
		MemberAddResign:           time.Minute,
		FailoverDelay:             6 * time.Second,
		PartitionCount:            32,
		ReplicationFactor:         3,
		ReconcileInterval:         time.Second,
	}
}

// Errors of the cluster package.
var (
	ErrNotLeader = errors.New("cluster: not leader")
	ErrClosed    = errors.New("cluster: node stopped")
)

// Validate checks the options with the rules of the Coreflux reference,
// naming the option and the value.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cluster: "+format, args...)) }
	if o.ClusterID == "" {
		bad("ClusterId is empty, want a name")
	}
	if o.NodeName == "" {
		bad("NodeName is empty, want this node's unique name")
	}
	if _, _, err := net.SplitHostPort(o.BindAddr); err != nil {
		bad("bind address %q: %v", o.BindAddr, err)
	}
	if _, _, err := net.SplitHostPort(o.AdvertiseAddr); err != nil {
		bad("advertised address %q: %v", o.AdvertiseAddr, err)
	}
	if o.DataDir == "" {
		bad("DataDir is empty")
	}
	if o.ElectionTimeoutLower <= 0 || o.ElectionTimeoutUpper <= o.ElectionTimeoutLower {
		bad("election timeout %v..%v, want 0 < lower < upper", o.ElectionTimeoutLower, o.ElectionTimeoutUpper)
	}
	if o.RPCTimeout <= 0 || o.RPCTimeout >= o.ElectionTimeoutLower {
		bad("election RPC timeout %v, want more than 0 and less than the lower election timeout %v", o.RPCTimeout, o.ElectionTimeoutLower)
	}
	if o.HeartbeatThreshold < 0.05 || o.HeartbeatThreshold > 0.5 {
		bad("HeartbeatThreshold %v, want 0.05..0.5", o.HeartbeatThreshold)
	}
	if o.PartitionCount < 1 || o.PartitionCount > 4096 {
		bad("PartitionCount %d, want 1..4096", o.PartitionCount)
	}
	if o.ReplicationFactor < 1 || o.ReplicationFactor > 7 {
		bad("ReplicationFactor %d, want 1..7", o.ReplicationFactor)
	}
	if o.BootstrapGrace <= 0 {
		bad("BootstrapGrace %v, want more than 0", o.BootstrapGrace)
	}
	if o.ReconcileInterval <= 0 {
		bad("ReconcileInterval %v, want more than 0", o.ReconcileInterval)
	}
	return errors.Join(errs...)
}
