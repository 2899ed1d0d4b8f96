package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/cluster/partition"
)

// Replication configures the quorum write (issue 14): a QoS 1/2 message
// is acknowledged once a majority of its partition's copies stored it.
type Replication struct {
	// Gate waits for the majority (Cluster.QuorumGateEnabled). Off, a
	// publish is acknowledged once this node stored it, as without the
	// data plane's copies; the records still go to the copies.
	Gate bool
	// Timeout is how long a publish waits for its majority before it is
	// refused with 0x97 (ReplicationTimeoutMs).
	Timeout time.Duration
	// Window bounds the publishes waiting for a majority on this node
	// (ReplicationWindow): beyond it a publish is refused at once.
	Window int
	// CompactEvery bounds the records kept per partition copy
	// (ReplicationCompactEveryRecords).
	CompactEvery int
	// Replay is how far back a failover re-delivers a lost node's records
	// (ReplicationReplaySeconds); 0 re-delivers none.
	Replay time.Duration
	// DeliverReplays delivers every replay copy, also those this node
	// already delivered (ReplicationDedupDelivered false).
	DeliverReplays bool
}

// startingFor is how long after start a publish refused for want of a
// partition map says "Cluster starting" (the seed's bound).
const startingFor = 30 * time.Second

// Refusal reasons, as GET /cluster and /metrics count them.
const (
	failStarting  = "starting"   // no partition map yet
	failNoOwner   = "noOwner"    // the partition has no owner: failover in progress
	failNoMajor   = "noMajority" // too few of the partition's copies reachable
	failWindow    = "window"     // ReplicationWindow publishes wait already
	failTimeout   = "timeout"    // no majority within ReplicationTimeoutMs
	failStale     = "stale"      // a copy refused the write: this node's map is older
	failDisk      = "disk"       // the local write failed (0x80)
	failReasonsN  = 7
	quorumSweepIn = 50 * time.Millisecond
)

var failReasons = [failReasonsN]string{failStarting, failNoOwner, failNoMajor, failWindow, failTimeout, failStale, failDisk}

func refusal(text string) error {
	return &broker.Refusal{Code: packet.QuotaExceeded, Text: text}
}

// errStaleCopy answers a frame that held a copy written in an older epoch
// than the one this node knows for its partition: the sender does not
// count this node for that frame's writes.
var errStaleCopy = packet.QuotaExceeded

// quorumWrite is one publish waiting for its majority.
type quorumWrite struct {
	need      atomic.Int32 // confirmations still missing
	state     atomic.Int32 // qPending (then qMajority when watched), then qAcked or qRefused, once
	res       broker.Resolver
	deadline  time.Time
	partition uint32
	g         *quorumGate

	// For the trace (nil: off): when it started, its record's number.
	trace  *tracer
	start  time.Time
	seq    atomic.Uint64
	client string
	topic  string

	// own is the key of this node's own copy of the write (0: none, or
	// not written yet), and pid and publisher name it in the QoS 2 index:
	// a refused write leaves the copy (dropOwn), or a fill or replay would
	// bring it back and a QoS 2 resend would be taken for it.
	own       atomic.Uint64
	pid       uint16
	publisher string
	// watched: the publisher's broker reports the local outcome (settle).
	watched bool
}

// States of a quorum write. A write whose publisher's broker reports its
// local outcome (broker.StoreWatcher) passes through qMajority: its copies
// have it, and the decision waits for this node's own writes of it (the
// queue entries of its subscribers here), so that a publish refused with
// 0x80 for a full disk here is refused everywhere.
const (
	qPending = iota
	qAcked
	qRefused
	qMajority
)

// undecided reports whether q (not nil) waits for its decision: the peers
// hold its record, or pass over nothing after it, until then.
func (q *quorumWrite) undecided() bool {
	st := q.state.Load()
	return st == qPending || st == qMajority
}

// ack counts one durable copy.
func (q *quorumWrite) ack() {
	if q.need.Add(-1) == 0 {
		q.finish(nil, "")
	}
}

// finish answers the publisher once: nil lets it through (routed and
// acknowledged), an error refuses it. A watched write (settle) that has
// its majority is let through to the broker, which decides it.
func (q *quorumWrite) finish(err error, reason string) {
	if err == nil && q.watched {
		if q.state.CompareAndSwap(qPending, qMajority) {
			q.res.Resolve(nil) // routed and written here, then settle
		}
		return
	}
	if q.decide(err, reason, qPending) {
		q.res.Resolve(err)
	}
}

// settle is the broker's word on a watched write with its majority: nil
// once routed here and durable, an error when a write here failed (the
// publisher is refused by the broker itself).
func (q *quorumWrite) settle(err error) {
	if err != nil {
		q.decide(errStoreFailed, failDisk, qMajority)
		return
	}
	q.decide(nil, "", qMajority)
}

// decide moves q from state from to its decision and reports whether it
// did (only once).
func (q *quorumWrite) decide(err error, reason string, from int32) bool {
	if err == nil {
		if !q.state.CompareAndSwap(from, qAcked) {
			return false
		}
	} else if q.g.refuse != nil {
		if !q.g.refuse(q, from) {
			return false
		}
	} else if !q.state.CompareAndSwap(from, qRefused) {
		return false
	}
	if err != nil && q.g.dropOwn != nil {
		q.g.dropOwn(q)
	}
	if q.g.wake != nil {
		q.g.wake() // peers that are not copies take it now, or pass it over
	}
	q.g.pending.Add(-1)
	if err != nil {
		q.g.fail(reason)
	} else {
		q.g.ok.Add(1)
	}
	if q.trace != nil {
		e := TraceEvent{Event: "acknowledged", Client: q.client, Topic: q.topic, Partition: q.partition, Seq: q.seq.Load(),
			Millis: float64(time.Since(q.start).Microseconds()) / 1000}
		if err != nil {
			e.Event, e.Reason = "refused", reason+": "+err.Error()
		}
		q.trace.event(e)
	}
	return true
}

// quorumRec is a publish's replication part and its quorum write, in one
// allocation.
type quorumRec struct {
	rep repInfo
	q   quorumWrite
}

// repInfo is what a reliable record carries for its partition's copies.
type repInfo struct {
	partition uint32
	epoch     uint64
	copies    []string     // the peers that store it (the other replicas)
	q         *quorumWrite // nil: nobody waits for it
	// origin names a record another node accepted (a replay, a fill);
	// zero for this node's own.
	origin   copyID
	at       int64
	copyOnly bool   // stored by the copies, delivered nowhere
	pid      uint16 // a QoS 2 message's packet identifier at its publisher
	// filled, when set, runs once the copy confirmed it (a fill's step).
	filled func()
}

func (r *repInfo) isCopy(peer string) bool { return slices.Contains(r.copies, peer) }

// quorum is the write waiting for r's majority (nil: none, or r nil).
func (r *repInfo) quorum() *quorumWrite {
	if r == nil {
		return nil
	}
	return r.q
}

// mapRoutes is, per partition of map m, the other replicas (the peers a
// write goes to as copies) and whether this node is one.
type mapRoutes struct {
	m      *partition.Map
	others [][]string
	self   []bool
}

func newMapRoutes(m *partition.Map, me string) *mapRoutes {
	rt := &mapRoutes{m: m, others: make([][]string, len(m.Partitions)), self: make([]bool, len(m.Partitions))}
	for i, a := range m.Partitions {
		for _, n := range a.Replicas {
			if n == me {
				rt.self[i] = true
			} else {
				rt.others[i] = append(rt.others[i], n)
			}
		}
	}
	return rt
}

// routesFor is the routes of partition p in m.
func (g *quorumGate) routesFor(m *partition.Map, p uint32, a partition.Assignment, me string) (others []string, self bool) {
	if rt := g.routes.Load(); rt != nil && rt.m == m {
		return rt.others[p], rt.self[p]
	}
	for _, n := range a.Replicas { // the map changed between the two loads
		if n == me {
			self = true
		} else {
			others = append(others, n)
		}
	}
	return others, self
}

// quorumGate tracks the publishes waiting for a majority.
type quorumGate struct {
	opts    Replication
	started time.Time

	pmap atomic.Pointer[partition.Map] // the committed map, as this node applied it
	// routes are pmap's copies per partition as replicate needs them,
	// computed once per map (SetMap).
	routes atomic.Pointer[mapRoutes]

	pending atomic.Int64 // publishes waiting
	ok      atomic.Uint64
	failed  [failReasonsN]atomic.Uint64

	mu    sync.Mutex // guards waits
	waits []*quorumWrite

	// wake signals every peer's stream (a write was decided); set by New.
	wake func()
	// refuse decides a write refused (outbox.refuse), so that the copies
	// holding it learn it; set by New.
	refuse func(q *quorumWrite, from int32) bool
	// dropOwn removes a refused write's own copy here (Plane.dropOwnCopy);
	// set by New.
	dropOwn func(*quorumWrite)
	// fenced: no contact with the leader (Options.InContact), set by the sweep.
	fenced atomic.Bool
}

func (g *quorumGate) fail(reason string) {
	for i, r := range failReasons {
		if r == reason {
			g.failed[i].Add(1)
		}
	}
}

// failures is the refusals by reason.
func (g *quorumGate) failures() map[string]uint64 {
	out := make(map[string]uint64, failReasonsN)
	for i, r := range failReasons {
		out[r] = g.failed[i].Load()
	}
	return out
}

// admit decides whether a publish of clientID may start a quorum write
// now: it returns the partition, its assignment and the number of
// confirmations needed, or a refusal (0x97, with its reason text).
func (g *quorumGate) admit(m *partition.Map, self, clientID string, up func(peer string) bool) (uint32, partition.Assignment, int, error) {
	if m == nil || len(m.Partitions) == 0 {
		if !g.opts.Gate {
			return 0, partition.Assignment{}, 0, errNoMap
		}
		if time.Since(g.started) < startingFor {
			g.fail(failStarting)
			return 0, partition.Assignment{}, 0, refusal("Cluster starting")
		}
		g.fail(failNoMajor)
		return 0, partition.Assignment{}, 0, refusal("no partition map: the cluster has no majority")
	}
	p := uint32(partition.For(clientID, len(m.Partitions)))
	a := m.Partitions[p]
	if !g.opts.Gate {
		return p, a, 0, nil // acknowledged once this node has it: nothing to refuse for
	}
	if g.fenced.Load() {
		g.fail(failNoMajor)
		return p, a, 0, refusal("no contact with the cluster's leader: this node may be on the minority side of a split")
	}
	if a.Owner == "" {
		g.fail(failNoOwner)
		return p, a, 0, refusal(fmt.Sprintf("partition %d has no owner now (failover in progress)", p))
	}
	need := len(a.Replicas)/2 + 1
	reach := 0
	for _, r := range a.Replicas {
		if r == self || up(r) {
			reach++
		}
	}
	if reach < need {
		g.fail(failNoMajor)
		return p, a, 0, refusal(fmt.Sprintf("%d of partition %d's %d copies reachable, %d needed", reach, p, len(a.Replicas), need))
	}
	if g.pending.Add(1) > int64(g.opts.Window) {
		g.pending.Add(-1)
		g.fail(failWindow)
		return p, a, 0, refusal(fmt.Sprintf("%d publishes wait for a majority already (ReplicationWindow)", g.opts.Window))
	}
	return p, a, need, nil
}

// wait registers a started write for the timeout sweep.
func (g *quorumGate) wait(q *quorumWrite) {
	g.mu.Lock()
	g.waits = append(g.waits, q)
	g.mu.Unlock()
}

// sweep refuses the writes past their deadline and forgets the answered
// ones. Writes are registered in deadline order.
func (g *quorumGate) sweep(now time.Time) {
	g.mu.Lock()
	i := 0
	var late []*quorumWrite
	for ; i < len(g.waits); i++ {
		q := g.waits[i]
		if q.state.Load() != qPending {
			continue
		}
		if now.Before(q.deadline) {
			break
		}
		late = append(late, q)
	}
	// Keep the unanswered ones from i on; answered ones later in the list
	// go on a later sweep.
	n := copy(g.waits, g.waits[i:])
	clear(g.waits[n:])
	g.waits = g.waits[:n]
	g.mu.Unlock()
	for _, q := range late {
		q.finish(refusal(fmt.Sprintf("no majority of partition %d's copies confirmed within %v", q.partition, g.opts.Timeout)), failTimeout)
	}
}

// refuseAll refuses every write still waiting (Stop).
func (g *quorumGate) refuseAll(why string) {
	g.mu.Lock()
	waits := g.waits
	g.waits = nil
	g.mu.Unlock()
	for _, q := range waits {
		q.finish(refusal(why), failNoMajor)
	}
}

// replica reports whether the map this node applied places a copy of
// partition p on node (true without a map: nothing to say otherwise).
func (g *quorumGate) replica(p uint32, node string) bool {
	m := g.pmap.Load()
	if m == nil || int(p) >= len(m.Partitions) {
		return true
	}
	return slices.Contains(m.Partitions[p].Replicas, node)
}

// epoch is the epoch this node knows for partition p (0: none).
func (g *quorumGate) epoch(p uint32) uint64 {
	m := g.pmap.Load()
	if m == nil || int(p) >= len(m.Partitions) {
		return 0
	}
	return m.Partitions[p].Epoch
}

// errNoMap: ungated, and no partition map yet.
var errNoMap = errors.New("dataplane: no partition map")

// errStoreFailed refuses a publish whose local write failed: 0x80.
var errStoreFailed = packet.UnspecifiedError

// replicate starts the quorum write of a QoS 1/2 publish: the record goes
// into this node's stream (to every peer that wants it, and to every
// other copy of its partition, wanted or not) and, when this node is a
// copy, into its own copy; the publisher is answered once a majority of
// the copies confirmed a durable write, or refused.
func (p *Plane) replicate(m *broker.Message, enc []byte, groups map[string][]string, r broker.Resolver) error {
	g := p.gate
	// Only a QoS 2 message's packet identifier is indexed (the exactly-once
	// state of its publisher): a QoS 1 one would cost every copy an index
	// entry and a hash of its payload for nothing.
	var sum uint64
	var pid uint16
	if m.QoS == 2 && m.PacketID != 0 {
		pid = m.PacketID
		sum = qos2Sum(m.Topic, m.Payload)
		if seen, part, ok := p.resentQoS2(m, sum); ok {
			// Written to this copy before a failover: PUBREC, not routed
			// here again (this copy delivered it on receipt). Whether its
			// origin acknowledged it is not known here, so it goes to the
			// peers once more under its first identity: those that have it
			// drop it, the others (its origin refused it, or never passed
			// it on) deliver it.
			p.qos2Resent.Add(1)
			p.out.addReliable(enc, m.Topic, m.Retain, groups, &repInfo{partition: part, origin: seen.id, at: seen.at}, nil)
			return broker.ErrDuplicate
		}
	}
	pm := g.pmap.Load()
	part, a, need, err := g.admit(pm, p.opts.NodeName, m.ClientID, p.peerUp)
	if err == errNoMap {
		// Ungated and no map yet: forwarded as without copies.
		if p.out.addReliable(enc, m.Topic, m.Retain, groups, nil, r.Resolve) {
			return broker.ErrDeferred
		}
		return nil
	}
	if err != nil {
		p.trace.event(TraceEvent{Event: "refused", Client: m.ClientID, Topic: m.Topic, QoS: m.QoS, Partition: part, Reason: err.Error()})
		return err
	}
	now := time.Now()
	others, self := g.routesFor(pm, part, a, p.opts.NodeName)
	var rep *repInfo
	var q *quorumWrite
	if g.opts.Gate {
		qr := &quorumRec{rep: repInfo{partition: part, epoch: a.Epoch, copies: others, at: now.UnixNano(), pid: pid},
			q: quorumWrite{res: r, deadline: now.Add(g.opts.Timeout), partition: part, g: g, pid: pid, publisher: m.ClientID}}
		rep, q = &qr.rep, &qr.q
	} else {
		rep = &repInfo{partition: part, epoch: a.Epoch, copies: others, at: now.UnixNano(), pid: pid}
	}
	if q != nil {
		if p.trace != nil {
			q.trace, q.start, q.client, q.topic = p.trace, now, m.ClientID, m.Topic
		}
		inner := r
		if n, ok := r.(*namingResolver); ok {
			inner = n.Resolver
		}
		if w, ok := inner.(broker.StoreWatcher); ok {
			// Decided only once the broker here routed and stored it: a
			// write here that fails (a full disk) refuses it with 0x80,
			// and the copies must not deliver what the publisher was
			// told is refused.
			w.WatchStore(q.settle)
			q.watched = true
		}
		// The majority, and this node's own stream record on disk: the
		// record may reach the copies before its write, but a restart
		// must find it (the copies' confirmations alone would leave the
		// peers that are not copies without it).
		q.need.Store(int32(need) + 1)
		rep.q = q
		g.wait(q)
	}
	var onWrite func(error)
	if q != nil {
		onWrite = func(err error) {
			if err != nil {
				q.finish(errStoreFailed, failDisk)
				return
			}
			q.ack()
		}
	} else if p.store != nil {
		onWrite = r.Resolve
	}
	seq, room := p.out.addReplicated(enc, m.Topic, m.Retain, groups, rep, onWrite)
	holdBack(r, room)
	if q != nil && p.store == nil {
		q.ack() // in memory: the stream record is kept already (appendLocked numbered q)
	}
	p.trace.event(TraceEvent{Event: "publish", Client: m.ClientID, Topic: m.Topic, QoS: m.QoS, Partition: part, Epoch: a.Epoch,
		Origin: p.opts.NodeName, Seq: seq, Copies: others})
	if self {
		own := copyRec{id: copyID{origin: p.opts.NodeName, boot: p.boot, seq: seq}, at: rep.at, epoch: a.Epoch, msg: enc,
			pid: pid, client: m.ClientID, sum: sum}
		var done func(error)
		if q != nil {
			done = onWrite // the same count: one durable write
		}
		key, stored := p.copies.addOne(part, own, done)
		if q != nil {
			q.own.Store(key)
			if q.state.Load() == qRefused {
				p.dropOwnCopy(q) // refused before its key was known
			}
			if !stored {
				q.ack() // in memory: kept already
			}
		}
	}
	if q == nil && p.store == nil {
		return nil // in memory and not gated: acknowledged now
	}
	return broker.ErrDeferred
}

// holdBack pauses the publisher of a record the stream keeps at its bound
// (outbox.holdLocked) until room: the broker stops reading it.
func holdBack(r broker.Resolver, room <-chan struct{}) {
	if room == nil {
		return
	}
	if n, ok := r.(*namingResolver); ok {
		r = n.Resolver
	}
	if p, ok := r.(broker.Pauser); ok {
		p.Pause(room)
	}
}

// dropOwnCopy removes the own copy of a refused write q (twice is
// harmless).
func (p *Plane) dropOwnCopy(q *quorumWrite) {
	key := q.own.Load()
	if key == 0 {
		return
	}
	id := copyID{origin: p.opts.NodeName, boot: p.boot, seq: q.seq.Load()}
	p.copies.dropRefused([]heldRec{{id: id, part: q.partition, key: key, pid: q.pid, client: q.publisher}}, nil)
}

// resentQoS2 reports whether the copy of m's partition here holds m: the
// same publisher, packet identifier, topic and payload.
func (p *Plane) resentQoS2(m *broker.Message, sum uint64) (qos2Seen, uint32, bool) {
	if !m.Dup {
		return qos2Seen{}, 0, false
	}
	mp := p.gate.pmap.Load()
	if mp == nil || len(mp.Partitions) == 0 {
		return qos2Seen{}, 0, false
	}
	part := uint32(partition.For(m.ClientID, len(mp.Partitions)))
	seen, ok := p.copies.acceptedQoS2(part, m.ClientID, m.PacketID, sum)
	return seen, part, ok
}

// peerUp reports whether the link to peer is connected.
func (p *Plane) peerUp(peer string) bool {
	p.mu.RLock()
	l := p.links[peer]
	p.mu.RUnlock()
	return l != nil && l.connected.Load()
}

// runSweep refuses the quorum writes past their deadline until Stop.
func (p *Plane) runSweep() {
	defer p.wg.Done()
	t := time.NewTicker(quorumSweepIn)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			if p.opts.InContact != nil {
				p.gate.fenced.Store(!p.opts.InContact())
			}
			p.gate.sweep(now)
		}
	}
}

// ReplicationStatus is the quorum write's part of GET /cluster.
type ReplicationStatus struct {
	QuorumGate bool  `json:"quorumGate"`
	TimeoutMs  int64 `json:"timeoutMs"`
	Window     int   `json:"window"`
	// InFlight is the publishes waiting for their majority now, and
	// InFlightByPartition the same per partition.
	InFlight            int64          `json:"inFlight"`
	InFlightByPartition map[uint32]int `json:"inFlightByPartition,omitempty"`
	// Acknowledged counts the publishes a majority confirmed; Failures
	// the refused ones by reason (coreflux_replication_quorum_failures_total).
	Acknowledged uint64            `json:"quorumWrites"`
	Failures     map[string]uint64 `json:"quorumFailures"`
	MapVersion   uint64            `json:"mapVersion"`
	// Copies is the records this node holds per partition it is (or was)
	// a copy of.
	Copies map[uint32]int `json:"copies"`
	// Copied counts records stored as a copy for other nodes; StaleCopies
	// the copies refused for an epoch that is over.
	Copied      uint64 `json:"copied"`
	StaleCopies uint64 `json:"staleCopiesRefused"`
	// ReplayedOut counts records this node re-delivered for lost nodes;
	// ReplayDuplicates the replay copies it dropped, delivered already.
	ReplayedOut      uint64 `json:"replayed"`
	ReplayDuplicates uint64 `json:"replayDuplicatesDropped"`
	// QoS2Resent counts QoS 2 resends (DUP) after a failover that this
	// node recognised from its copy and did not deliver again.
	QoS2Resent uint64 `json:"qos2ResendsRecognised"`
	// Held is the copies here whose delivery waits for their origin's
	// decision now (two-phase delivery); Released counts those delivered
	// once acknowledged (or once their origin left the map), RefusedDropped
	// those dropped because their write was refused.
	Held           int64  `json:"heldCopies"`
	Released       uint64 `json:"heldReleased"`
	RefusedDropped uint64 `json:"refusedCopiesDropped"`
	// CheckpointFailures counts checkpoints of dataplane.db's log that
	// bbolt refused (a full disk): the log keeps their writes, and the
	// next checkpoint applies them.
	CheckpointFailures uint64 `json:"storeCheckpointFailures"`
	// Filling is the new copies this node, their owner, fills now.
	Filling []FillStatus `json:"filling,omitempty"`
}

// FillStatus is one new copy being filled.
type FillStatus struct {
	Partition uint32    `json:"partition"`
	Node      string    `json:"node"`
	Since     time.Time `json:"since"`
	Filled    bool      `json:"filled"` // reported to the leader, not yet in the map
}

// ReplicationStatus returns the quorum write's state; nil without one.
func (p *Plane) ReplicationStatus() *ReplicationStatus {
	g := p.gate
	if g == nil {
		return nil
	}
	st := &ReplicationStatus{QuorumGate: g.opts.Gate, TimeoutMs: g.opts.Timeout.Milliseconds(), Window: g.opts.Window,
		InFlight: g.pending.Load(), Acknowledged: g.ok.Load(), Failures: g.failures(), Copies: p.copies.counts(),
		Copied: p.recv.copied.Load(), StaleCopies: p.recv.staleCopies.Load(),
		ReplayedOut: p.replayedOut.Load(), ReplayDuplicates: p.recv.replayDups.Load(), QoS2Resent: p.qos2Resent.Load(),
		Held: p.recv.held.Load(), Released: p.recv.released.Load(), RefusedDropped: p.recv.refusedDrop.Load()}
	if m := g.pmap.Load(); m != nil {
		st.MapVersion = m.Version
	}
	if p.store != nil {
		st.CheckpointFailures = p.store.ckptFailures.Load()
	}
	g.mu.Lock()
	for _, q := range g.waits {
		if q.undecided() {
			if st.InFlightByPartition == nil {
				st.InFlightByPartition = map[uint32]int{}
			}
			st.InFlightByPartition[q.partition]++
		}
	}
	g.mu.Unlock()
	p.fills.mu.Lock()
	for k, r := range p.fills.runs {
		st.Filling = append(st.Filling, FillStatus{Partition: k.p, Node: k.node, Since: r.started, Filled: r.filled})
	}
	p.fills.mu.Unlock()
	return st
}
