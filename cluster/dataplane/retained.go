package dataplane

import (
	"sync"

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
type retainedVersions struct {
	mu      sync.Mutex // guards counter, topics
	counter uint64
	topics  map[string]wire.Version
	store   *store // nil in memory
}

func newRetainedVersions(st *store) *retainedVersions {
	rv := &retainedVersions{topics: map[string]wire.Version{}, store: st}
	if st != nil {
		rv.topics = st.retainedVersions()
		for _, v := range rv.topics {
			rv.counter = max(rv.counter, v.Counter)
		}
	}
	return rv
}

// next gives a local retained publish on topic its version.
func (rv *retainedVersions) next(node, topic string) wire.Version {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.counter++
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
// records with their versions.
func (p *Plane) catchUp(peer string) {
	n := 0
	p.opts.Broker.RangeRetained(func(m *broker.Message) bool {
		enc := wire.AppendRetained(nil, m, p.retained.get(m.Topic), true)
		p.out.addReliableFor(peer, enc, m.Topic, nil)
		n++
		return true
	})
	if n > 0 {
		p.log.Info("sending the retained messages to a peer that is new here or missed some", "peer", peer, "messages", n)
	}
}
