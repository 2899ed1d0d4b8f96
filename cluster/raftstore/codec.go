package raftstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// logFormat is the first byte of every log record.
const logFormat = 1

// Flags of a log record: which optional fields follow. A nil Data or
// Extensions is told apart from an empty one, so that a record reads
// back exactly as it was stored.
const (
	flagData       = 1 << 0 // Data is not nil
	flagExtensions = 1 << 1 // Extensions is not nil
	flagAppendedAt = 1 << 2 // AppendedAt is not the zero time
	knownFlags     = flagData | flagExtensions | flagAppendedAt
)

// appendLog appends the record of l to b (layout in doc.go).
func appendLog(b []byte, l *raft.Log) []byte {
	var flags byte
	if l.Data != nil {
		flags |= flagData
	}
	if l.Extensions != nil {
		flags |= flagExtensions
	}
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	b = append(b, logFormat, byte(l.Type), flags)
	b = binary.AppendUvarint(b, l.Index)
	b = binary.AppendUvarint(b, l.Term)
	if l.Data != nil {
		b = binary.AppendUvarint(b, uint64(len(l.Data)))
		b = append(b, l.Data...)
	}
	if l.Extensions != nil {
		b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
		b = append(b, l.Extensions...)
	}
	if !l.AppendedAt.IsZero() {
		b = binary.AppendVarint(b, l.AppendedAt.Unix())
		b = binary.AppendUvarint(b, uint64(l.AppendedAt.Nanosecond()))
	}
	return b
}

// logSize bounds the length of l's record, for sizing buffers.
func logSize(l *raft.Log) int {
	return 3 + 5*binary.MaxVarintLen64 + len(l.Data) + len(l.Extensions) + binary.MaxVarintLen32
}

// decodeLog decodes a record into l. It copies Data and Extensions (b
// may be bbolt's memory, valid only inside its transaction), returns an
// error wrapping ErrCorrupt for bad, truncated or trailing bytes or an
// unknown format or flag, and never panics.
func decodeLog(b []byte, l *raft.Log) error {
	if len(b) < 3 {
		return fmt.Errorf("%w: record of %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != logFormat {
		return fmt.Errorf("%w: record format %d, this build reads %d", ErrCorrupt, b[0], logFormat)
	}
	typ, flags := raft.LogType(b[1]), b[2]
	if flags&^knownFlags != 0 {
		return fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, flags)
	}
	d := reader{b: b[3:]}
	out := raft.Log{Type: typ, Index: d.uvarint(), Term: d.uvarint()}
	if flags&flagData != 0 {
		out.Data = d.bytes()
	}
	if flags&flagExtensions != 0 {
		out.Extensions = d.bytes()
	}
	if flags&flagAppendedAt != 0 {
		sec, nsec := d.varint(), d.uvarint()
		if d.err == nil && nsec >= uint64(time.Second) {
			d.err = fmt.Errorf("%w: AppendedAt has %d nanoseconds", ErrCorrupt, nsec)
		}
		out.AppendedAt = time.Unix(sec, int64(nsec))
		if d.err == nil && out.AppendedAt.IsZero() {
			// The zero time is stored by leaving the flag out.
			d.err = fmt.Errorf("%w: AppendedAt flag with the zero time", ErrCorrupt)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	*l = out
	return nil
}

// reader reads from b and keeps the first error; after it, every read
// returns a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated or overlong uvarint", ErrCorrupt)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated or overlong varint", ErrCorrupt)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a length-prefixed byte string into a new slice.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: length %d exceeds the remaining %d bytes", ErrCorrupt, n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	v := make([]byte, n)
	copy(v, r.b)
	r.b = r.b[n:]
	return v
}
