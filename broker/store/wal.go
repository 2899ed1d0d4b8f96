package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"gantry/broker"
	"gantry/broker/store/segfile"
)

// The write-ahead log (see doc.go, "Write-ahead log"): numbered segment
// files in DataDir/gantry.db.wal/, each a header and then frames, one
// frame per group commit.
const (
	walMagic      = "GWAL"
	walVersion    = 1
	walHeaderSize = 8 // magic, big-endian u32 version
)

// errTornFrame marks a frame cut short or with a bad checksum.
var errTornFrame = segfile.ErrTorn

// walDir is the log directory of the store file at path.
func walDir(path string) string { return segfile.Dir(path) }

// wal is the writer's open segment. Only the writer goroutine uses it.
type wal struct {
	dir string
	f   *os.File // current segment
	n   uint64   // its number
	off int64    // bytes of f that hold the header and whole frames
	// reserved is how far f holds written bytes, zeros beyond off
	// (segfile.Reserve).
	reserved int64
	buf      []byte // frame buffer, reused
}

// maxKeptFrameBuf is the largest frame buffer kept for the next commit.
const maxKeptFrameBuf = 4 << 20

// create starts segment n: it writes the header and makes the file and
// its directory entry durable before any frame depends on them.
func (w *wal) create(n uint64) error {
	f, err := segfile.Create(w.dir, n, binary.BigEndian.AppendUint32([]byte(walMagic), walVersion))
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	w.f, w.n, w.off, w.reserved = f, n, walHeaderSize, walHeaderSize
	return nil
}

// close closes the current segment, if any.
func (w *wal) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// write appends the frame in buf to the segment and makes it durable
// (fdatasync); without an open segment (a failed rotation) it starts the
// next one first. On failure the segment is cut back to its last whole
// frame, so that a refused batch is not replayed. It returns the frame's
// size.
func (w *wal) write() (int, error) {
	frame := w.buf
	if cap(w.buf) > maxKeptFrameBuf {
		w.buf = nil
	}
	if w.f == nil {
		if err := w.create(w.n + 1); err != nil {
			return 0, err
		}
	}
	_ = segfile.Reserve(w.f, &w.reserved, w.off+int64(len(frame))) // without the room, the frame alone
	_, err := w.f.WriteAt(frame, w.off)
	if err == nil {
		err = segfile.Fdatasync(w.f)
	}
	if err != nil {
		w.reserved = w.off
		if terr := w.f.Truncate(w.off); terr != nil {
			err = fmt.Errorf("%w (and cutting the refused frame off %s failed: %v)", err, w.f.Name(), terr)
		}
		return 0, err
	}
	w.off += int64(len(frame))
	return len(frame), nil
}

// appendFrame appends the frame of ops to dst: its head, then the body
// (stamp, op count, ops).
func appendFrame(dst []byte, ops []queuedOp, stamp int64) []byte {
	dst, start := segfile.BeginFrame(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(stamp))
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for i := range ops {
		dst = appendWALOp(dst, &ops[i])
	}
	segfile.SealFrame(dst, start)
	return dst
}

// appendWALOp appends one op: kind, key, then its value (puts) or its
// state and packet id (PersistEntryState).
func appendWALOp(dst []byte, op *queuedOp) []byte {
	dst = append(dst, byte(op.kind))
	dst = binary.AppendUvarint(dst, uint64(len(op.key)))
	dst = append(dst, op.key...)
	switch {
	case op.kind == broker.PersistEntryState:
		dst = append(dst, op.state)
		dst = binary.BigEndian.AppendUint16(dst, op.pid)
	case hasValue(op.kind):
		dst = binary.AppendUvarint(dst, uint64(len(op.val)))
		dst = append(dst, op.val...)
	}
	return dst
}

// hasValue reports whether ops of kind carry a record.
func hasValue(kind broker.PersistKind) bool {
	switch kind {
	case broker.PersistSession, broker.PersistEntry, broker.PersistRetained, broker.PersistInboundQoS2:
		return true
	}
	return false
}

// segment is what a segment file holds: the ops of its whole frames in
// order (keys and values point into the file's bytes) and the last stamp.
type segment struct {
	ops   []queuedOp
	stamp int64
	torn  bool // it ends in a frame cut short or damaged
	valid int  // bytes of the header and whole frames
}

// readSegment reads and decodes the segment file at path.
func readSegment(path string) (segment, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return segment{}, fmt.Errorf("store: read log segment: %w", err)
	}
	return decodeSegment(raw)
}

// decodeSegment decodes a segment's bytes. A file shorter than its header
// is a segment whose creation was interrupted: empty and torn.
func decodeSegment(raw []byte) (segment, error) {
	var sg segment
	if len(raw) < walHeaderSize {
		sg.torn = len(raw) > 0
		return sg, nil
	}
	if string(raw[:4]) != walMagic {
		return sg, fmt.Errorf("%w: not a log segment (magic %q)", ErrCorrupt, raw[:4])
	}
	if v := binary.BigEndian.Uint32(raw[4:walHeaderSize]); v != walVersion {
		return sg, fmt.Errorf("%w: log segment version %d, this gantry reads version %d", ErrCorrupt, v, walVersion)
	}
	rest := raw[walHeaderSize:]
	for sg.valid = walHeaderSize; len(rest) > 0; sg.valid = len(raw) - len(rest) {
		body, next, err := segfile.CutFrame(rest)
		if errors.Is(err, segfile.ErrEnd) {
			return sg, nil // the space reserved after the last frame
		}
		if err == nil {
			sg.ops, sg.stamp, err = decodeFrame(body, sg.ops, sg.stamp)
		}
		if err != nil {
			sg.torn = true
			return sg, nil
		}
		rest = next
	}
	return sg, nil
}

// decodeFrame appends the ops of a frame's body to ops. A frame is taken
// whole or not at all: on error ops and stamp come back as they came.
func decodeFrame(body []byte, ops []queuedOp, stamp int64) ([]queuedOp, int64, error) {
	if len(body) < 8 {
		return ops, stamp, errTornFrame
	}
	st := int64(binary.BigEndian.Uint64(body))
	r := frameReader{b: body[8:]}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) { // every op takes at least a byte
		return ops, stamp, errTornFrame
	}
	start := len(ops)
	for range n {
		var op queuedOp
		op.kind = broker.PersistKind(r.byte())
		op.key = r.bytes()
		switch {
		case op.kind == broker.PersistEntryState:
			op.state = r.byte()
			op.pid = r.uint16()
		case hasValue(op.kind):
			op.val = r.bytes()
		case op.kind < broker.PersistSession || op.kind > broker.DeleteRetained:
			r.fail()
		}
		if r.err != nil {
			clear(ops[start:])
			return ops[:start], stamp, errTornFrame
		}
		ops = append(ops, op)
	}
	if len(r.b) != 0 {
		clear(ops[start:])
		return ops[:start], stamp, errTornFrame
	}
	return ops, max(stamp, st), nil
}

// frameReader decodes a frame body; the first error sticks.
type frameReader struct {
	b   []byte
	err error
}

func (r *frameReader) fail() { r.err = errTornFrame }

func (r *frameReader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *frameReader) uint16() uint16 {
	if r.err != nil || len(r.b) < 2 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *frameReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns a length-prefixed byte string (non-nil, possibly empty).
func (r *frameReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
