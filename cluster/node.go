package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"gantry/cluster/partition"
	"gantry/cluster/raftstore"
	"gantry/cluster/signing"
)

// snapshotsDir holds the Raft snapshots under Options.DataDir, beside the
// log and stable store (raftstore.FileName).
const snapshotsDir = "snapshots"

// applyTimeout bounds a write through Raft from this node.
const applyTimeout = 5 * time.Second

// Node is one member of the control plane: it runs Raft, forms or joins a
// cluster, and, while it leads, keeps the membership and the partition map
// in line with what discovery finds.
type Node struct {
	opts    Options
	log     *slog.Logger
	raftLog *slog.Logger // hashicorp/raft's own lines
	http    *http.Client
	// changeHTTP is http without its timeout, for a change sent to the
	// leader (users, LoT): the leader answers once it committed, which
	// takes up to applyTimeout, and the change's own context bounds the
	// wait. With http's RPCTimeout plus a second, a follower on a loaded
	// machine gave up on a commit still under way, which may then take
	// effect: a change reported refused that was made.
	changeHTTP *http.Client

	raft   *raft.Raft
	trans  *raft.NetworkTransport
	stream *streamLayer
	store  *raftstore.Store
	fsm    *fsm
	signer *signing.Signer
	// requests signs and checks this node's HTTP requests to and from the
	// other nodes (users, LoT, catch-up, join; the appliance shares it
	// with the session and kept exchanges: Requests).
	requests *signing.Requests
	live     *liveness
	obsCh    chan raft.Observation
	nudge    chan struct{} // wakes the control loop at once (this node became leader)
	obs      *raft.Observer

	// hadState is whether the node started with Raft state (it rejoins at
	// once) or fresh (it waits to be added, then may bootstrap).
	hadState       bool
	started        time.Time
	lastWaitLog    time.Time    // run goroutine only
	learned        atomic.Bool  // advertising the address the peers see (learnAdvertise)
	holdJoin       atomic.Bool  // the advertised AdvertisedHost does not resolve yet (resolveAdvertised)
	copiesReported atomic.Bool  // the data plane fills new copies and reports them (caughtup.go)
	waiting        atomic.Value // string: why a fresh node has not formed a cluster yet (Status.Waiting)

	leaderChanges  atomic.Uint64
	readyTerm      atomic.Uint64        // the term in which this leader's FSM caught up with the log (run's Barrier)
	changesPending atomic.Int32         // membership changes not yet committed (changeMembers)
	changeMu       sync.Mutex           // serialises membership changes; held across a Raft future; taken before mu, never while mu is held
	mu             sync.Mutex           // guards adding, catchingUp, warned, onState, and ctx/cancel against goRun
	adding         map[string]time.Time // member → when the leader first tried to add it
	catchingUp     map[string]bool      // non-voters an awaitCatchUp goroutine watches
	warned         map[string]time.Time // warning key → when last logged (warnEvery)
	onState        []func(State)
	usersMu        sync.Mutex                      // serialises user changes on the leader (users.go)
	localUsers     atomic.Pointer[func() []User]   // this node's own users (SetLocalUsers)
	localLoT       atomic.Pointer[func() []LoTDef] // this node's own LoT definitions (SetLocalLoT, lot.go)
	fence          workFence                       // whether this node may run the work it owns (InContact, lot_work.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New opens the node's Raft state under opts.DataDir and binds the cluster
// port. It does not join or form a cluster yet: Start does.
func New(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := &Node{opts: opts, log: log.With("component", "cluster", "node", opts.NodeName),
		raftLog: log.With("component", "raft", "node", opts.NodeName), live: newLiveness(),
		adding: map[string]time.Time{}, catchingUp: map[string]bool{}, warned: map[string]time.Time{}}
	n.http = opts.HTTPClient
	if n.http == nil {
		n.http = &http.Client{Timeout: opts.RPCTimeout + time.Second}
	}
	changes := *n.http
	changes.Timeout = 0
	n.changeHTTP = &changes
	n.fsm = &fsm{onChange: n.stateChanged}
	n.signer = signing.New(opts.SharedSecret, nil)
	n.requests = signing.NewRequests(n.signer, &signing.RequestOptions{Node: opts.NodeName,
		Logger: n.log})
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	o := &n.opts
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("cluster: DataDir %q: %w", o.DataDir, err)
	}
	st, err := raftstore.Open(filepath.Join(o.DataDir, raftstore.FileName), raftstore.DefaultOptions())
	if err != nil {
		return err
	}
	n.store = st
	hlog := newRaftLogger(n.raftLog)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(o.DataDir, snapshotsDir), 2, hlog)
	if err != nil {
		return fmt.Errorf("cluster: snapshots in %s: %w", o.DataDir, err)
	}
	if n.hadState, err = raft.HasExistingState(st, st, snaps); err != nil {
		return fmt.Errorf("cluster: reading the Raft state in %s: %w", o.DataDir, err)
	}
	if n.stream, err = newStreamLayer(o.BindAddr, o.AdvertiseAddr, o.Listen, o.Dial); err != nil {
		return fmt.Errorf("cluster: listen on %s: %w", o.BindAddr, err)
	}
	timeout := 10 * time.Second
	if o.DeadlineTransport {
		timeout = o.RPCTimeout
	}
	// No pipelined replication (MaxRPCsInFlight under 2): hashicorp/raft
	// v1.8.0's pipeline can wedge for good when a follower answers an
	// AppendEntries with failure (a stale term after it restarted, a log
	// mismatch). pipelineDecode returns and leaves the pipeline's
	// unbuffered done channel without a reader; when the send loop then
	// picks a trigger over the finished decoder, its next send parks on
	// the in-progress channel while the transport's decoder parks on the
	// done channel, and Close, which would free both, is deferred in the
	// parked loop. The leader never replicates to that follower again
	// (heartbeats go on, so nothing times out), and raft.Shutdown waits
	// for the loop forever: TestLeaderResignsWhenAddFails hung so, in
	// its cleanup's Shutdown.
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Logger: hlog, Stream: n.stream, MaxPool: 3, Timeout: timeout, MaxRPCsInFlight: 1,
	})
	if n.raft, err = raft.NewRaft(n.raftConfig(hlog), n.fsm, st, st, snaps, n.trans); err != nil {
		return fmt.Errorf("cluster: starting Raft: %w", err)
	}
	n.obsCh = make(chan raft.Observation, 64)
	n.nudge = make(chan struct{}, 1)
	// Blocking, so that no failed or resumed heartbeat is lost (a lost
	// "resumed" would keep a healthy member silent until it is removed),
	// and filtered to what observe reads (votes would fill the channel).
	n.obs = raft.NewObserver(n.obsCh, true, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.obs)
	return nil
}

// raftConfig maps the Coreflux election settings onto hashicorp/raft (see
// doc.go, "Timing").
func (n *Node) raftConfig(hlog hclog.Logger) *raft.Config {
	o := &n.opts
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(o.NodeName)
	c.HeartbeatTimeout = o.ElectionTimeoutLower
	c.ElectionTimeout = o.ElectionTimeoutLower
	c.LeaderLeaseTimeout = o.ElectionTimeoutLower
	c.CommitTimeout = 10 * time.Millisecond
	c.ShutdownOnRemove = false // a removed node stays up, so it can be added back when it returns
	c.NoLegacyTelemetry = true
	c.Logger = hlog
	return c
}

// Start begins the work of the node: a node with state rejoins at once;
// a fresh one waits to be added, and after BootstrapGrace may form a
// cluster (see doc.go, "Start-up").
func (n *Node) Start() {
	n.started = time.Now()
	n.mu.Lock()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.mu.Unlock()
	if n.hadState {
		n.log.Info("rejoining the cluster with the state in DataDir", "dir", n.opts.DataDir)
	} else {
		n.log.Info("no cluster state: waiting to be added to a running cluster",
			"grace", n.opts.BootstrapGrace.String())
	}
	n.goRun(n.observe)
	if name := n.opts.AdvertisedHost; name != "" && net.ParseIP(name) == nil {
		host, _, _ := net.SplitHostPort(n.advertise())
		n.holdJoin.Store(strings.EqualFold(host, name)) // until the first lookup says
		n.goRun(n.resolveAdvertised)
	}
	n.goRun(n.run)
	if src, ok := n.opts.Discovery.(interface{ Run(context.Context) error }); ok {
		n.goRun(func(ctx context.Context) {
			if err := src.Run(ctx); err != nil && ctx.Err() == nil {
				n.log.Error("discovery stopped", "err", err)
			}
		})
	}
}

// goRun runs f on a goroutine that Shutdown stops (through the context)
// and waits for; once Shutdown has begun it starts nothing and reports
// false.
func (n *Node) goRun(f func(context.Context)) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx == nil || n.ctx.Err() != nil {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f(n.ctx)
	}()
	return true
}

// run is the node's control loop: while leading it reconciles the
// membership; while not a member it looks for a cluster to join.
func (n *Node) run(ctx context.Context) {
	t := time.NewTicker(n.opts.ReconcileInterval)
	defer t.Stop()
	for {
		switch {
		case n.raft.State() == raft.Leader:
			// A new leader applies the whole log (a Barrier) before it
			// plans anything from the state.
			if term := n.raft.CurrentTerm(); term != n.readyTerm.Load() {
				if n.raft.Barrier(applyTimeout).Error() == nil {
					n.readyTerm.Store(term)
				}
			}
			if n.readyTerm.Load() == n.raft.CurrentTerm() {
				n.seedUsers()
				n.reconcile(ctx)
			}
		case !n.isMember() && !n.holdJoin.Load():
			n.seekCluster(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.nudge:
		}
	}
}

// Shutdown leaves the cluster's Raft group running without this node (it
// does not remove itself: a restart rejoins) and closes the stores.
func (n *Node) Shutdown() error {
	if n.raft != nil {
		// Before observe stops: a blocking observer with no reader would
		// hold raft, and DeregisterObserver, forever.
		n.raft.DeregisterObserver(n.obs)
	}
	n.mu.Lock() // after this, goRun starts nothing: wg.Wait below sees every goroutine
	if n.cancel != nil {
		n.cancel()
	}
	n.mu.Unlock()
	n.wg.Wait()
	var err error
	if n.raft != nil {
		err = n.raft.Shutdown().Error()
	}
	if n.trans != nil {
		n.trans.Close()
	}
	n.closeStores()
	return err
}

func (n *Node) closeStores() {
	if n.stream != nil && n.raft == nil {
		n.stream.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
}

// State is the committed control-plane state as this node has applied it.
// The Partitions slice is shared: treat it as read-only.
func (n *Node) State() State { return n.fsm.current() }

// Partitions is the committed partition map.
func (n *Node) Partitions() partition.Map { return n.fsm.current().Partitions }

// OnState registers f to be called with the new state after every change
// applied on this node, on the Raft apply goroutine: f must not block.
func (n *Node) OnState(f func(State)) {
	n.mu.Lock()
	n.onState = append(n.onState, f)
	n.mu.Unlock()
}

func (n *Node) stateChanged(st State) {
	n.mu.Lock()
	fs := n.onState
	n.mu.Unlock()
	for _, f := range fs {
		f(st)
	}
}

// RaftAddr is the address other nodes reach this node's cluster port at.
func (n *Node) RaftAddr() string { return n.advertise() }

// advertise is the address this node tells its peers, as now known.
func (n *Node) advertise() string { return n.stream.Addr().String() }

// IsLeader reports whether this node leads the cluster now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader is the name of the current leader, or "" when none is known.
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// isMember reports whether the Raft configuration this node holds lists it.
func (n *Node) isMember() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(n.opts.NodeName) {
			return true
		}
	}
	return false
}
