package topic

import (
	"strings"
	"sync"
)

// Index maps topic names to values (the broker keeps its retained messages
// in one). It is a trie keyed by topic level, so Match with a filter
// visits only the branches the filter can reach: a literal level is one
// map lookup, '+' and '#' walk the children they cover.
//
// The zero Index is empty and ready to use. An Index is safe for
// concurrent use: Get, Len, Match and Range take the read lock, Set and
// Delete the write lock. Match and Range call fn under the read lock: fn
// must not call back into the Index (Set or Delete would deadlock, and a
// nested read can deadlock behind a waiting writer). Collect what fn sees
// and act after Match returns.
type Index[V any] struct {
	mu   sync.RWMutex
	root inode[V]
	n    int // stored topics
}

// inode is one topic level. A node that stores nothing and has no
// children is removed.
type inode[V any] struct {
	parent   *inode[V]
	key      string
	children map[string]*inode[V] // nil when empty
	topic    string               // the full topic name, when set
	value    V
	set      bool
}

// Set stores v under topic, replacing any previous value. The topic
// should have passed ValidateName.
func (x *Index[V]) Set(topic string, v V) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := &x.root
	for i, last := 0, false; !last; {
		var lvl string
		lvl, i, last = level(topic, i)
		c := n.children[lvl]
		if c == nil {
			c = &inode[V]{parent: n, key: strings.Clone(lvl)}
			if n.children == nil {
				n.children = make(map[string]*inode[V])
			}
			n.children[c.key] = c
		}
		n = c
	}
	if !n.set {
		x.n++
		n.topic, n.set = strings.Clone(topic), true
	}
	n.value = v
}

// Get returns the value stored under topic.
func (x *Index[V]) Get(topic string) (V, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n := x.find(topic); n != nil && n.set {
		return n.value, true
	}
	var zero V
	return zero, false
}

// Delete removes topic and reports whether it was stored. Nodes left
// empty are pruned.
func (x *Index[V]) Delete(topic string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.find(topic)
	if n == nil || !n.set {
		return false
	}
	var zero V
	n.value, n.topic, n.set = zero, "", false
	x.n--
	for n != &x.root && !n.set && len(n.children) == 0 {
		p := n.parent
		delete(p.children, n.key)
		if len(p.children) == 0 {
			p.children = nil
		}
		n.parent = nil
		n = p
	}
	return true
}

// Len returns the number of stored topics.
func (x *Index[V]) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// Match calls fn for every stored topic that filter matches, with the same
// rules as Matches ('+', '#' including the parent level, the '$' rule, a
// $share prefix read as its inner filter), until fn returns false. The
// order is unspecified. fn runs under the read lock: see Index.
func (x *Index[V]) Match(filter string, fn func(topic string, v V) bool) {
	if _, inner, ok := splitShared(filter); ok {
		filter = inner
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	x.root.match(filter, 0, true, fn)
}

// Range calls fn for every stored topic until fn returns false. The order
// is unspecified. fn runs under the read lock: see Index.
func (x *Index[V]) Range(fn func(topic string, v V) bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	x.root.all(false, fn)
}

// find returns the node of topic, or nil.
func (x *Index[V]) find(topic string) *inode[V] {
	n := &x.root
	for i, last := 0, false; !last && n != nil; {
		var lvl string
		lvl, i, last = level(topic, i)
		n = n.children[lvl]
	}
	return n
}

// match visits the topics below n that the filter levels from byte i
// match; root is set at the first level, where '+' and '#' skip '$'
// topics. It returns false once fn has asked to stop.
func (n *inode[V]) match(filter string, i int, root bool, fn func(string, V) bool) bool {
	lvl, next, last := level(filter, i)
	switch lvl {
	case "#":
		if n.set && !fn(n.topic, n.value) { // "sport/#" matches "sport"
			return false
		}
		return n.all(root, fn)
	case "+":
		for k, c := range n.children {
			if root && dollar(k) {
				continue
			}
			if !c.step(filter, next, last, fn) {
				return false
			}
		}
		return true
	}
	c := n.children[lvl]
	return c == nil || c.step(filter, next, last, fn)
}

// step continues a match at n, which matched the current filter level.
func (n *inode[V]) step(filter string, next int, last bool, fn func(string, V) bool) bool {
	if last {
		return !n.set || fn(n.topic, n.value)
	}
	return n.match(filter, next, false, fn)
}

// all visits every topic strictly below n, skipping first levels that
// start with '$' when hideDollar is set. It returns false once fn has
// asked to stop.
func (n *inode[V]) all(hideDollar bool, fn func(string, V) bool) bool {
	for k, c := range n.children {
		if hideDollar && dollar(k) {
			continue
		}
		if c.set && !fn(c.topic, c.value) {
			return false
		}
		if !c.all(false, fn) {
			return false
		}
	}
	return true
}
