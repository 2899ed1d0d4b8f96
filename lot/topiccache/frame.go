package topiccache

// RetainedReader reads the broker's retained store, the last place GET TOPIC
// looks (it covers the time after a restart before the cache is warm). The
// returned bytes must not be modified.
type RetainedReader interface {
	Retained(topic string) ([]byte, bool)
}

// Source says where Frame.Get found a value.
type Source uint8

// Sources, in the order Frame.Get consults them (LOT.md §4.5).
const (
	// NotFound: no value anywhere; GET TOPIC yields EMPTY.
	NotFound Source = iota
	// FromPending: a PUBLISH or KEEP earlier in this execution, not yet
	// flushed.
	FromPending
	// FromTrigger: the triggering message, read on its own topic.
	FromTrigger
	// FromCache: the live cache.
	FromCache
	// FromRetained: the broker's retained store.
	FromRetained
)

func (s Source) String() string {
	switch s {
	case FromPending:
		return "pending"
	case FromTrigger:
		return "trigger"
	case FromCache:
		return "cache"
	case FromRetained:
		return "retained"
	}
	return "not found"
}

// Write is a PUBLISH TOPIC or KEEP TOPIC buffered by a Frame.
type Write struct {
	Topic   string
	Payload []byte
	Keep    bool // KEEP TOPIC: cache only, no delivery, no LoT trigger
}

// Frame is one action execution's view of topic state. It buffers the
// execution's PUBLISH and KEEP writes, which the interpreter flushes when
// the execution ends, and answers GET TOPIC in the order of LOT.md §4.5:
//
//  1. the latest write to the topic buffered in this execution;
//  2. the triggering message's payload, when reading the trigger topic;
//  3. the live cache;
//  4. the retained store.
//
// Nothing found is NotFound (EMPTY): GET TOPIC never blocks or subscribes.
// A Frame belongs to one execution and is not safe for concurrent use;
// Reset makes it reusable (for instance from a sync.Pool).
type Frame struct {
	cache    *Cache
	retained RetainedReader

	trigger    string
	payload    []byte
	hasTrigger bool

	writes []Write
}

// NewFrame returns a frame reading cache and retained; either may be nil.
func NewFrame(cache *Cache, retained RetainedReader) *Frame {
	return &Frame{cache: cache, retained: retained}
}

// SetTrigger records the message that started the execution.
func (f *Frame) SetTrigger(topic string, payload []byte) {
	f.trigger, f.payload, f.hasTrigger = topic, payload, true
}

// Publish buffers PUBLISH TOPIC topic WITH payload.
func (f *Frame) Publish(topic string, payload []byte) {
	f.writes = append(f.writes, Write{Topic: topic, Payload: payload})
}

// Keep buffers KEEP TOPIC topic WITH payload.
func (f *Frame) Keep(topic string, payload []byte) {
	f.writes = append(f.writes, Write{Topic: topic, Payload: payload, Keep: true})
}

// Get resolves GET TOPIC topic.
func (f *Frame) Get(topic string) ([]byte, Source) {
	for i := len(f.writes) - 1; i >= 0; i-- {
		if f.writes[i].Topic == topic {
			return f.writes[i].Payload, FromPending
		}
	}
	if f.hasTrigger && topic == f.trigger {
		return f.payload, FromTrigger
	}
	if f.cache != nil {
		if v, ok := f.cache.Get(topic); ok {
			return v.Payload, FromCache
		}
	}
	if f.retained != nil {
		if p, ok := f.retained.Retained(topic); ok {
			return p, FromRetained
		}
	}
	return nil, NotFound
}

// Writes returns the buffered writes in the order they were made. The slice
// is the frame's own until Reset.
func (f *Frame) Writes() []Write { return f.writes }

// Reset forgets the trigger and the writes, keeping the sources and the
// writes' capacity.
func (f *Frame) Reset() {
	clear(f.writes)
	f.writes = f.writes[:0]
	f.trigger, f.payload, f.hasTrigger = "", nil, false
}
