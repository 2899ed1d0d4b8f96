package store

import (
	"encoding/binary"
	"math"

	"gantry/broker"
	"gantry/broker/packet"
)

// reader decodes a record. The first failure is kept in err; later reads
// return zero values, so decoders check once at the end. Every length and
// count is checked against the bytes left before anything is allocated:
// hostile input cannot make a decoder allocate more than its own size.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = corruptf("bad %s at byte %d", what, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) left() int { return len(r.b) - r.off }

// version reads the format byte and refuses any but formatV1.
func (r *reader) version() {
	if r.left() == 0 {
		r.fail("empty record")
		return
	}
	if v := r.b[r.off]; v != formatV1 {
		r.err = corruptf("format version %d, this build reads %d", v, formatV1)
		r.off = len(r.b)
		return
	}
	r.off++
}

// end reports the first failure, or trailing bytes after a record.
func (r *reader) end(what string) error {
	if r.err != nil {
		return r.err
	}
	if r.left() != 0 {
		return corruptf("%d bytes after the %s record", r.left(), what)
	}
	return nil
}

func (r *reader) byte() byte {
	if r.left() < 1 {
		r.fail("byte")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("boolean")
	return false
}

func (r *reader) uint16() uint16 {
	if r.left() < 2 {
		r.fail("uint16")
		return 0
	}
	r.off += 2
	return binary.BigEndian.Uint16(r.b[r.off-2:])
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.off += n
	return v
}

func (r *reader) uint32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.fail("uint32")
		return 0
	}
	return uint32(v)
}

// count reads a number of elements, each at least one byte long.
func (r *reader) count() int {
	v := r.uvarint()
	if v > uint64(r.left()) {
		r.fail("count")
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string into a new slice (nil if empty).
func (r *reader) bytes() []byte {
	n := r.count()
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	copy(b, r.b[r.off:])
	r.off += n
	return b
}

func (r *reader) string() string {
	n := r.count()
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s
}

func (r *reader) subOptions() packet.SubOptions {
	b := r.byte()
	if b&subReserved != 0 || (b>>subRHShift)&3 == 3 || b&subQoSMask == 3 {
		r.fail("subscription options")
		return packet.SubOptions{}
	}
	return packet.SubOptions{
		QoS:               b & subQoSMask,
		NoLocal:           b&subNoLocal != 0,
		RetainAsPublished: b&subRetainAsPub != 0,
		RetainHandling:    (b >> subRHShift) & 3,
	}
}

// message reads a message body written by appendMessage.
func (r *reader) message() *broker.Message {
	m := &broker.Message{QoS: r.byte(), Origin: broker.Origin(r.byte())}
	flags := r.byte()
	m.Retain = flags&msgRetain != 0
	m.Topic = r.string()
	m.Payload = r.bytes()
	m.ClientID = r.string()
	if flags&msgPayloadFormat != 0 {
		m.PayloadFormat = r.byte()
	}
	if flags&msgContentType != 0 {
		m.ContentType = r.string()
	}
	if flags&msgResponseTopic != 0 {
		m.ResponseTopic = r.string()
	}
	if flags&msgCorrelationData != 0 {
		m.CorrelationData = r.bytes()
	}
	if flags&msgUserProperties != 0 {
		m.UserProperties = r.userProperties()
	}
	if flags&msgExpiresAt != 0 {
		m.ExpiresAt = r.varint()
	}
	if flags&msgUsername != 0 {
		m.Username = r.string()
	}
	return m
}

func (r *reader) userProperties() []packet.UserProperty {
	n := r.count()
	if n == 0 {
		return nil
	}
	// Each property takes at least two bytes (two empty strings).
	if n > r.left()/2 {
		r.fail("user property count")
		return nil
	}
	props := make([]packet.UserProperty, n)
	for i := range props {
		props[i] = packet.UserProperty{Key: r.string(), Value: r.string()}
	}
	return props
}
