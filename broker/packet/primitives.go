package packet

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// ErrShort means the buffer does not yet hold a whole fixed header.
var ErrShort = errors.New("packet: need more bytes")

// maxVarintBytes is the longest variable byte integer MQTT allows.
const maxVarintBytes = 4

// maxStringLen is the longest string or binary a 2-byte length can prefix.
const maxStringLen = 65535

// errVarintShort reports a variable byte integer cut off by the end of the
// buffer. DecodeFixedHeader turns it into ErrShort, a body reader into
// MalformedPacket.
var errVarintShort = errors.New("packet: variable byte integer cut short")

// decodeVarint reads a variable byte integer at the start of b and returns
// its value and encoded length. A fourth byte with the continuation bit set
// is MalformedPacket even if b ends there.
func decodeVarint(b []byte) (value, n int, err error) {
	multiplier := 1
	for n < maxVarintBytes {
		if n >= len(b) {
			return 0, 0, errVarintShort
		}
		digit := b[n]
		n++
		value += int(digit&0x7F) * multiplier
		if digit&0x80 == 0 {
			return value, n, nil
		}
		multiplier *= 128
	}
	return 0, 0, MalformedPacket
}

// reader consumes a packet body front to back. Every method checks that the
// bytes it needs are present before using them, so a short buffer or a
// lying length prefix yields MalformedPacket, never a panic or an
// allocation.
type reader struct {
	buf []byte
}

func (r *reader) empty() bool { return len(r.buf) == 0 }

// expectEnd reports trailing bytes as MalformedPacket.
func (r *reader) expectEnd() error {
	if len(r.buf) != 0 {
		return MalformedPacket
	}
	return nil
}

func (r *reader) readByte() (byte, error) {
	if len(r.buf) < 1 {
		return 0, MalformedPacket
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b, nil
}

func (r *reader) readUint16() (uint16, error) {
	if len(r.buf) < 2 {
		return 0, MalformedPacket
	}
	v := uint16(r.buf[0])<<8 | uint16(r.buf[1])
	r.buf = r.buf[2:]
	return v, nil
}

func (r *reader) readUint32() (uint32, error) {
	if len(r.buf) < 4 {
		return 0, MalformedPacket
	}
	v := uint32(r.buf[0])<<24 | uint32(r.buf[1])<<16 | uint32(r.buf[2])<<8 | uint32(r.buf[3])
	r.buf = r.buf[4:]
	return v, nil
}

func (r *reader) readVarint() (int, error) {
	v, n, err := decodeVarint(r.buf)
	if err != nil {
		return 0, MalformedPacket
	}
	r.buf = r.buf[n:]
	return v, nil
}

// take returns the next n bytes, capped so that appending to the result
// cannot overwrite the bytes that follow it.
func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.buf) {
		return nil, MalformedPacket
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b, nil
}

// rest returns all remaining bytes.
func (r *reader) rest() []byte {
	b := r.buf
	r.buf = r.buf[len(r.buf):]
	return b
}

// readBinary reads 2-byte-length-prefixed binary data, referencing buf.
func (r *reader) readBinary() ([]byte, error) {
	n, err := r.readUint16()
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

// readUTF8 reads a UTF-8 encoded string as bytes referencing buf.
func (r *reader) readUTF8() ([]byte, error) {
	b, err := r.readBinary()
	if err != nil {
		return nil, err
	}
	if !validUTF8String(b) {
		return nil, MalformedPacket
	}
	return b, nil
}

// readString reads a UTF-8 encoded string into an owned string.
func (r *reader) readString() (string, error) {
	b, err := r.readUTF8()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// readPacketID reads a Packet Identifier, which must not be 0.
func (r *reader) readPacketID() (uint16, error) {
	id, err := r.readUint16()
	if err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, MalformedPacket
	}
	return id, nil
}

// validUTF8String reports whether b is a valid MQTT UTF-8 encoded string:
// well-formed UTF-8 (which excludes surrogates) without U+0000. Other
// control characters and non-characters are allowed here; the spec lets
// the receiver decide about them.
func validUTF8String(b []byte) bool {
	return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b)
}

// cloneBytes returns an owned copy of b, nil when b is empty.
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// nilIfEmpty normalises an empty slice to nil.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func appendUint16(dst []byte, v uint16) []byte {
	return append(dst, byte(v>>8), byte(v))
}

func appendUint32(dst []byte, v uint32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendVarint appends v as a minimal variable byte integer. Values above
// MaxRemainingLength take a fifth byte, which decoders reject.
func appendVarint(dst []byte, v int) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// varintSize is the number of bytes appendVarint writes for v.
func varintSize(v int) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendPrefixed appends a 2-byte length and the bytes of s, cut to 65,535
// bytes.
func appendPrefixed[T string | []byte](dst []byte, s T) []byte {
	n := min(len(s), maxStringLen)
	dst = appendUint16(dst, uint16(n))
	return append(dst, s[:n]...)
}

// prefixedSize is the encoded size of a length-prefixed string of n bytes.
func prefixedSize(n int) int {
	return 2 + min(n, maxStringLen)
}

// packetSize is the size of a whole packet whose body has remaining bytes.
func packetSize(remaining int) int {
	return 1 + varintSize(remaining) + remaining
}
