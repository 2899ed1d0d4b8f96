// Package topiccache is the last-value cache behind LoT's GET TOPIC
// (LOT.md §4.5): for each topic, the latest payload the broker has seen and
// when, fed by every publish (clients, LoT PUBLISH, connectors, peers) and
// by KEEP TOPIC, which stores without delivering.
//
// # Values
//
// Publish replaces a topic's value whatever it held, a kept value included
// ("a normal publish to the topic replaces a kept value"). Keep stores a
// value that is never evicted. Merge stores a value replicated from another
// node only when it is later than the one held (ties broken by the payload
// bytes so that every node converges). Payloads are not copied: the caller
// hands them over and must not modify them, which broker messages already
// guarantee; Get returns them shared.
//
// # Bounds
//
// Options bound the topics (MaxTopics, default 100,000), one payload
// (MaxValueBytes, default 1 MiB) and the memory held (MaxBytes, default
// 256 MiB, counting topic, payload and EntryOverhead per entry). When full:
//
//   - a payload over MaxValueBytes is refused with ErrTooLarge, and a
//     refused Publish also removes the topic's older value, so GET TOPIC
//     falls through to the retained store instead of a stale value;
//   - a new topic evicts the least recently written published value
//     (least recent within a shard, shards taken round robin: an
//     approximate LRU);
//   - kept values are never evicted: when only kept values remain, a new
//     topic is refused with ErrFull (Keep returns it, the interpreter
//     reports it on the action's error topic).
//
// Stats counts evictions and refusals.
//
// # Frame
//
// A Frame is one action execution's view: it buffers the execution's
// PUBLISH and KEEP writes and resolves GET TOPIC from the pending writes,
// then the trigger message, then the cache, then the broker's retained
// store (RetainedReader), answering NotFound (EMPTY) otherwise.
//
// # Concurrency
//
// A Cache is safe for concurrent use. It is split into 64 shards by a hash
// of the topic, each guarded by its own sync.RWMutex: Get takes one shard's
// read lock for a map lookup, so readers run in parallel and never block on
// writers of other shards; Publish, Keep, Merge and Delete take one shard's
// write lock. Eviction runs after the writer released its shard and locks
// one shard at a time, so no goroutine ever holds two shard locks. The
// counters are atomics; bounds may be exceeded briefly by concurrent
// writers, by at most one entry each. A Frame is used by one goroutine.
package topiccache
