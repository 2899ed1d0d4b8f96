// Package raftstore is the durable state of a node's Raft: a
// raft.LogStore and raft.StableStore in one bbolt file,
// DataDir/raft.db (FileName). It replaces hashicorp/raft-boltdb, whose
// v2 needs a go-metrics module the module proxy does not serve.
//
// # On-disk layout (format version 1)
//
// One bucket per record kind:
//
//	meta           "format" → big-endian uint64 format version (1)
//	logs           big-endian uint64 index → log record
//	stable         key → value                 (Set, Get)
//	stable_uint64  key → big-endian uint64     (SetUint64, GetUint64)
//
// Big-endian keys sort like the indexes, so FirstIndex and LastIndex are
// the first and last key. Open refuses a file of another format version,
// a bbolt file without a meta bucket that holds other buckets, and a file
// that is no bbolt database, naming the file and what to do.
//
// A log record is a compact binary form of raft.Log with all its fields:
//
//	format byte (1), type byte, flags byte,
//	index uvarint, term uvarint,
//	[data]        uvarint length, bytes     if flags & 1 (Data != nil)
//	[extensions]  uvarint length, bytes     if flags & 2 (Extensions != nil)
//	[appendedAt]  Unix seconds varint,      if flags & 4 (not the zero time)
//	              nanoseconds uvarint
//
// A record reads back equal to what was stored (time compared with
// Equal; the monotonic clock reading and the location are not kept). The
// decoder is fuzzed, bounds every allocation by the input, and returns an
// error wrapping ErrCorrupt, never panics, for bad, truncated or trailing
// bytes, an unknown format or flag; GetLog also checks that the record
// holds the index it is stored under.
//
// # Semantics raft relies on
//
// They follow raft.InmemStore, which the conformance tests compare
// against, and raft-boltdb:
//
//   - GetLog of a missing index returns raft.ErrLogNotFound unwrapped
//     (raft compares with ==);
//   - StoreLogs is atomic and durable on return: one bbolt transaction,
//     fsynced unless Options.NoSync; an entry replaces any at its index,
//     and gaps between indexes are allowed (the store is not a
//     raft.MonotonicLogStore);
//   - DeleteRange(min, max) deletes both ends included; FirstIndex and
//     LastIndex are the smallest and largest index actually stored, 0 for
//     none (InmemStore instead keeps bookkeeping bounds that can point at
//     a hole after deleting a range with gaps; raft deletes only prefixes
//     and suffixes, where both agree);
//   - Get of a missing key returns ErrKeyNotFound, whose text is exactly
//     "not found": raft tests the text. Set with a nil value makes the key
//     missing. GetUint64 of a missing key returns 0 and no error, so a
//     fresh node starts at term 0. Byte and uint64 values live in separate
//     buckets, as in InmemStore's separate maps.
//
// # Concurrency
//
// A Store is safe for concurrent use: raft calls it from several
// goroutines. bbolt serialises write transactions and lets reads run
// alongside; every method is one transaction, and nothing holds one
// across a call. Open takes an exclusive lock on the file (flock) for the
// life of the Store, so two processes, or two Stores in one process,
// cannot share it; Close releases it.
package raftstore
