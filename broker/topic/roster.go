package topic

import (
	"sync/atomic"

	"gantry/broker/packet"
)

// Entry is one subscription held by a Tree. The Tree stores entries by
// pointer and never writes through a pointer once it is stored: replacing a
// subscription stores a new Entry. A *Entry returned by Match can therefore
// be read without any lock, at any time; it describes the subscription as
// it was when Match ran and is current until that (Client, Filter) is
// unsubscribed or replaced.
type Entry[C comparable] struct {
	Client  C                 // subscriber key (the broker uses its session pointer)
	Filter  string            // as subscribed, including any $share/{group}/ prefix
	Options packet.SubOptions // QoS, No Local, Retain As Published, Retain Handling
	SubID   uint32            // v5 Subscription Identifier, 0 = none
	Group   string            // share group, "" if not shared; set by Subscribe from Filter
}

// rosterScan is the size up to which a roster finds a client by scanning
// its list; above it a position map is kept. Most filters have few
// subscribers, and a scan of a handful of pointers beats a map.
const rosterScan = 8

// roster is an ordered set of entries with distinct clients: the plain
// subscribers of one trie node, or the members of one share group.
// Removal swaps the last entry into the hole, so order is not stable.
type roster[C comparable] struct {
	list []*Entry[C]
	pos  map[C]int // index in list by client; nil while len(list) <= rosterScan
}

// find returns the index of c's entry or -1.
func (r *roster[C]) find(c C) int {
	if r.pos != nil {
		if i, ok := r.pos[c]; ok {
			return i
		}
		return -1
	}
	for i, e := range r.list {
		if e.Client == c {
			return i
		}
	}
	return -1
}

// put adds e, or replaces the entry of the same client in place (keeping
// its position), and reports whether one existed.
func (r *roster[C]) put(e *Entry[C]) (existed bool) {
	if i := r.find(e.Client); i >= 0 {
		r.list[i] = e
		return true
	}
	r.list = append(r.list, e)
	switch {
	case r.pos != nil:
		r.pos[e.Client] = len(r.list) - 1
	case len(r.list) > rosterScan:
		r.pos = make(map[C]int, len(r.list))
		for i, x := range r.list {
			r.pos[x.Client] = i
		}
	}
	return false
}

// remove drops c's entry and reports whether there was one. It releases
// the position map and spare capacity as the roster shrinks, so a filter
// that once had a crowd does not keep its memory forever.
func (r *roster[C]) remove(c C) bool {
	i := r.find(c)
	if i < 0 {
		return false
	}
	last := len(r.list) - 1
	moved := r.list[last]
	r.list[i] = moved
	r.list[last] = nil // let the removed entry be collected
	r.list = r.list[:last]
	if r.pos != nil {
		delete(r.pos, c)
		if i != last {
			r.pos[moved.Client] = i
		}
		if len(r.list) <= rosterScan/2 {
			r.pos = nil
		}
	}
	switch {
	case len(r.list) == 0:
		r.list = nil
	case cap(r.list) > 64 && len(r.list) < cap(r.list)/4:
		r.list = append([]*Entry[C](nil), r.list...)
	}
	return true
}

// group is one shared subscription group on one inner filter: a message
// matching the filter goes to exactly one member, chosen round robin.
type group[C comparable] struct {
	name string
	roster[C]
	next atomic.Uint64 // round-robin position; advanced under the read lock
}

// pick chooses the member for one message. Starting at the round-robin
// position it takes the first member that accept admits (all, when accept
// is nil) and moves the position past it, so a skipped member does not
// hand its turns to its neighbour alone. When accept admits nobody it
// falls back to the member at the round-robin position: a group whose
// members are all offline still gets the message (to queue, or to drop by
// the broker's own rule). The group is never empty.
func (g *group[C]) pick(accept func(C) bool) *Entry[C] {
	n := uint64(len(g.list))
	start := g.next.Add(1) - 1
	if accept == nil {
		return g.list[start%n]
	}
	for i := range n {
		e := g.list[(start+i)%n]
		if accept(e.Client) {
			if i > 0 {
				g.next.Add(i)
			}
			return e
		}
	}
	return g.list[start%n]
}
