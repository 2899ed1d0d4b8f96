package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"gantry/broker/store/segfile"

	bolt "go.etcd.io/bbolt"
)

// The store's write-ahead log. A group commit used to be one bbolt
// transaction with its fsyncs: bbolt's cost is per transaction (the dirty
// pages of every path it touched, the freelist, two fsyncs of the meta
// page) and per key, and under a quorum load it took half of a node's CPU.
// Now a group is encoded once as a frame of operations, appended to a
// segment file of DataDir/dataplane.db.wal/ and made durable with one
// fdatasync; that is when its writes are on disk and their callbacks run.
// The frames logged since the last checkpoint stay in memory, and a
// checkpoint (once the log holds checkpointBytes, before a read of the
// copies, and at close) applies them to bbolt in one transaction on a
// goroutine of its own, then deletes the segments it covered. A held copy
// released one round trip after it was stored, or a stream record every
// peer confirmed at once, is then put and deleted inside one transaction:
// bbolt writes neither.
//
// A segment is a header (magic "GDPL", big-endian u32 version 2) and then
// frames: little-endian u32 body length, u32 CRC-32C of the body, body.
// A body is a sequence of operations, each a kind byte, a bucket byte, the
// key (uvarint length, bytes) and, for opPut and opPutMax, the value, for
// opTrim the highest number to delete (uvarint length 8, big-endian u64).
// The copies bucket holds chunks (copychunks.go): there opTrim deletes the
// chunks that end at or below it, and opDrop removes one record from its
// chunk. Version 1, an earlier build's, put a record per key in the
// copies bucket: its segments are replayed into that bucket
// (bucketLegacyCopies), which openStore then moves into chunks.
//
// Open replays the segments in order into bbolt before it reads anything,
// then deletes them. A frame cut short or with a bad checksum ends its
// segment (a write that failed or a crash in the middle of one: nothing
// after it in that segment was acknowledged, because a failed write makes
// the writer start a new segment). Replaying a frame a checkpoint had
// applied already is harmless: every operation sets or deletes keys, and
// the frames are replayed in their order, so the last operation on each
// key wins as it did the first time.
const (
	logMagic        = "GDPL"
	logVersion      = 2
	logHeaderSize   = 8
	checkpointBytes = 8 << 20 // a checkpoint once the log holds this much
)

// Operation kinds of a log frame.
const (
	opPut    = 1 // put key → value
	opDelete = 2 // delete key
	opTrim   = 3 // delete every key that is key (a prefix) and then a big-endian u64 up to value's
	opPutMax = 4 // put an 8-byte big-endian value unless the stored one is at least as large
	opDrop   = 5 // remove the record key names from its chunk (the copies bucket)
)

// Buckets by their number in a frame.
var logBuckets = [...][]byte{bucketMeta, bucketOutbox, bucketCursors, bucketInbox, bucketRetain, bucketCopies, bucketHeld, bucketQoS2,
	bucketLegacyCopies}

const (
	lbMeta = iota
	lbOutbox
	lbCursors
	lbInbox
	lbRetain
	lbCopies
	lbHeld
	lbQoS2
	lbLegacyCopies // only a version 1 segment's copies, replayed
)

var errTornLogFrame = errors.New("dataplane: torn or damaged log frame")

// errInjected is the failure segLog.failNext injects.
var errInjected = errors.New("dataplane: injected write failure")

// frame appends one group's operations to a buffer.
type frame struct{ b []byte }

func (f *frame) op(kind, bucket byte, key, val []byte) {
	f.b = append(f.b, kind, bucket)
	f.b = binary.AppendUvarint(f.b, uint64(len(key)))
	f.b = append(f.b, key...)
	if kind != opDelete && kind != opDrop {
		f.b = binary.AppendUvarint(f.b, uint64(len(val)))
		f.b = append(f.b, val...)
	}
}

// begin starts a frame at the end of the buffer (its head is filled by
// end) and returns where it starts.
func (f *frame) begin() int {
	var start int
	f.b, start = segfile.BeginFrame(f.b)
	return start
}

// end fills the head of the frame that starts at start and returns the
// frame, head included.
func (f *frame) end(start int) []byte { return segfile.SealFrame(f.b, start) }

// logOp is one parsed operation of a frame.
type logOp struct {
	kind, bucket byte
	key, val     []byte
}

// apply applies op to b, its bucket.
func (op logOp) apply(b *bolt.Bucket) error {
	switch op.kind {
	case opPut:
		return b.Put(op.key, op.val)
	case opDelete:
		return b.Delete(op.key)
	case opDrop:
		return dropFromChunk(b, op.key)
	case opPutMax:
		if v := b.Get(op.key); len(v) != 8 || binary.BigEndian.Uint64(v) < binary.BigEndian.Uint64(op.val) {
			return b.Put(op.key, op.val)
		}
		return nil
	case opTrim:
		if op.bucket == lbCopies {
			return trimChunks(b, op.key, binary.BigEndian.Uint64(op.val))
		}
		var lo, hi [8]byte
		binary.BigEndian.PutUint64(hi[:], binary.BigEndian.Uint64(op.val))
		return deleteRange(b, append(slices.Clone(op.key), lo[:]...), append(slices.Clone(op.key), hi[:]...))
	}
	return fmt.Errorf("%w: operation %d", errTornLogFrame, op.kind)
}

// trimKey names a trimmed range: the bucket and the keys' prefix.
type trimKey struct {
	bucket byte
	prefix string
}

// applyFrames applies the frames in b (each with its header, as a segment
// holds them after its header) to tx, with the effect of applying their
// operations in order but much cheaper for bbolt: an operation a later
// one overrides (a put deleted again, a stream record trimmed, a held
// copy released) is not applied at all; the trims go first, at most one
// per range (the highest); then the operations left, at most one per key,
// in key order. In order, a leaf that took the puts of many partitions
// interleaved moved its tail on every insert (bbolt splits nodes only at
// commit), which made a checkpoint quadratic. Trimming first is right
// because a put left is never covered by a later trim, and an earlier
// trim must not delete it anyway.
func applyFrames(tx *bolt.Tx, b []byte) error {
	frames, torn := splitFrames(b)
	if torn {
		return errTornLogFrame
	}
	return applyBodies(tx, frames, logVersion)
}

// applyBodies is applyFrames on the frames' bodies, of a segment of
// version.
func applyBodies(tx *bolt.Tx, frames [][]byte, version uint32) error {
	size := 0
	for _, body := range frames {
		size += len(body)
	}
	// An operation takes at least 4 bytes; a stream record, a chunk or a
	// held key far more. The estimate is low rather than high: an
	// allocation of megabytes is zeroed whole.
	ops := make([]logOp, 0, size/128)
	for _, body := range frames {
		var err error
		if ops, err = parseFrame(ops, body, version); err != nil {
			return err
		}
	}
	trims := map[trimKey]uint64{} // the highest trim after the operation at hand
	seen := make(map[string]struct{}, len(ops)/4)
	var sk []byte
	live := make([]logOp, 0, len(ops)/2)
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		switch op.kind {
		case opTrim:
			tk := trimKey{op.bucket, string(op.key)}
			trims[tk] = max(trims[tk], binary.BigEndian.Uint64(op.val))
			continue
		case opPutMax, opDrop:
			// opPutMax: each may raise the value, none overrides
			// another; opDrop: the chunk it changes may be across a later
			// trim, which keeps it, and a drop twice is one.
			live = append(live, op)
			continue
		}
		// A later trim first: it covers most stream records, and is
		// cheaper than remembering the key. A chunk goes only when all of
		// it is below the trim.
		if n := len(op.key); n >= 8 && len(trims) > 0 {
			if up, ok := trims[trimKey{op.bucket, string(op.key[:n-8])}]; ok {
				last := binary.BigEndian.Uint64(op.key[n-8:])
				if op.bucket == lbCopies && op.kind == opPut {
					last, _ = chunkLast(op.key, op.val) // a damaged chunk: as its first key
					last = max(last, binary.BigEndian.Uint64(op.key[n-8:]))
				}
				if last <= up {
					continue
				}
			}
		}
		sk = append(append(sk[:0], op.bucket), op.key...)
		if _, later := seen[string(sk)]; later {
			continue
		}
		seen[string(sk)] = struct{}{}
		live = append(live, op)
	}
	var bs [len(logBuckets)]*bolt.Bucket
	bucket := func(i byte) (*bolt.Bucket, error) {
		if bs[i] == nil {
			if bs[i] = tx.Bucket(logBuckets[i]); bs[i] == nil {
				return nil, fmt.Errorf("dataplane: bucket %s missing", logBuckets[i])
			}
		}
		return bs[i], nil
	}
	for tk, up := range trims {
		b, err := bucket(tk.bucket)
		if err == nil {
			err = logOp{kind: opTrim, bucket: tk.bucket, key: []byte(tk.prefix), val: binary.BigEndian.AppendUint64(nil, up)}.apply(b)
		}
		if err != nil {
			return err
		}
	}
	for _, op := range inKeyOrder(live) {
		b, err := bucket(op.bucket)
		if err == nil {
			err = op.apply(b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// inKeyOrder returns live (in reverse log order; at most one operation
// per key but for opPutMax, whose operations commute, and opDrop, which
// may name a chunk's first key and must follow its put) in key order, per
// bucket, and in log order for one key. It groups them by bucket and key
// prefix (a key but its last 8 bytes: the number its writer gives, in
// ascending order), so that each group is in order already and only one
// that is not is sorted: sorting them all took a quarter of a checkpoint.
func inKeyOrder(live []logOp) []logOp {
	type group struct {
		bucket byte
		prefix []byte
		ops    []logOp
	}
	var groups []group
	var index [len(logBuckets)]map[string]int
	for i := len(live) - 1; i >= 0; i-- {
		op := live[i]
		prefix := op.key
		if n := len(op.key); n >= 8 {
			prefix = op.key[:n-8]
		}
		m := index[op.bucket]
		if m == nil {
			m = map[string]int{}
			index[op.bucket] = m
		}
		g, ok := m[string(prefix)]
		if !ok {
			g = len(groups)
			m[string(prefix)] = g
			groups = append(groups, group{bucket: op.bucket, prefix: prefix})
		}
		groups[g].ops = append(groups[g].ops, op)
	}
	slices.SortFunc(groups, func(a, b group) int {
		if a.bucket != b.bucket {
			return int(a.bucket) - int(b.bucket)
		}
		return bytes.Compare(a.prefix, b.prefix)
	})
	byKey := func(a, b logOp) int { return bytes.Compare(a.key, b.key) }
	out := live[:0]
	for _, g := range groups {
		if !slices.IsSortedFunc(g.ops, byKey) {
			slices.SortStableFunc(g.ops, byKey)
		}
		out = append(out, g.ops...)
	}
	return out
}

// parseFrame appends the operations of a frame of a segment of version
// to ops, checking each.
func parseFrame(ops []logOp, body []byte, version uint32) ([]logOp, error) {
	for len(body) > 0 {
		if len(body) < 2 {
			return ops, errTornLogFrame
		}
		op := logOp{kind: body[0], bucket: body[1]}
		body = body[2:]
		if op.bucket >= lbLegacyCopies {
			return ops, fmt.Errorf("%w: bucket %d", errTornLogFrame, op.bucket)
		}
		if version == 1 && op.bucket == lbCopies {
			op.bucket = lbLegacyCopies // a record per key (copychunks.go)
		}
		var ok bool
		if op.key, body, ok = cutBytes(body); !ok {
			return ops, errTornLogFrame
		}
		switch op.kind {
		case opPut:
		case opDelete:
			ops = append(ops, op)
			continue
		case opDrop:
			if op.bucket != lbCopies || version < 2 {
				return ops, fmt.Errorf("%w: a drop in bucket %d", errTornLogFrame, op.bucket)
			}
			ops = append(ops, op)
			continue
		case opPutMax, opTrim:
		default:
			return ops, fmt.Errorf("%w: operation %d", errTornLogFrame, op.kind)
		}
		if op.val, body, ok = cutBytes(body); !ok {
			return ops, errTornLogFrame
		}
		if op.kind != opPut && len(op.val) != 8 {
			return ops, fmt.Errorf("%w: operation %d with a %d-byte value", errTornLogFrame, op.kind, len(op.val))
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// splitFrames returns the frame bodies of b up to the first torn one, or
// to the zeros a segment reserved after its last.
func splitFrames(raw []byte) (frames [][]byte, torn bool) {
	for len(raw) > 0 {
		body, rest, err := segfile.CutFrame(raw)
		if errors.Is(err, segfile.ErrEnd) {
			return frames, false
		}
		if err != nil {
			return frames, true
		}
		frames, raw = append(frames, body), rest
	}
	return frames, false
}

// deleteRange deletes b's keys from lo to hi, both included.
func deleteRange(b *bolt.Bucket, lo, hi []byte) error {
	var gone [][]byte // deleting while a cursor walks can skip keys
	c := b.Cursor()
	for k, _ := c.Seek(lo); k != nil && bytes.Compare(k, hi) <= 0; k, _ = c.Next() {
		gone = append(gone, k)
	}
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func cutBytes(b []byte) (v, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// segLog is the writer's side of the log: the segment being appended to.
type segLog struct {
	dir  string
	f    *os.File // nil: the next frame starts segment num+1
	num  uint64   // the newest segment's number
	size int64
	// reserved is how far f holds written bytes, zeros beyond size
	// (segfile.Reserve).
	reserved int64
	// failNext makes the next append fail, as a full disk would (tests);
	// full makes every append fail while it is set.
	failNext, full atomic.Bool
}

// append writes a frame (header included) and syncs it. A failed write
// is cut off the segment and ends it, so that nothing good follows a torn
// frame.
func (l *segLog) append(frame []byte) error {
	if l.f == nil {
		if err := l.create(l.num + 1); err != nil {
			return err
		}
	}
	var err error
	if l.failNext.CompareAndSwap(true, false) || l.full.Load() {
		err = errInjected
	} else {
		_ = segfile.Reserve(l.f, &l.reserved, l.size+int64(len(frame))) // without the room, the frame alone
		if _, err = l.f.WriteAt(frame, l.size); err == nil {
			err = segfile.Fdatasync(l.f)
		}
	}
	if err != nil {
		l.f.Truncate(l.size) // best effort: replay stops at a torn frame anyway
		l.f.Close()
		l.f = nil
		return fmt.Errorf("dataplane: writing the log: %w", err)
	}
	l.size += int64(len(frame))
	return nil
}

// create starts segment n, durably (its directory entry included).
func (l *segLog) create(n uint64) error {
	f, err := segfile.Create(l.dir, n, binary.BigEndian.AppendUint32([]byte(logMagic), logVersion))
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	l.f, l.num, l.size, l.reserved = f, n, logHeaderSize, logHeaderSize
	return nil
}

// rotate ends the current segment: the next frame starts a new one. It
// returns the number of the last segment written.
func (l *segLog) rotate() uint64 {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	return l.num
}

// readLogSegment returns the frame bodies of a segment up to the first
// torn one, and its version.
func readLogSegment(path string) (frames [][]byte, version uint32, torn bool, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, false, err
	}
	if len(raw) < logHeaderSize || string(raw[:4]) != logMagic {
		return nil, logVersion, true, nil // created but its header never reached the disk
	}
	if version = binary.BigEndian.Uint32(raw[4:8]); version != logVersion && version != 1 {
		return nil, 0, false, fmt.Errorf("dataplane: log segment %s has version %d, this build reads 1 and %d", path, version, logVersion)
	}
	frames, torn = splitFrames(raw[logHeaderSize:])
	return frames, version, torn, nil
}

// replayLog applies the segments of dir to db, then deletes them, and
// returns the number the writer's segments continue from.
func replayLog(db *bolt.DB, dir string) (uint64, error) {
	ns, err := segfile.List(dir)
	if err != nil || len(ns) == 0 {
		return 0, err
	}
	for _, n := range ns {
		frames, version, _, err := readLogSegment(segfile.Path(dir, n))
		if err != nil {
			return 0, err
		}
		if len(frames) == 0 {
			continue
		}
		err = db.Update(func(tx *bolt.Tx) error {
			if version == 1 {
				if _, err := tx.CreateBucketIfNotExists(bucketLegacyCopies); err != nil {
					return err
				}
			}
			return applyBodies(tx, frames, version)
		})
		if err != nil {
			return 0, fmt.Errorf("dataplane: replaying log segment %s: %w", segfile.Path(dir, n), err)
		}
	}
	last := ns[len(ns)-1]
	if err := segfile.RemoveUpTo(dir, last); err != nil {
		return 0, fmt.Errorf("dataplane: removing the replayed log: %w", err)
	}
	return last, nil
}
