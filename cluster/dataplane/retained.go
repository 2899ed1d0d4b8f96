package dataplane

import (
	"sync"
	"time"

	"gantry/broker"
	"gantry/cluster/wire"
)

// Retained messages are the cluster's: every retained publish travels
// reliably to every peer (interested or not) with a version, a Lamport
// counter and the writing node, so that every node keeps the same value
// per topic whatever order the writes reach it in: the highest version
// wins, not the latest clock. A message with an older version than the
// node holds is still delivered to subscribers, but not stored. A peer
// that is new to this node, or that lost records beyond
// ReplicationForwardQueueEntries, gets this node's whole retained store as
// store-only records (versions included), so a node that joins later, or
// was away too long, catches up.

// retainedVersions remembers the version of every retained topic this
// node stored (deletions included: an older value must not come back).
// A deletion's version (a tombstone) is kept for tombstoneKeep after it
// was written (its counter is a hybrid logical clock, so its age is the
// same on every node) and then pruned: by then every node that was up
// has it, and a node that comes back later gets it from the sender's
// stream, or, beyond ReplicationForwardQueueEntries, from the catch-up
// that carries the tombstones kept.
type retainedVersions struct {
	mu      sync.Mutex // guards counter, topics
	counter uint64
	topics  map[string]wire.Version
	store   *store // nil in memory
}

func newRetainedVersions(st *store) *retainedVersions {
	rv := &retainedVersions{topics: map[string]wire.Version{}, store: st}
	if st != nil {
		for t, v := range st.retainedVersions() {
			rv.counter = max(rv.counter, v.Counter)
			if v.Counter != 0 { // 0: a pruned tombstone
				rv.topics[t] = v
			}
		}
	}
	return rv
}

// next gives a local retained publish on topic its version. The counter
// is a hybrid logical clock: one above every version this node has seen,
// and at least the wall clock in microseconds, so a node that lost its
// versions (restarted in memory) still writes above what it wrote before
// it went down, whether or not its catch-up has arrived yet; the clock
// only orders writes that did not see each other.
func (rv *retainedVersions) next(node, topic string) wire.Version {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.counter = max(rv.counter+1, uint64(time.Now().UnixMicro()))
	v := wire.Version{Counter: rv.counter, Node: node}
	rv.setLocked(topic, v)
	return v
}

// accept reports whether a peer's retained message with version v is newer
// than what this node holds for topic, and records it if so. A message
// without a version counts as the oldest.
func (rv *retainedVersions) accept(topic string, v wire.Version) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.counter = max(rv.counter, v.Counter)
	have, ok := rv.topics[topic]
	if ok && !have.Less(v) {
		return false
	}
	rv.setLocked(topic, v)
	return true
}

func (rv *retainedVersions) setLocked(topic string, v wire.Version) {
	rv.topics[topic] = v
	if rv.store != nil {
		rv.store.putRetainedVersion(topic, v)
	}
}

func (rv *retainedVersions) get(topic string) wire.Version {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.topics[topic]
}

// catchUp queues this node's retained store for peer only, as store-only
// records with their versions, and the tombstones it keeps (deletions, as
// store-only records without a payload), so that a peer that missed a
// deletion beyond the stream's bound deletes its value too.
func (p *Plane) catchUp(peer string) {
	n := 0
	live := map[string]struct{}{}
	p.opts.Broker.RangeRetained(func(m *broker.Message) bool {
		live[m.Topic] = struct{}{}
		enc := wire.AppendRetained(nil, m, p.retained.get(m.Topic), true)
		p.out.addReliableFor(peer, enc, m.Topic, nil)
		n++
		return true
	})
	for topic, v := range p.retained.tombstones(live) {
		enc := wire.AppendRetained(nil, &broker.Message{Topic: topic, Retain: true}, v, true)
		p.out.addReliableFor(peer, enc, topic, nil)
		n++
	}
	if n > 0 {
		p.log.Info("sending the retained messages to a peer that is new here or missed some", "peer", peer, "messages", n)
	}
}

// retainedSync is whether this node holds the cluster's retained
// messages. A node without a history of its own (in memory, or a data
// directory that never received anything from a peer) asks every peer
// for its retained store when its link comes up (wire.RetainedAsk); a
// peer answers in its reliable stream, the store-only records first and
// wire.RetainedSent last. The node is complete once every peer has
// answered or is not live (its link down after a try), or after
// retainedSyncMax; until then SUBACKs wait (SubscriptionsAdded), and with
// them the retained messages a SUBSCRIBE reads.
type retainedSync struct {
	mu       sync.Mutex // guards every field
	complete bool
	answered map[string]bool // peers whose retained store arrived
	waiters  []func()
	since    time.Time
}

// retainedSyncMax bounds how long a node without the cluster's retained
// messages holds SUBACKs back waiting for its peers' answers.
const retainedSyncMax = 15 * time.Second

// retainedSyncEvery is how often an incomplete node looks at its links.
const retainedSyncEvery = 50 * time.Millisecond

// Complete reports whether this node holds the cluster's retained messages.
func (rs *retainedSync) isComplete() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.complete
}

// wait runs done once the node is complete; false when it is already.
func (rs *retainedSync) wait(done func()) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.complete {
		return false
	}
	rs.waiters = append(rs.waiters, done)
	return true
}

// answeredBy records that peer's retained store arrived.
func (rs *retainedSync) answeredBy(peer string) {
	rs.mu.Lock()
	rs.answered[peer] = true
	rs.mu.Unlock()
}

// wants reports whether peer is still to be asked.
func (rs *retainedSync) wants(peer string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return !rs.complete && !rs.answered[peer]
}

// runRetainedSync completes an incomplete node: it checks the links every
// retainedSyncEvery until each peer answered or is not live, or
// retainedSyncMax passed.
func (p *Plane) runRetainedSync() {
	defer p.wg.Done()
	rs := &p.rsync
	t := time.NewTicker(retainedSyncEvery)
	defer t.Stop()
	for !p.retainedSynced() {
		select {
		case <-p.ctx.Done():
		case <-t.C:
			continue
		}
		break // stopping: nothing is to wait any longer
	}
	rs.mu.Lock()
	rs.complete = true
	waiters := rs.waiters
	rs.waiters = nil
	n, took := len(rs.answered), time.Since(rs.since)
	rs.mu.Unlock()
	p.log.Info("holding the cluster's retained messages", "peersAnswered", n, "took", took.Round(time.Millisecond))
	for _, w := range waiters {
		w()
	}
}

// retainedSynced reports whether every peer answered or is not live (its
// link down after at least one try), once the membership is known; or
// whether retainedSyncMax passed.
func (p *Plane) retainedSynced() bool {
	rs := &p.rsync
	if time.Since(rs.since) > retainedSyncMax {
		p.log.Warn("serving retained messages without every peer's: not all answered", "after", retainedSyncMax)
		return true
	}
	if !p.peersKnown.Load() {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for name, l := range p.links {
		if rs.answered[name] {
			continue
		}
		if l.connected.Load() || (l.connects.Load() == 0 && l.lastErr.Load() == nil) {
			return false // live, or not tried yet
		}
	}
	return true
}

// askRetained queues, on a link just up, the question for the peer's
// retained store, when this node still needs it. After the snapshot.
func (p *Plane) askRetained(ps *peerStream) {
	if p.rsync.wants(ps.name) {
		p.out.addControl(ps, interestMessage(wire.RetainedAsk, nil), nil)
	}
}

// retainedAsked answers a peer's question for this node's retained store.
// A peer not linked yet (its question came before this node's membership
// listed it) is answered once SetPeers adds it: records queued before its
// stream starts would never reach it.
func (p *Plane) retainedAsked(peer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	if _, ok := p.links[peer]; !ok {
		if p.asked == nil {
			p.asked = map[string]bool{}
		}
		p.asked[peer] = true
		return
	}
	p.wg.Add(1)
	go func() { // not on the receiving connection's goroutine: the store may be large
		defer p.wg.Done()
		p.answerRetained(peer)
	}()
}

// answerRetained sends peer this node's retained store, then RetainedSent.
func (p *Plane) answerRetained(peer string) {
	p.catchUp(peer)
	p.out.addReliableFor(peer, interestMessage(wire.RetainedSent, nil), wire.InterestTopic, nil)
}

// known reports whether this node holds versions (a retained history).
func (rv *retainedVersions) known() bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.topics) > 0
}

// tombstoneKeep is how long a deleted retained topic's version is kept.
const tombstoneKeep = 24 * time.Hour

// tombstonePruneEvery is how often tombstones past tombstoneKeep go.
const tombstonePruneEvery = 10 * time.Minute

// tombstones returns the versions of the topics not in live (deleted).
func (rv *retainedVersions) tombstones(live map[string]struct{}) map[string]wire.Version {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := map[string]wire.Version{}
	for t, v := range rv.topics {
		if _, ok := live[t]; !ok {
			out[t] = v
		}
	}
	return out
}

// prune forgets the tombstones (topics not in live) written before
// horizon, and returns how many. With a store it writes a zero version in
// their place, which a restart skips.
func (rv *retainedVersions) prune(live map[string]struct{}, horizon time.Time) int {
	h := uint64(horizon.UnixMicro())
	rv.mu.Lock()
	defer rv.mu.Unlock()
	n := 0
	for t, v := range rv.topics {
		if _, ok := live[t]; ok || v.Counter >= h {
			continue
		}
		delete(rv.topics, t)
		if rv.store != nil {
			rv.store.putRetainedVersion(t, wire.Version{})
		}
		n++
	}
	return n
}

// pruneTombstones forgets the tombstones older than tombstoneKeep.
func (p *Plane) pruneTombstones(now time.Time) int {
	live := map[string]struct{}{}
	p.opts.Broker.RangeRetained(func(m *broker.Message) bool {
		live[m.Topic] = struct{}{}
		return true
	})
	n := p.retained.prune(live, now.Add(-tombstoneKeep))
	if n > 0 {
		p.log.Info("pruned the versions of deleted retained topics", "topics", n, "olderThan", tombstoneKeep)
	}
	return n
}

// catchUpIfDropped sends the peer, on a connection just up, this node's
// retained store when the stream dropped records for it since the last
// catch-up (beyond ReplicationForwardQueueEntries while it was away): the
// retained values and deletions among them reach it that way.
func (l *link) catchUpIfDropped() {
	p := l.p
	if !p.opts.Reliable {
		return
	}
	d := p.out.stats(l.ps).Dropped
	if d <= l.caughtDropped.Load() {
		return
	}
	l.caughtDropped.Store(d)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.catchUp(l.peer)
	}()
}
