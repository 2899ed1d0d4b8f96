package topic

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Tree is the subscription tree: a trie keyed by filter level, where a
// node's literal children sit in a map and its '+' and '#' children in two
// fields. Matching a topic visits only the nodes whose filter prefix fits
// the topic, so its cost does not grow with unrelated filters.
//
// The zero Tree is empty and ready to use. A Tree is safe for concurrent
// use: Match takes the read lock, Subscribe, Unsubscribe and RemoveClient
// the write lock. Count and Nodes read counters and take no lock.
type Tree[C comparable] struct {
	mu    sync.RWMutex
	root  node[C]
	count atomic.Int64 // entries
	nodes atomic.Int64 // trie nodes below the root
}

// node is one filter level. A node with no entries, groups or children is
// removed, so the trie holds only what live subscriptions need.
type node[C comparable] struct {
	parent   *node[C]
	key      string              // this level as subscribed ("+" and "#" included)
	children map[string]*node[C] // literal levels; nil when empty
	plus     *node[C]            // the '+' child
	hash     *node[C]            // the '#' child: holds entries, never children
	subs     roster[C]           // plain subscriptions ending here
	groups   []*group[C]         // shared groups ending here; none is empty
}

// Subscribe adds e, or replaces the entry with the same Client and Filter,
// and reports whether one existed (the broker needs it for Retain Handling
// 1). A Filter of the form $share/{group}/{inner} is filed under inner in
// that group, and e.Group is set from it ("" otherwise). The filter should
// have passed ParseShared; an invalid one is stored without harm but what
// it matches is unspecified.
func (t *Tree[C]) Subscribe(e Entry[C]) (existed bool) {
	g, inner, shared := splitShared(e.Filter)
	e.Group = g
	p := &e // a fresh Entry: stored pointers are never written through
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.insert(inner)
	if shared {
		existed = n.group(g, true).put(p)
	} else {
		existed = n.subs.put(p)
	}
	if !existed {
		t.count.Add(1)
	}
	return existed
}

// Unsubscribe removes the entry of c for filter (exactly as subscribed,
// $share prefix included) and reports whether it existed. Nodes left empty
// are pruned.
func (t *Tree[C]) Unsubscribe(c C, filter string) (existed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unsubscribe(c, filter)
}

// RemoveClient removes the entries of c for all the given filters under
// one acquisition of the write lock, and returns how many existed. The
// broker knows a session's filters, so this costs one trie walk per
// filter, not a scan of the tree.
func (t *Tree[C]) RemoveClient(c C, filters []string) (removed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range filters {
		if t.unsubscribe(c, f) {
			removed++
		}
	}
	return removed
}

// Count returns the number of entries. It takes no lock.
func (t *Tree[C]) Count() int { return int(t.count.Load()) }

// Nodes returns the number of trie nodes below the root, a measure of the
// tree's memory that returns to 0 once every entry is gone. It takes no
// lock.
func (t *Tree[C]) Nodes() int { return int(t.nodes.Load()) }

// Match appends to dst every plain entry whose filter matches topic and,
// for each matching shared group, exactly one member chosen round robin
// among those that accept admits (see below), and returns the extended
// slice. A client with overlapping subscriptions appears once per matching
// entry; the order is unspecified.
//
// accept may be nil (every member is eligible). Otherwise a group takes
// the next member in round-robin order for which accept returns true, and
// if it admits none, the member at the round-robin position anyway (the
// broker may then queue or drop). accept is called under the read lock
// and must not call back into the Tree.
//
// Match allocates nothing when dst has the capacity for the result, for
// any number of subscribers; passing a nil or a non-escaping func value
// allocates nothing either. The returned pointers are read-only snapshots:
// see Entry.
func (t *Tree[C]) Match(topic string, dst []*Entry[C], accept func(C) bool) []*Entry[C] {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.root.walk(topic, 0, !dollar(topic), dst, accept)
}

// Any reports whether some entry matches topic, as len(Match(topic, nil,
// nil)) > 0 would, but stops at the first and allocates nothing, and picks
// no group member (a group's round-robin does not move). It is for a yes
// or no, such as whether a peer node wants a message.
func (t *Tree[C]) Any(topic string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.root.any(topic, 0, !dollar(topic))
}

// any is walk for Any.
func (n *node[C]) any(topic string, i int, wild bool) bool {
	lvl, next, last := level(topic, i)
	if wild {
		if n.hash != nil && n.hash.holds() {
			return true
		}
		if n.plus != nil && n.plus.anyStep(topic, next, last) {
			return true
		}
	}
	c := n.children[lvl]
	return c != nil && c.anyStep(topic, next, last)
}

// anyStep is step for Any.
func (n *node[C]) anyStep(topic string, next int, last bool) bool {
	if !last {
		return n.any(topic, next, true)
	}
	return n.holds() || (n.hash != nil && n.hash.holds())
}

// holds reports whether n has an entry of its own (collect would add one).
func (n *node[C]) holds() bool { return len(n.subs.list) > 0 || len(n.groups) > 0 }

// walk matches the level of topic starting at byte i against the children
// of n. wild is false only at the first level of a '$' topic, where the
// '+' and '#' children are not eligible.
func (n *node[C]) walk(topic string, i int, wild bool, dst []*Entry[C], accept func(C) bool) []*Entry[C] {
	lvl, next, last := level(topic, i)
	if wild {
		if n.hash != nil {
			dst = n.hash.collect(dst, accept)
		}
		if n.plus != nil {
			dst = n.plus.step(topic, next, last, dst, accept)
		}
	}
	if c := n.children[lvl]; c != nil {
		dst = c.step(topic, next, last, dst, accept)
	}
	return dst
}

// step continues a match at n, which matched the current topic level:
// at the last level n's own entries match, and so do those of its '#'
// child ("sport/#" matches "sport"); otherwise the walk goes down.
func (n *node[C]) step(topic string, next int, last bool, dst []*Entry[C], accept func(C) bool) []*Entry[C] {
	if !last {
		return n.walk(topic, next, true, dst, accept)
	}
	dst = n.collect(dst, accept)
	if n.hash != nil {
		dst = n.hash.collect(dst, accept)
	}
	return dst
}

// collect appends n's plain entries and one member of each of its groups.
func (n *node[C]) collect(dst []*Entry[C], accept func(C) bool) []*Entry[C] {
	dst = append(dst, n.subs.list...)
	for _, g := range n.groups {
		dst = append(dst, g.pick(accept))
	}
	return dst
}

// insert returns the node of a plain filter, creating the missing levels.
func (t *Tree[C]) insert(filter string) *node[C] {
	n := &t.root
	for i, last := 0, false; !last; {
		var lvl string
		lvl, i, last = level(filter, i)
		c := n.child(lvl)
		if c == nil {
			c = n.addChild(lvl)
			t.nodes.Add(1)
		}
		n = c
	}
	return n
}

// find returns the node of a plain filter, or nil.
func (t *Tree[C]) find(filter string) *node[C] {
	n := &t.root
	for i, last := 0, false; !last && n != nil; {
		var lvl string
		lvl, i, last = level(filter, i)
		n = n.child(lvl)
	}
	return n
}

// unsubscribe is Unsubscribe under the write lock held by the caller.
func (t *Tree[C]) unsubscribe(c C, filter string) bool {
	g, inner, shared := splitShared(filter)
	n := t.find(inner)
	if n == nil {
		return false
	}
	if shared {
		grp := n.group(g, false)
		if grp == nil || !grp.remove(c) {
			return false
		}
		if len(grp.list) == 0 {
			n.dropGroup(grp)
		}
	} else if !n.subs.remove(c) {
		return false
	}
	t.count.Add(-1)
	t.prune(n)
	return true
}

// prune detaches n and then each ancestor as long as it is empty.
func (t *Tree[C]) prune(n *node[C]) {
	for n != &t.root && n.empty() {
		p := n.parent
		switch n {
		case p.plus:
			p.plus = nil
		case p.hash:
			p.hash = nil
		default:
			delete(p.children, n.key)
			if len(p.children) == 0 {
				p.children = nil
			}
		}
		n.parent = nil
		t.nodes.Add(-1)
		n = p
	}
}

// empty reports whether n holds nothing and leads nowhere.
func (n *node[C]) empty() bool {
	return len(n.subs.list) == 0 && len(n.groups) == 0 &&
		len(n.children) == 0 && n.plus == nil && n.hash == nil
}

// child returns n's child for a filter level, or nil.
func (n *node[C]) child(lvl string) *node[C] {
	switch lvl {
	case "+":
		return n.plus
	case "#":
		return n.hash
	}
	return n.children[lvl]
}

// addChild creates n's child for a filter level. Literal keys are cloned
// so a node does not pin the whole filter string it was made from.
func (n *node[C]) addChild(lvl string) *node[C] {
	c := &node[C]{parent: n, key: strings.Clone(lvl)}
	switch lvl {
	case "+":
		n.plus = c
	case "#":
		n.hash = c
	default:
		if n.children == nil {
			n.children = make(map[string]*node[C])
		}
		n.children[c.key] = c
	}
	return c
}

// group returns n's share group by name, creating it if create is set.
func (n *node[C]) group(name string, create bool) *group[C] {
	for _, g := range n.groups {
		if g.name == name {
			return g
		}
	}
	if !create {
		return nil
	}
	g := &group[C]{name: strings.Clone(name)}
	n.groups = append(n.groups, g)
	return g
}

// dropGroup removes an emptied group from n.
func (n *node[C]) dropGroup(g *group[C]) {
	for i, x := range n.groups {
		if x == g {
			last := len(n.groups) - 1
			n.groups[i] = n.groups[last]
			n.groups[last] = nil
			n.groups = n.groups[:last]
			break
		}
	}
	if len(n.groups) == 0 {
		n.groups = nil
	}
}
