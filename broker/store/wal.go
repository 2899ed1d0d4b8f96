package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gantry/broker"
)

// The write-ahead log (see doc.go, "Write-ahead log"): numbered segment
// files in DataDir/gantry.db.wal/, each a header and then frames, one
// frame per group commit.
const (
	walMagic      = "GWAL"
	walVersion    = 1
	walHeaderSize = 8 // magic, big-endian u32 version
	frameHeadSize = 8 // little-endian u32 body length, u32 CRC-32C of the body
	segmentSuffix = ".log"
	segmentDigits = 20 // zero-padded segment number: names sort as numbers
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTornFrame marks a frame cut short or with a bad checksum.
var errTornFrame = errors.New("torn or damaged frame")

// walDir is the log directory of the store file at path.
func walDir(path string) string { return path + ".wal" }

func segmentPath(dir string, n uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s", segmentDigits, n, segmentSuffix))
}

// listSegments returns the numbers of dir's segments in ascending order;
// a missing dir has none.
func listSegments(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read log directory %s: %w", dir, err)
	}
	var ns []uint64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), segmentSuffix)
		if !ok || len(name) != segmentDigits {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 64); err == nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// wal is the writer's open segment. Only the writer goroutine uses it.
type wal struct {
	dir string
	f   *os.File // current segment
	n   uint64   // its number
	off int64    // bytes of f that hold the header and whole frames
	buf []byte   // frame buffer, reused
}

// maxKeptFrameBuf is the largest frame buffer kept for the next commit.
const maxKeptFrameBuf = 4 << 20

// create starts segment n: it writes the header and makes the file and
// its directory entry durable before any frame depends on them.
func (w *wal) create(n uint64) error {
	if _, err := os.Stat(w.dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(w.dir, 0o700); err != nil {
			return fmt.Errorf("store: create log directory: %w", err)
		}
		if err := syncDir(filepath.Dir(w.dir)); err != nil { // the directory's own entry
			return fmt.Errorf("store: create log directory: %w", err)
		}
	}
	path := segmentPath(w.dir, n)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("store: create log segment: %w", err)
	}
	hdr := binary.BigEndian.AppendUint32([]byte(walMagic), walVersion)
	if _, err = f.WriteAt(hdr, 0); err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = syncDir(w.dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("store: create log segment %s: %w", path, err)
	}
	w.f, w.n, w.off = f, n, walHeaderSize
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
	_, err := w.f.WriteAt(frame, w.off)
	if err == nil {
		err = fdatasync(w.f)
	}
	if err != nil {
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
	start := len(dst)
	dst = append(dst, make([]byte, frameHeadSize)...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(stamp))
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for i := range ops {
		dst = appendWALOp(dst, &ops[i])
	}
	body := dst[start+frameHeadSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
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
		body, next, err := cutFrame(rest)
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

// cutFrame splits the first frame's checked body off b.
func cutFrame(b []byte) (body, rest []byte, err error) {
	if len(b) < frameHeadSize {
		return nil, nil, errTornFrame
	}
	n := binary.LittleEndian.Uint32(b)
	sum := binary.LittleEndian.Uint32(b[4:])
	if uint64(n) > uint64(len(b)-frameHeadSize) {
		return nil, nil, errTornFrame
	}
	body = b[frameHeadSize : frameHeadSize+int(n)]
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, nil, errTornFrame
	}
	return body, b[frameHeadSize+int(n):], nil
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

// removeSegments deletes the segments numbered up to and including upTo,
// oldest first, and stops at the first it cannot delete: the segments
// left are always a run up to the newest, which replays correctly.
func removeSegments(dir string, upTo uint64) error {
	ns, err := listSegments(dir)
	if err != nil {
		return err
	}
	for _, n := range ns {
		if n > upTo {
			break
		}
		if err := os.Remove(segmentPath(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
