// Package store is Gantry's durable state on one node: persistent
// sessions, their queued and in-flight QoS 1/2 messages, inbound QoS 2
// packet ids and retained messages, kept in one bbolt file,
// DataDir/gantry.db, and a write-ahead log beside it, DataDir/gantry.db.wal/.
// It implements broker.Persister; the broker decides what is durable and
// when, the store only writes and reads it.
//
// # On-disk layout (schema version 2)
//
// One bucket per record kind:
//
//	meta      "schema"    → big-endian uint64 schema version (2), written at creation
//	          "lastAlive" → big-endian uint64 Unix ns of the last commit or idle stamp
//	sessions  client id                           → session record
//	entries   client id, 0x00, big-endian u64 seq → entry record, or entry chunk
//	qos2in    client id, 0x00, big-endian u16 pid → empty
//	retained  topic                               → retained record
//
// MQTT client ids never contain U+0000, so the client id and 0x00 are an
// unambiguous prefix: a prefix scan lists one session's queue in seq
// order, and the keys of client "a" never match those of "ab". Version 2
// has the buckets of version 1; it says that the log beside the file must
// be replayed. Open migrates a version 1 file (the release before the log)
// by rewriting the number, so that a release that ignores the log refuses
// the file instead of missing what the log holds, and refuses any other
// version, naming both.
//
// Records are a compact binary format, not JSON or gob. Every record starts
// with a format-version byte (1); lengths and counts are uvarints, signed
// times zig-zag varints, strings and byte strings a uvarint length then
// the bytes:
//
//	session   1, client id, expiry uvarint, disconnectedAt varint,
//	          n uvarint, n × (filter, options byte, subscription id uvarint),
//	          will byte 0 | 1 then delay uvarint, expiry uvarint,
//	                                has-message byte 0 | 1, message body
//	entry     1, state byte, pid big-endian u16, qos byte,
//	          flags byte (1 retain, 2 has message, 4 has record),
//	          n uvarint, n × subscription id uvarint, [message body],
//	          [record: node, boot uvarint, seq uvarint (the message's
//	          Record, its identity in its origin's stream)]
//	retained  1, message body
//
//	message body: qos byte, origin byte, flags byte, topic, payload,
//	          publisher client id, then the fields whose flag is set, in
//	          this order: payload format byte (2), content type (4),
//	          response topic (8), correlation data (16),
//	          user properties (32: n uvarint, n × (key, value)),
//	          expiresAt varint (64), username (128); flag 1 is Retain.
//
// # Entry chunks
//
// A checkpoint writes the entries it puts for one client as chunks: one
// value for up to 1,024 entries or 32 KiB of records, keyed by the first
// entry's seq, instead of one key each (bbolt's cost is per key: a
// cursor descent, node bookkeeping and page space):
//
//	chunk     2, n uvarint, n × (seq delta uvarint, entry record (length uvarint, bytes))
//
// The first delta is from the key's seq, each next from the entry before
// (never 0): seqs ascend. A lone entry is written as a plain entry record.
// The key's seq is at most the first entry's; a chunk whose first entries
// were deleted keeps its key. An entry state or delete for (client, seq)
// finds its entry at that key (a plain record or a chunk) or in the chunk
// with the greatest key below it, in the same client's range; a
// checkpoint decodes each chunk it changes once, applies every change to
// it, and writes it back once (deletes it when empty). Entries a
// checkpoint puts are held back until its end, with the changes that
// follow them in it: an entry put and deleted within one checkpoint (a
// subscriber that keeps up) never reaches bbolt. This relies on the
// broker's entry seqs of a client ascending between DeleteSessions (a
// DeleteSession writes what is held first); Load sorts each queue by seq
// all the same.
//
// The subscription options byte is MQTT v5's SUBSCRIBE options byte. An
// entry's seq is only in its key; its state and packet id sit at a fixed
// offset so that PersistEntryState patches them without decoding. The
// decoders (DecodeSession, DecodeEntry, DecodeMessage) are fuzzed, bound
// every allocation by the input's length, and return ErrCorrupt for bad
// bytes, trailing bytes or an unknown format version.
//
// # Write-ahead log
//
// The log is a directory of segment files named by a zero-padded
// 20-digit decimal number and ".log", in the order written. A segment is
// an 8-byte header ("GWAL", big-endian uint32 version 1), then frames,
// one per group commit:
//
//	frame     little-endian u32 body length, u32 CRC-32C (Castagnoli) of the body, body
//	body      big-endian u64 Unix ns (the commit's time), n uvarint, n × op
//	op        kind byte (broker.PersistKind), key (uvarint length, bytes), then
//	          for PersistSession, PersistEntry, PersistRetained, PersistInboundQoS2:
//	          the record (uvarint length, bytes); for PersistEntryState: the state
//	          byte and the big-endian u16 packet id; nothing for the deletes
//
// Keys and records are those of the buckets. The checkpointer applies the
// logged frames to bbolt in one transaction per checkpoint (every
// Options.CheckpointBytes of log, or CheckpointInterval after the first
// frame since the last, whichever comes first) and then deletes the
// segments it made redundant, oldest first. Open replays every segment
// left, oldest first, into bbolt and deletes them. Replaying a segment a
// checkpoint had applied already changes nothing: every op writes or
// deletes whole keys or sets an entry's state and packet id to fixed
// values, so applying a run of the log again, up to its end, ends in the
// same state; deleting oldest first keeps what is left such a run. A frame
// cut short or failing its checksum ends the last segment (a write a crash
// interrupted, never acknowledged); anywhere else Open refuses the store
// (ErrUnreadable) rather than drop what follows it.
//
// # What is durable
//
// A Persist call's operations are durable when its done is called with
// nil: the log frame that holds them is written and fdatasynced. Load
// returns exactly the committed state: sessions (with their entries in
// seq order and inbound QoS 2 ids), retained messages, and LastAlive, the
// last sign of life before this Open: the newer of meta.lastAlive and the
// time of the last frame replayed. Every frame carries its time, every
// checkpoint stamps meta.lastAlive, and the writer stamps it every
// Options.AliveInterval when idle and on Close, so after a crash it is at
// most AliveInterval old.
//
// # Group commit
//
// Persist encodes its operations on the caller's goroutine, appends them
// and done to an in-memory queue under Store.mu, and wakes the writer; it
// never waits for I/O. The single writer goroutine takes everything
// queued and writes it, in submission order, as ONE log frame with one
// fdatasync for any number of Persist calls, then hands the done
// callbacks to the notifier goroutine, which calls them in submission
// order with nil or with the write's error. While the writer writes, new
// calls queue up for the next frame, so the batch grows with the load.
// The bbolt transactions, with their page writes and two fsyncs each, run
// on the checkpointer goroutine, off the acknowledgement path, once per
// many frames. When more than Options.MaxPendingOps operations are
// queued, Persist blocks until the writer takes the queue; when more than
// 8 × CheckpointBytes of log wait for their checkpoint, the writer waits
// for it (backpressure).
//
// Operations: PersistSession, PersistEntry, PersistInboundQoS2 and
// PersistRetained put a record (keyed by ClientID, or Session.ClientID
// when ClientID is empty; by Entry.Seq, which a non-zero Seq must equal;
// by Msg.Topic). DeleteSession deletes the session record, all its
// entries and all its inbound QoS 2 ids. PersistEntryState rewrites State
// and PID of an existing entry and ignores a missing one (already
// acknowledged). Deleting a missing key does nothing. An op the store
// cannot write (empty client id, key longer than bbolt's 32768 bytes,
// missing record, mismatched ids, unknown kind) fails its own Persist call
// with ErrInvalidOp before queueing, so it cannot fail other calls'
// transaction.
//
// # Faults
//
// A failed log write (disk full, I/O error) is cut off the segment again;
// the done of every call in it gets an error wrapping ErrWriteFailed and
// the cause ("store: write failed: ..."), and the next batch is tried
// afresh. A failed checkpoint is rolled back by bbolt and keeps its
// operations in the log (they are durable there) for the next checkpoint;
// when the log reaches its bound and the checkpoint that should make room
// fails, the next frames fail with that cause until one succeeds. Open
// fails, keeping the log, when a replay cannot be applied.
// The broker's in-memory state then holds changes the disk lacks; it
// should refuse the publish (reason code 0x80) and may persist the
// affected session again.
//
// Open never starts empty over a file it cannot read; only a missing or
// zero-byte file is initialised as new. A damaged or foreign file is
// refused with ErrUnreadable ("restore it from a backup or move it away
// to start empty"), a file still locked by another process after
// Options.LockTimeout with ErrInUse, another schema with
// ErrSchemaVersion. A record that does not decode fails Load with an
// error naming it.
//
// # Compaction
//
// bbolt reuses freed pages but never shrinks its file. Usage compares the
// file (tx.Size) with the pages of its buckets; when Usage().Sparse(),
// Compact, called at start before Load, copies the database with
// bbolt.Compact into DataDir/gantry.db.compact, renames it over the old
// file and reopens it.
//
// # Concurrency contract
//
//   - Open, Compact, Load and Close are called by the owner (the
//     broker's start and shutdown), in that order; Compact and Load
//     before the first Persist.
//   - Persist may be called from any number of goroutines at once. Ops of
//     one goroutine are committed in its call order; calls racing on
//     different goroutines are ordered by who took Store.mu first.
//   - done runs on the notifier goroutine, never on the caller's and never
//     on the writer's: it may call Persist (a callback that meets
//     backpressure delays later callbacks, never the writer). It must not
//     call Close, and should be short: callbacks run one after another.
//   - Close stops accepting calls (later ones get done(ErrClosed) on a
//     goroutine of their own), waits until the writer has logged
//     everything queued and the notifier has called every done, applies
//     the log in a last checkpoint and deletes it, stamps lastAlive, and
//     closes the file. Close is idempotent.
//   - Stats and Usage may be called at any time from any goroutine.
//
// Goroutines: one writer (runWriter), one notifier (runNotifier) and one
// checkpointer (runCheckpointer), started by Open and ended by Close. The
// writer alone owns the log (Store.lg) and hands the checkpointer one
// checkpoint at a time over ckptReq; the outcome comes back on ckptDone.
// Locks: Store.mu guards the queue; Store.dbMu is held for each
// transaction and by Compact, which replaces the *bolt.DB; Store.notifyMu
// guards the notices; counters.mu guards the statistics. No two of them
// are ever held at once, and none is held while a done callback runs.
package store
