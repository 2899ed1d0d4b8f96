package topiccache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/topic"
)

// Options bound a Cache. The zero value of a field means its default.
type Options struct {
	// MaxTopics bounds the topics held (default 100,000, the figure the
	// documentation promises for kept topics per node).
	MaxTopics int
	// MaxValueBytes bounds one payload (default 1 MiB).
	MaxValueBytes int
	// MaxBytes bounds the memory held: payloads, topic names and a fixed
	// overhead per entry (EntryOverhead). Default 256 MiB: an edge gateway
	// cannot hold MaxTopics values of MaxValueBytes each.
	MaxBytes int64
}

// EntryOverhead is what one entry costs beyond its topic and payload bytes
// in the MaxBytes accounting: the entry, its map slot and list links.
const EntryOverhead = 128

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{MaxTopics: 100_000, MaxValueBytes: 1 << 20, MaxBytes: 256 << 20}
}

// Validate checks the options (after defaults are applied to zero fields).
func (o Options) Validate() error {
	switch {
	case o.MaxTopics < 0:
		return fmt.Errorf("topiccache: Options.MaxTopics = %d, want 0 (default) or more", o.MaxTopics)
	case o.MaxValueBytes < 0:
		return fmt.Errorf("topiccache: Options.MaxValueBytes = %d, want 0 (default) or more", o.MaxValueBytes)
	case o.MaxBytes < 0:
		return fmt.Errorf("topiccache: Options.MaxBytes = %d, want 0 (default) or more", o.MaxBytes)
	case o.MaxBytes > 0 && o.MaxValueBytes > 0 && int64(o.MaxValueBytes) > o.MaxBytes:
		return fmt.Errorf("topiccache: Options.MaxValueBytes = %d exceeds Options.MaxBytes = %d", o.MaxValueBytes, o.MaxBytes)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	d := DefaultOptions()
	if o == nil {
		return d
	}
	out := *o
	if out.MaxTopics == 0 {
		out.MaxTopics = d.MaxTopics
	}
	if out.MaxValueBytes == 0 {
		out.MaxValueBytes = d.MaxValueBytes
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = d.MaxBytes
	}
	return out
}

// Errors of the cache; the returned errors wrap them and name the topic.
var (
	// ErrTooLarge: the payload exceeds Options.MaxValueBytes.
	ErrTooLarge = errors.New("topiccache: value too large")
	// ErrFull: the cache holds Options.MaxTopics (or MaxBytes) of kept
	// values, which are never evicted, so a new topic cannot be added.
	ErrFull = errors.New("topiccache: full of kept values")
	// ErrInvalidTopic: not a valid MQTT topic name.
	ErrInvalidTopic = errors.New("topiccache: invalid topic name")
)

// Origin says how a value entered the cache.
type Origin uint8

// Origins.
const (
	// Published: an MQTT publish (from a client, LoT PUBLISH, a connector
	// or a peer). Published values may be evicted when the cache is full.
	Published Origin = iota + 1
	// Kept: KEEP TOPIC. Kept values are never evicted.
	Kept
)

func (o Origin) String() string {
	switch o {
	case Published:
		return "published"
	case Kept:
		return "kept"
	}
	return "unknown"
}

// Value is the latest payload of a topic. Payload is shared with the cache
// and with whoever stored it: never modify it.
type Value struct {
	Payload []byte
	At      time.Time
	Origin  Origin
}

// Stats are counters of a cache.
type Stats struct {
	Topics          int   // entries held
	Kept            int   // of which kept
	Bytes           int64 // MaxBytes accounting
	Evicted         int64 // published values dropped to make room
	RefusedFull     int64 // new topics refused: full of kept values
	RefusedTooLarge int64 // payloads over MaxValueBytes
}

const numShards = 64

// Cache maps topics to their latest value. See the package documentation.
type Cache struct {
	opts   Options
	seed   maphash.Seed
	shards [numShards]shard

	topics    atomic.Int64 // entries over all shards
	published atomic.Int64 // entries of origin Published (evictable)
	size      atomic.Int64 // MaxBytes accounting
	evicted   atomic.Int64
	refFull   atomic.Int64
	refLarge  atomic.Int64
	nextEvict atomic.Uint32 // shard where the next eviction starts
}

type shard struct {
	mu sync.RWMutex // guards m, the entries in it and the pub list
	m  map[string]*entry
	// pub lists the Published entries from least to most recently
	// written: eviction takes the front.
	pub list
}

type entry struct {
	topic      string
	payload    []byte
	at         time.Time
	origin     Origin
	prev, next *entry // in shard.pub when origin is Published
}

func (e *entry) cost() int64 { return int64(len(e.topic)+len(e.payload)) + EntryOverhead }

// New returns an empty cache; opts may be nil for the defaults.
func New(opts *Options) (*Cache, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{opts: o, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*entry)
	}
	return c, nil
}

func (c *Cache) shard(topic string) *shard {
	return &c.shards[maphash.String(c.seed, topic)%numShards]
}

// Get returns the latest value of topic.
func (c *Cache) Get(topic string) (Value, bool) {
	sh := c.shard(topic)
	sh.mu.RLock()
	e, ok := sh.m[topic]
	var v Value
	if ok {
		v = Value{Payload: e.payload, At: e.at, Origin: e.origin}
	}
	sh.mu.RUnlock()
	return v, ok
}

// Lookup returns the latest payload of topic (rules.TopicReader).
func (c *Cache) Lookup(topic string) ([]byte, bool) {
	v, ok := c.Get(topic)
	return v.Payload, ok
}

// Publish records a published message: it replaces whatever the topic held,
// a kept value included. The topic is trusted to be valid (the broker
// checked it) and payload must not be modified afterwards (broker messages
// are immutable). A payload over MaxValueBytes is not stored and removes
// the topic's older value, so GET TOPIC never answers with a stale value.
func (c *Cache) Publish(topic string, payload []byte, at time.Time) error {
	_, err := c.write(topic, payload, at, Published, false)
	return err
}

// Keep records KEEP TOPIC: like Publish, but the value is never evicted, and
// a new topic is refused with ErrFull when the cache holds only kept values
// up to its bounds. payload must not be modified afterwards.
func (c *Cache) Keep(tp string, payload []byte, at time.Time) error {
	if topic.ValidateName(tp) != nil {
		return fmt.Errorf("%w: KEEP TOPIC %q", ErrInvalidTopic, tp)
	}
	_, err := c.write(tp, payload, at, Kept, false)
	return err
}

// Merge records a value replicated from another node: the later write wins
// (a tie on At is broken by the payload bytes, so every node converges).
// It reports whether v was stored.
func (c *Cache) Merge(tp string, v Value) (bool, error) {
	if topic.ValidateName(tp) != nil {
		return false, fmt.Errorf("%w: %q", ErrInvalidTopic, tp)
	}
	if v.Origin != Published && v.Origin != Kept {
		return false, fmt.Errorf("topiccache: merge %q: origin %d is neither Published nor Kept", tp, v.Origin)
	}
	return c.write(tp, v.Payload, v.At, v.Origin, true)
}

func (c *Cache) write(tp string, payload []byte, at time.Time, origin Origin, merge bool) (bool, error) {
	if len(payload) > c.opts.MaxValueBytes {
		c.refLarge.Add(1)
		if !merge {
			c.Delete(tp)
		}
		return false, fmt.Errorf("%w: %s %q: %d bytes, more than %d", ErrTooLarge, origin, tp, len(payload), c.opts.MaxValueBytes)
	}
	sh := c.shard(tp)
	sh.mu.Lock()
	if e, ok := sh.m[tp]; ok {
		if merge && !newer(at, payload, e) {
			sh.mu.Unlock()
			return false, nil
		}
		delta := int64(len(payload) - len(e.payload))
		c.replace(sh, e, payload, at, origin)
		sh.mu.Unlock()
		if c.size.Add(delta) > c.opts.MaxBytes {
			c.shrink()
		}
		return true, nil
	}
	return c.insert(sh, &entry{topic: tp, payload: payload, at: at, origin: origin})
}

// insert adds a new entry to sh, whose lock is held and released here.
func (c *Cache) insert(sh *shard, e *entry) (bool, error) {
	cost := e.cost() // e is shared once the lock is released
	if c.full(cost) && c.published.Load() == 0 {
		sh.mu.Unlock()
		c.refFull.Add(1)
		return false, fmt.Errorf("%w: %s %q: %d topics, %d bytes held", ErrFull, e.origin, e.topic, c.topics.Load(), c.size.Load())
	}
	sh.m[e.topic] = e
	if e.origin == Published {
		sh.pub.pushBack(e)
		c.published.Add(1)
	}
	sh.mu.Unlock()
	c.topics.Add(1)
	c.size.Add(cost)
	if c.full(0) {
		c.shrink()
	}
	return true, nil
}

// newer reports whether a replicated write (at, payload) beats e.
func newer(at time.Time, payload []byte, e *entry) bool {
	if at.Equal(e.at) {
		return bytes.Compare(payload, e.payload) > 0
	}
	return at.After(e.at)
}

// replace updates e in place; sh.mu is held.
func (c *Cache) replace(sh *shard, e *entry, payload []byte, at time.Time, origin Origin) {
	if e.origin == Published {
		sh.pub.remove(e)
		c.published.Add(-1)
	}
	e.payload, e.at, e.origin = payload, at, origin
	if origin == Published {
		sh.pub.pushBack(e)
		c.published.Add(1)
	}
}

// full reports whether adding extra bytes (and, when extra > 0, one topic)
// would exceed the bounds.
func (c *Cache) full(extra int64) bool {
	n := c.topics.Load()
	if extra > 0 {
		n++
	}
	return n > int64(c.opts.MaxTopics) || c.size.Load()+extra > c.opts.MaxBytes
}

// shrink evicts least recently written published values, visiting shards
// round robin and locking one at a time, until the cache is within its
// bounds or holds no published value.
func (c *Cache) shrink() {
	empty := 0
	for c.full(0) && empty < numShards {
		sh := &c.shards[c.nextEvict.Add(1)%numShards]
		sh.mu.Lock()
		e := sh.pub.front()
		if e == nil {
			sh.mu.Unlock()
			empty++
			continue
		}
		empty = 0
		sh.pub.remove(e)
		delete(sh.m, e.topic)
		sh.mu.Unlock()
		c.published.Add(-1)
		c.topics.Add(-1)
		c.size.Add(-e.cost())
		c.evicted.Add(1)
	}
}

// Delete removes topic's value and reports whether there was one.
func (c *Cache) Delete(topic string) bool {
	sh := c.shard(topic)
	sh.mu.Lock()
	e, ok := sh.m[topic]
	if ok {
		delete(sh.m, topic)
		if e.origin == Published {
			sh.pub.remove(e)
			c.published.Add(-1)
		}
	}
	sh.mu.Unlock()
	if ok {
		c.topics.Add(-1)
		c.size.Add(-e.cost())
	}
	return ok
}

// Range calls fn for every entry, shard by shard, until it returns false.
// fn runs under a shard's read lock: it must not call back into the cache.
// Entries written during Range may or may not be visited.
func (c *Cache) Range(fn func(topic string, v Value) bool) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for t, e := range sh.m {
			if !fn(t, Value{Payload: e.payload, At: e.at, Origin: e.origin}) {
				sh.mu.RUnlock()
				return
			}
		}
		sh.mu.RUnlock()
	}
}

// Len returns the number of topics held.
func (c *Cache) Len() int { return int(c.topics.Load()) }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	n := c.topics.Load()
	return Stats{
		Topics: int(n), Kept: int(n - c.published.Load()), Bytes: c.size.Load(),
		Evicted: c.evicted.Load(), RefusedFull: c.refFull.Load(), RefusedTooLarge: c.refLarge.Load(),
	}
}

// list is an intrusive doubly linked list of entries.
type list struct{ head, tail *entry }

func (l *list) front() *entry { return l.head }

func (l *list) pushBack(e *entry) {
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *list) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
