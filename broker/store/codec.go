package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"gantry/broker"
	"gantry/broker/packet"
)

// formatV1 is the leading format-version byte of every record this
// package writes. A decoder meeting another value refuses the record.
const formatV1 = 1

// ErrCorrupt is returned (wrapped) by the decoders for bytes that are not
// a valid record.
var ErrCorrupt = errors.New("store: corrupt record")

// Presence flags of a message's optional fields (one byte, see doc.go).
const (
	msgRetain          = 1 << 0
	msgPayloadFormat   = 1 << 1
	msgContentType     = 1 << 2
	msgResponseTopic   = 1 << 3
	msgCorrelationData = 1 << 4
	msgUserProperties  = 1 << 5
	msgExpiresAt       = 1 << 6
	msgUsername        = 1 << 7
)

// Flags of an entry record.
const (
	entryRetain     = 1 << 0
	entryHasMessage = 1 << 1
	entryHasRecord  = 1 << 2 // the message's Record follows it
	entryFlagsMask  = entryRetain | entryHasMessage | entryHasRecord
)

// entryHeaderLen is the fixed prefix of an entry record: version, state
// and big-endian packet id, patched in place by PersistEntryState.
const entryHeaderLen = 4

// EncodeMessage appends the retained-record encoding of m (format byte and
// message body) to dst.
func EncodeMessage(dst []byte, m *broker.Message) []byte {
	return appendMessage(append(dst, formatV1), m)
}

// DecodeMessage decodes a retained record written by EncodeMessage.
func DecodeMessage(b []byte) (*broker.Message, error) {
	r := reader{b: b}
	r.version()
	m := r.message()
	return m, r.end("message")
}

// EncodeEntry appends the encoding of e to dst. e.Seq is not part of the
// value: it lives in the key.
func EncodeEntry(dst []byte, e *broker.EntryRecord) []byte {
	flags := byte(0)
	if e.Retain {
		flags |= entryRetain
	}
	if e.Msg != nil {
		flags |= entryHasMessage
		if e.Msg.Record != (broker.PeerRecord{}) {
			flags |= entryHasRecord
		}
	}
	dst = append(dst, formatV1, e.State)
	dst = binary.BigEndian.AppendUint16(dst, e.PID)
	dst = append(dst, e.QoS, flags)
	dst = binary.AppendUvarint(dst, uint64(len(e.SubIDs)))
	for _, id := range e.SubIDs {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	if e.Msg != nil {
		dst = appendMessage(dst, e.Msg)
	}
	if flags&entryHasRecord != 0 {
		r := &e.Msg.Record
		dst = binary.AppendUvarint(binary.AppendUvarint(appendString(dst, r.Node), r.Boot), r.Seq)
	}
	return dst
}

// DecodeEntry decodes an entry record; the result's Seq is 0 (the caller
// takes it from the key).
func DecodeEntry(b []byte) (broker.EntryRecord, error) {
	var e broker.EntryRecord
	r := reader{b: b}
	r.version()
	e.State = r.byte()
	e.PID = r.uint16()
	e.QoS = r.byte()
	flags := r.byte()
	if flags&^entryFlagsMask != 0 {
		r.fail("entry flags")
	}
	e.Retain = flags&entryRetain != 0
	if n := r.count(); n > 0 {
		e.SubIDs = make([]uint32, n)
		for i := range e.SubIDs {
			e.SubIDs[i] = r.uint32()
		}
	}
	if flags&entryHasMessage != 0 {
		e.Msg = r.message()
	}
	if flags&entryHasRecord != 0 {
		if e.Msg == nil {
			r.fail("entry record without a message")
		} else {
			e.Msg.Record = broker.PeerRecord{Node: r.string(), Boot: r.uvarint(), Seq: r.uvarint()}
		}
	}
	return e, r.end("entry")
}

// patchEntryState returns a copy of the entry record v with state and pid
// replaced, or false if v is not a record this package wrote.
func patchEntryState(v []byte, state uint8, pid uint16) ([]byte, bool) {
	if len(v) < entryHeaderLen || v[0] != formatV1 {
		return nil, false
	}
	out := append([]byte(nil), v...)
	out[1] = state
	binary.BigEndian.PutUint16(out[2:4], pid)
	return out, true
}

// EncodeSession appends the encoding of s to dst.
func EncodeSession(dst []byte, s *broker.SessionRecord) []byte {
	dst = append(dst, formatV1)
	dst = appendString(dst, s.ClientID)
	dst = binary.AppendUvarint(dst, uint64(s.Expiry))
	dst = binary.AppendVarint(dst, s.DisconnectedAt)
	dst = binary.AppendUvarint(dst, uint64(len(s.Subscriptions)))
	for i := range s.Subscriptions {
		sub := &s.Subscriptions[i]
		dst = appendString(dst, sub.Filter)
		dst = append(dst, encodeSubOptions(sub.Options))
		dst = binary.AppendUvarint(dst, uint64(sub.SubID))
	}
	if s.Will == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(s.Will.Delay))
	dst = binary.AppendUvarint(dst, uint64(s.Will.Expiry))
	if s.Will.Msg == nil {
		return append(dst, 0)
	}
	return appendMessage(append(dst, 1), s.Will.Msg)
}

// DecodeSession decodes a session record.
func DecodeSession(b []byte) (broker.SessionRecord, error) {
	var s broker.SessionRecord
	r := reader{b: b}
	r.version()
	s.ClientID = r.string()
	s.Expiry = r.uint32()
	s.DisconnectedAt = r.varint()
	if n := r.count(); n > 0 {
		s.Subscriptions = make([]broker.SubscriptionRecord, n)
		for i := range s.Subscriptions {
			sub := &s.Subscriptions[i]
			sub.Filter = r.string()
			sub.Options = r.subOptions()
			sub.SubID = r.uint32()
		}
	}
	if r.bool() {
		w := &broker.WillRecord{Delay: r.uint32(), Expiry: r.uint32()}
		if r.bool() {
			w.Msg = r.message()
		}
		s.Will = w
	}
	return s, r.end("session")
}

// Subscription options use the MQTT v5 SUBSCRIBE options byte layout.
const (
	subQoSMask     = 0x03
	subNoLocal     = 0x04
	subRetainAsPub = 0x08
	subRHShift     = 4
	subReserved    = 0xC0
)

func encodeSubOptions(o packet.SubOptions) byte {
	b := o.QoS&subQoSMask | (o.RetainHandling&3)<<subRHShift
	if o.NoLocal {
		b |= subNoLocal
	}
	if o.RetainAsPublished {
		b |= subRetainAsPub
	}
	return b
}

// appendMessage appends a message body (no format byte): QoS, origin,
// flags, topic, payload, client id, then the optional fields in flag order.
func appendMessage(dst []byte, m *broker.Message) []byte {
	flags := messageFlags(m)
	dst = append(dst, m.QoS, byte(m.Origin), flags)
	dst = appendString(dst, m.Topic)
	dst = appendBytes(dst, m.Payload)
	dst = appendString(dst, m.ClientID)
	if flags&msgPayloadFormat != 0 {
		dst = append(dst, m.PayloadFormat)
	}
	if flags&msgContentType != 0 {
		dst = appendString(dst, m.ContentType)
	}
	if flags&msgResponseTopic != 0 {
		dst = appendString(dst, m.ResponseTopic)
	}
	if flags&msgCorrelationData != 0 {
		dst = appendBytes(dst, m.CorrelationData)
	}
	if flags&msgUserProperties != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(m.UserProperties)))
		for _, p := range m.UserProperties {
			dst = appendString(appendString(dst, p.Key), p.Value)
		}
	}
	if flags&msgExpiresAt != 0 {
		dst = binary.AppendVarint(dst, m.ExpiresAt)
	}
	if flags&msgUsername != 0 {
		dst = appendString(dst, m.Username)
	}
	return dst
}

func messageFlags(m *broker.Message) byte {
	var f byte
	set := func(cond bool, bit byte) {
		if cond {
			f |= bit
		}
	}
	set(m.Retain, msgRetain)
	set(m.PayloadFormat != 0, msgPayloadFormat)
	set(m.ContentType != "", msgContentType)
	set(m.ResponseTopic != "", msgResponseTopic)
	set(len(m.CorrelationData) > 0, msgCorrelationData)
	set(len(m.UserProperties) > 0, msgUserProperties)
	set(m.ExpiresAt != 0, msgExpiresAt)
	set(m.Username != "", msgUsername)
	return f
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// encodedSize estimates the encoding size of m, to size buffers.
func encodedSize(m *broker.Message) int {
	if m == nil {
		return 0
	}
	n := 32 + len(m.Topic) + len(m.Payload) + len(m.ClientID) + len(m.Username) +
		len(m.ContentType) + len(m.ResponseTopic) + len(m.CorrelationData)
	for _, p := range m.UserProperties {
		n += 4 + len(p.Key) + len(p.Value)
	}
	return n
}

// corruptf builds an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
