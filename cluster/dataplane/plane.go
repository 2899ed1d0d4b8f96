package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/cluster/signing"
	"gantry/cluster/wire"
)

// Internal names. Only the cluster user may publish or subscribe under
// InternalPrefix; frames are published to frameTopic.
const (
	InternalPrefix   = "$cluster/"
	frameTopic       = InternalPrefix + "v1/frames"
	linkClientPrefix = "gantry-link-"
	tokenLabel       = "gantry-link/v1\x00"
)

// Deliverer is what the data plane needs of the local broker:
// *broker.Server implements it.
type Deliverer interface {
	DeliverBatch(ms []*broker.Message, done func(error)) bool
	// Filters returns the filters of every local session (the interest
	// this node announces).
	Filters() []string
	// StoreRetainedBatch stores retained messages without delivering
	// them, as DeliverBatch reports and calls done.
	StoreRetainedBatch(ms []*broker.Message, done func(error)) bool
	// RangeRetained calls fn with every retained message, $ topics aside.
	RangeRetained(fn func(m *broker.Message) bool)
}

// Options configure a Plane.
type Options struct {
	NodeName  string          // this node (the Raft server ID)
	ClusterID string          // the cluster: a link token names it
	Username  string          // Cluster.DataPlaneUsername: links log in as this user
	Signer    *signing.Signer // signs frames and link tokens (SharedSecret)
	// BestEffort forwards QoS 0 messages (Cluster.DataPlaneEnabled).
	BestEffort bool
	// Reliable forwards QoS 1/2 messages reliably (Cluster.ReplicationEnabled);
	// when false they travel like QoS 0, if BestEffort.
	Reliable bool
	// ForwardQueueEntries bounds the reliable records kept for one peer
	// (Cluster.ReplicationForwardQueueEntries); beyond it the oldest go.
	ForwardQueueEntries int
	// DataDir, when set, keeps the reliable stream on disk there (with
	// durability): a publisher's acknowledgement waits for the write, and
	// a restart resumes the stream. "" keeps it in memory.
	DataDir string
	Broker  Deliverer
	// Dial opens a link's connection; nil means TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// TLS, when set, makes links TLS connections (Cluster.UseTls): it
	// returns the client configuration for a peer's host.
	TLS func(host string) (*tls.Config, error)
	// Replication, when set (with Reliable), makes a QoS 1/2 publish a
	// write to its partition's copies (quorum.go); nil forwards as
	// before, acknowledged once this node has it.
	Replication *Replication
	// CaughtUp, when set, reports that node's copy of partition p holds
	// what this node, its owner, held (the leader commits it; see
	// fill.go). It may block; it is called from a goroutine of its own.
	CaughtUp func(p uint32, node string, mapVersion uint64) error
	// InContact, when set (with Replication), reports whether this node
	// is in contact with the cluster's leader (cluster.Node.LeaderContact):
	// without it a node neither acknowledges nor counts as a copy, so the
	// minority side of a split stops before the majority's map moves the
	// copies. Polled every 50 ms.
	InContact func() bool
	// Trace, when set (with Replication), records each QoS 1/2 record
	// (Cluster.ReplicationTrace; trace.go).
	Trace  *Trace
	Logger *slog.Logger
}

// Errors of the data plane.
var (
	ErrNotClusterUser = errors.New("dataplane: only the cluster user may use the cluster's internal topics")
	errBadToken       = errors.New("dataplane: not a link token")
)

// Plane is one node's data plane: a link to every peer, the hook that
// forwards the messages entering this node, and the receiver of the
// peers' frames. See doc.go.
type Plane struct {
	opts Options
	log  *slog.Logger
	boot uint64 // this incarnation: reliable sequence numbers restart with it
	// linkConns numbers the links' connections within boot, ascending
	// (wire.Header.Conn).
	linkConns atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.RWMutex     // guards links
	links map[string]*link // peer name → link
	out   *outbox
	store *store // nil in memory

	recv receiver
	warnLimiter

	retained *retainedVersions

	gate   *quorumGate // nil without Options.Replication
	copies *copyLog    // the partition copies this node holds
	fills  fillState
	trace  *tracer // nil: off
	// replayedOut counts the records this node re-delivered for lost nodes.
	replayedOut atomic.Uint64
	// qos2Resent counts QoS 2 resends (DUP) recognised as accepted before.
	qos2Resent atomic.Uint64

	rsync      retainedSync
	peersKnown atomic.Bool     // SetPeers was called
	asked      map[string]bool // guarded by mu: peers that asked for the retained store before they were linked

	local   localInterest
	rmu     sync.RWMutex // guards remotes; read for every message
	remotes map[string]*remoteInterest
	// sharedPeers counts the peers that announced shared subscriptions;
	// sharedTurn picks the next of several peers serving one group.
	tooLarge    atomic.Uint64 // messages too large to forward, kept local
	sharedPeers atomic.Int32
	sharedTurn  atomic.Uint64
	wg          sync.WaitGroup // runAnnounce

	// requests signs and checks the session exchange's requests
	// (sessions_directory.go): the plane's own, or the node's (UseRequests).
	requests *signing.Requests
	// tokens are the ids of the link tokens taken: each admits one
	// connection (auth.go).
	tokens *signing.ReplayCache
}

// UseRequests makes the session exchange sign and check its requests
// with q, the node's (shared with the peer protocol: one replay cache, one
// bound on large bodies, one set of counters), instead of the plane's
// own. Call it before NewSessions.
func (p *Plane) UseRequests(q *signing.Requests) { p.requests = q }

// New builds a data plane; Start runs it.
func New(opts Options) (*Plane, error) {
	if opts.NodeName == "" || opts.Username == "" || opts.Broker == nil {
		return nil, errors.New("dataplane: NodeName, Username and Broker are required")
	}
	if opts.ForwardQueueEntries <= 0 {
		opts.ForwardQueueEntries = 8192
	}
	if opts.Signer == nil {
		opts.Signer = signing.New(nil, nil)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Plane{opts: opts, log: log.With("component", "dataplane", "node", opts.NodeName),
		boot: uint64(time.Now().UnixNano()), links: map[string]*link{}}
	p.recv.senders = map[string]*senderState{}
	p.tokens = signing.NewReplayCache(opts.Signer, maxTokens)
	p.requests = signing.NewRequests(opts.Signer, &signing.RequestOptions{Node: opts.NodeName, Logger: p.log})
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("dataplane: %w", err)
		}
		st, err := openStore(filepath.Join(opts.DataDir, FileName))
		if err != nil {
			return nil, err
		}
		p.store, p.boot = st, st.boot
		for sender, v := range st.received() {
			s := &senderState{boot: v[0], lastSeq: v[1], wBoot: v[0], floor: v[1]} // written whole up to there
			s.mark()
			p.recv.senders[sender] = s
		}
		p.recv.store = st
		p.restoreHeld()
	}
	p.out = newOutbox(opts.ForwardQueueEntries, p.store)
	p.retained = newRetainedVersions(p.store)
	if rep := opts.Replication; rep != nil && opts.Reliable {
		if rep.Timeout <= 0 {
			rep.Timeout = 5 * time.Second
		}
		if rep.Window <= 0 {
			rep.Window = 1024
		}
		if rep.CompactEvery <= 0 {
			rep.CompactEvery = 50000
		}
		p.gate = &quorumGate{opts: *rep, started: time.Now(), wake: p.out.wakeAll, refuse: p.out.refuse}
		p.gate.dropOwn = p.dropOwnCopy
		p.copies = newCopyLog(rep.CompactEvery, p.store)
		p.recv.replays.init(replayedMax)
		if opts.Trace != nil {
			t, err := newTracer(*opts.Trace)
			if err != nil {
				return nil, err
			}
			p.trace = t
		}
	}
	p.local.announced = map[string]struct{}{}
	p.remotes = map[string]*remoteInterest{}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.runAnnounce()
	// A node with a history of its own (durable, and it received from its
	// peers before) holds the cluster's retained messages; any other asks.
	p.rsync.answered, p.rsync.since = map[string]bool{}, time.Now()
	if p.rsync.complete = !opts.Reliable || (p.store != nil && (len(p.recv.senders) > 0 || p.retained.known())); !p.rsync.complete {
		p.wg.Add(1)
		go p.runRetainedSync()
	}
	if p.gate != nil {
		p.fills.kick, p.fills.runs = make(chan struct{}, 1), map[fillKey]*fillRun{}
		p.wg.Add(2)
		go p.runSweep()
		go p.runMaps()
	}
	return p, nil
}

// Stop closes every link and waits for their goroutines.
func (p *Plane) Stop() {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	links := p.links
	p.links = map[string]*link{}
	p.mu.Unlock()
	for _, l := range links {
		<-l.done
	}
	if p.gate != nil {
		p.gate.refuseAll("this node is stopping") // their publishers are answered, not left waiting
	}
	if p.store != nil {
		p.store.close()
	}
	p.trace.close()
}

// SetPeers makes the links match peers (name → MQTT address, host:port):
// new peers get a link (and, when new to this node, its retained
// messages), removed ones lose their link but keep their cursor and
// records (they resume if they come back, until the bound pushes them
// out), moved ones reconnect at the new address.
func (p *Plane) SetPeers(peers map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	defer p.peersKnown.Store(true)
	for name, l := range p.links {
		if _, ok := peers[name]; !ok {
			l.cancel()
			delete(p.links, name)
			p.out.removePeer(name)
		}
	}
	for name, addr := range peers {
		if name == p.opts.NodeName {
			continue
		}
		if l, ok := p.links[name]; ok {
			if *l.addr.Load() != addr {
				l.setAddr(addr) // the next dial uses it
			}
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		ps, catchUp := p.out.addPeer(name)
		l := &link{p: p, peer: name, ps: ps, cancel: cancel, done: make(chan struct{})}
		l.setAddr(addr)
		p.links[name] = l
		if p.asked[name] {
			delete(p.asked, name)
			p.answerRetained(name) // it asked before it was linked
		} else if catchUp && p.opts.Reliable {
			p.catchUp(name)
		}
		go l.run(ctx)
	}
}

func (p *Plane) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	if p.opts.Dial != nil {
		nc, err = p.opts.Dial(ctx, addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil || p.opts.TLS == nil {
		return nc, err
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg, err := p.opts.TLS(host)
	if err != nil {
		nc.Close()
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS with %s: %w", addr, err)
	}
	return tc, nil
}

// InterceptPublish is the broker hook: frames from peers are received;
// every other message that entered this node is queued for the peers.
// It never blocks.
func (p *Plane) InterceptPublish(m *broker.Message, r broker.Resolver) error {
	if strings.HasPrefix(m.Topic, InternalPrefix) {
		return p.receive(m, r)
	}
	if m.Origin == broker.OriginPeer || (len(m.Topic) > 0 && m.Topic[0] == '$') {
		return nil // delivered here only: $SYS and other $ topics are per node
	}
	var version wire.Version
	if m.Retain && p.opts.Reliable {
		version = p.retained.next(p.opts.NodeName, m.Topic)
	}
	// Retained messages travel reliably whatever their QoS: a node that
	// was down gets the retained values published meanwhile.
	reliable := (m.QoS > 0 || m.Retain) && p.opts.Reliable
	if !reliable && !p.opts.BestEffort {
		return nil
	}
	if !p.out.wanted() && (p.gate == nil || m.QoS == 0) {
		return nil // no peer yet: a one-node cluster
	}
	enc := wire.AppendRetained(make([]byte, 0, len(m.Topic)+len(m.Payload)+32), m, version, false)
	if len(enc) > maxRecordBytes {
		// It would never fit a frame: sent, it would stop the stream to
		// the peer behind it for good.
		p.tooLarge.Add(1)
		p.warn("too-large", "a message too large for the links between nodes stays on this node", fmt.Errorf("topic %q, %d bytes, limit %d", m.Topic, len(enc), maxRecordBytes))
		return nil
	}
	groups := p.sharedFor(m.Topic)
	if !reliable {
		p.out.addBestEffort(enc, m.Topic, groups, p.wants)
		return nil
	}
	if m.QoS == 0 {
		p.out.addReliable(enc, m.Topic, m.Retain, groups, nil, nil) // nobody waits for a QoS 0 publish
		return nil
	}
	if p.gate != nil {
		return p.replicate(m, enc, groups, &namingResolver{Resolver: r, m: m, p: p})
	}
	seq, deferred, room := p.out.addNumbered(enc, m.Topic, m.Retain, groups, nil, r.Resolve)
	p.nameLocal(m, seq)
	holdBack(r, room)
	if deferred {
		return broker.ErrDeferred // acknowledged once the record is on disk
	}
	return nil
}

// nameLocal names a QoS 1/2 message published here by its record seq in
// this node's stream (broker.Message.Record), as the peers that receive
// it name it: a session queued both here and on a peer while it moved
// (the window between the claiming node's announcement and the holder's
// export) is imported without the copy queued twice. Routing here comes
// after it: the publish hook runs first.
func (p *Plane) nameLocal(m *broker.Message, seq uint64) {
	m.Record = broker.PeerRecord{Node: p.opts.NodeName, Boot: p.boot, Seq: seq}
}

// numberedResolver is a publish's Resolver that learns the message's
// record number when the outbox numbers its quorum write (appendLocked:
// the number is known only there, under the outbox's lock).
type numberedResolver interface {
	broker.Resolver
	numbered(seq uint64)
}

// namingResolver names its message (nameLocal) once numbered; it runs on
// the publisher's goroutine, inside the publish hook.
type namingResolver struct {
	broker.Resolver
	m *broker.Message
	p *Plane
}

func (n *namingResolver) numbered(seq uint64) { n.p.nameLocal(n.m, seq) }

// NeverBlocks declares the hook non-blocking (broker.NonBlocking).
func (p *Plane) NeverBlocks() {}

// PeerStatus is one link as GET /cluster shows it.
type PeerStatus struct {
	Name string `json:"name"`
	// InterestFresh: this node knows the peer's filters (InterestFilters of
	// them) and sends it only what matches; false: it sends it everything.
	InterestFresh   bool   `json:"interestFresh"`
	InterestFilters int    `json:"interestFilters"`
	Address         string `json:"address"`
	Connected       bool   `json:"connected"`
	Connects        uint64 `json:"connects"`
	Frames          uint64 `json:"framesSent"`
	Backlog         int    `json:"backlog"`           // reliable messages not confirmed by the peer
	Dropped         uint64 `json:"forwardDropped"`    // reliable messages dropped beyond ReplicationForwardQueueEntries
	Holds           uint64 `json:"forwardHolds"`      // times publishers were held back at the bound for this peer (behind, but up)
	BeDropped       uint64 `json:"bestEffortDropped"` // QoS 0 messages not sent (link down or slow)
	LastError       string `json:"lastError,omitempty"`
}

// Status is the data plane's part of GET /cluster.
type Status struct {
	// Interest is the number of filters this node announces;
	// InterestPending those whose announcement the peers have not all
	// confirmed yet (their SUBACKs wait).
	Interest        int `json:"interest"`
	InterestPending int `json:"interestPending"`
	// RetainedComplete: this node holds the cluster's retained messages
	// (its own history, or every live peer's answered); until then
	// SUBACKs, and the retained messages they bring, wait.
	RetainedComplete bool `json:"retainedComplete"`
	// TooLarge counts messages too large for the links (over
	// maxRecordBytes encoded), delivered on this node only.
	TooLarge uint64       `json:"tooLargeKept"`
	Peers    []PeerStatus `json:"peers"`
	Received ReceiveStats `json:"received"`
	// Replication is the quorum write's state (nil when off).
	Replication *ReplicationStatus `json:"replication,omitempty"`
}

// Status returns a snapshot of the links and counters.
func (p *Plane) Status() Status {
	p.mu.RLock()
	st := Status{Peers: make([]PeerStatus, 0, len(p.links))}
	for name, l := range p.links {
		qs := p.out.stats(l.ps)
		ps := PeerStatus{Name: name, Address: *l.addr.Load(), Connected: l.connected.Load(), Connects: l.connects.Load(),
			Frames: l.sentFrames.Load(), Backlog: qs.Backlog, Dropped: qs.Dropped, BeDropped: qs.BeDropped, Holds: qs.Holds}
		if e := l.lastErr.Load(); e != nil {
			ps.LastError = *e
		}
		ri := p.remote(name)
		ri.mu.Lock()
		ps.InterestFresh, ps.InterestFilters = ri.fresh.Load(), len(ri.filters)
		ri.mu.Unlock()
		st.Peers = append(st.Peers, ps)
	}
	p.mu.RUnlock()
	sort.Slice(st.Peers, func(i, j int) bool { return st.Peers[i].Name < st.Peers[j].Name })
	st.Received = p.recv.stats()
	st.TooLarge = p.tooLarge.Load()
	st.Replication = p.ReplicationStatus()
	p.local.mu.Lock()
	st.Interest, st.InterestPending = len(p.local.announced), len(p.local.pending)
	st.RetainedComplete = p.rsync.isComplete()
	p.local.mu.Unlock()
	return st
}

// warnLimiter rate-limits repeating warnings per key.
type warnLimiter struct {
	wmu  sync.Mutex // guards last
	last map[string]time.Time
}

const warnEvery = 10 * time.Second

func (p *Plane) warn(key, msg string, err error) {
	p.wmu.Lock()
	if p.last == nil {
		p.last = map[string]time.Time{}
	}
	now := time.Now()
	if now.Sub(p.last[key]) < warnEvery {
		p.wmu.Unlock()
		return
	}
	p.last[key] = now
	p.wmu.Unlock()
	p.log.Warn(msg, "err", err)
}
