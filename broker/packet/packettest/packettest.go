// Package packettest holds wire fixtures shared by the codec's tests and
// the broker's: byte strings of real MQTT packets, valid and invalid, with
// the packet each decodes to or the ReasonCode it is refused with. It also
// has helpers that act on a whole packet (fixed header included) so tests
// can play a client.
//
// Fixture names are stable and descriptive ("v5/publish/qos1-all-properties"):
// the broker's tests look fixtures up by name with Get.
package packettest

import (
	"errors"
	"fmt"

	"gantry/broker/packet"
)

// Fixture is one wire packet and its expected decoding.
type Fixture struct {
	Name    string
	Version packet.Version // the session version the packet is read in
	Wire    []byte         // exactly one whole packet, fixed header included
	Packet  any            // what Decode returns; nil when Err is set
	Err     packet.ReasonCode

	// Noncanonical marks a valid packet that the encoder writes in a
	// different (shorter or minimal) form, so encode(decode(Wire)) differs
	// from Wire while decode(encode(Packet)) still equals Packet.
	Noncanonical bool
}

// Valid reports whether the fixture decodes without error.
func (f Fixture) Valid() bool { return f.Err == 0 }

// Get returns the fixture named name; it panics when there is none, which
// in a test means a typo.
func Get(name string) Fixture {
	for _, f := range Fixtures {
		if f.Name == name {
			return f
		}
	}
	panic(fmt.Sprintf("packettest: no fixture %q", name))
}

// DecodeWire decodes wire, which must hold exactly one whole packet, as
// read in a session of version v. A short fixed header, a body shorter or
// longer than the Remaining Length is MalformedPacket: the stream ended
// inside the packet, or the fixture holds more than one packet. For a
// CONNECT refused with UnsupportedProtocolVersion it returns the partially
// decoded *packet.Connect with the error, like packet.Decode.
func DecodeWire(wire []byte, v packet.Version) (any, error) {
	h, n, err := packet.DecodeFixedHeader(wire)
	if errors.Is(err, packet.ErrShort) {
		return nil, packet.MalformedPacket
	}
	if err != nil {
		return nil, err
	}
	if len(wire)-n != h.Remaining {
		return nil, packet.MalformedPacket
	}
	return packet.Decode(h, wire[n:], v)
}

// Append appends any packet value that packet.Decode returns (pointer or,
// for the body-less packets, value) in version v. A Connect is written in
// its own Version. It panics on a type that is not a packet.
func Append(dst []byte, p any, v packet.Version) []byte {
	switch p := p.(type) {
	case *packet.Connect:
		return p.Append(dst)
	case *packet.Connack:
		return p.Append(dst, v)
	case *packet.Publish:
		return p.Append(dst, v)
	case *packet.Ack:
		return p.Append(dst, v)
	case *packet.Subscribe:
		return p.Append(dst, v)
	case *packet.Suback:
		return p.Append(dst, v)
	case *packet.Unsubscribe:
		return p.Append(dst, v)
	case *packet.Unsuback:
		return p.Append(dst, v)
	case packet.Pingreq:
		return packet.AppendPingreq(dst)
	case packet.Pingresp:
		return packet.AppendPingresp(dst)
	case *packet.Disconnect:
		return p.Append(dst, v)
	case *packet.Auth:
		return p.Append(dst, v)
	}
	panic(fmt.Sprintf("packettest: %T is not a packet", p))
}

// Encode returns p encoded in version v (see Append).
func Encode(p any, v packet.Version) []byte { return Append(nil, p, v) }

// Size returns the encoded size of p in version v, as its Size method
// reports it. It panics on a type that is not a packet.
func Size(p any, v packet.Version) int {
	switch p := p.(type) {
	case *packet.Connect:
		return p.Size()
	case *packet.Connack:
		return p.Size(v)
	case *packet.Publish:
		return p.Size(v)
	case *packet.Ack:
		return p.Size(v)
	case *packet.Subscribe:
		return p.Size(v)
	case *packet.Suback:
		return p.Size(v)
	case *packet.Unsubscribe:
		return p.Size(v)
	case *packet.Unsuback:
		return p.Size(v)
	case packet.Pingreq, packet.Pingresp:
		return 2
	case *packet.Disconnect:
		return p.Size(v)
	case *packet.Auth:
		return p.Size(v)
	}
	panic(fmt.Sprintf("packettest: %T is not a packet", p))
}

// PacketType returns the control packet type of a decoded packet value.
func PacketType(p any) packet.Type {
	switch p := p.(type) {
	case *packet.Connect:
		return packet.CONNECT
	case *packet.Connack:
		return packet.CONNACK
	case *packet.Publish:
		return packet.PUBLISH
	case *packet.Ack:
		return p.Type
	case *packet.Subscribe:
		return packet.SUBSCRIBE
	case *packet.Suback:
		return packet.SUBACK
	case *packet.Unsubscribe:
		return packet.UNSUBSCRIBE
	case *packet.Unsuback:
		return packet.UNSUBACK
	case packet.Pingreq:
		return packet.PINGREQ
	case packet.Pingresp:
		return packet.PINGRESP
	case *packet.Disconnect:
		return packet.DISCONNECT
	case *packet.Auth:
		return packet.AUTH
	}
	return 0
}

// Wire building blocks, independent of the codec under test.

// cat concatenates byte strings.
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// bs is a literal byte string.
func bs(b ...byte) []byte { return b }

// frame is a whole packet: first byte, Remaining Length, body.
func frame(first byte, body ...[]byte) []byte {
	b := cat(body...)
	return cat(bs(first), vbi(len(b)), b)
}

// str is a length-prefixed string or binary.
func str(s string) []byte { return cat(u16(uint16(len(s))), []byte(s)) }

func u16(v uint16) []byte { return bs(byte(v>>8), byte(v)) }

func u32(v uint32) []byte { return bs(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)) }

// vbi is a minimal variable byte integer.
func vbi(v int) []byte {
	var out []byte
	for v >= 0x80 {
		out = append(out, byte(v)|0x80)
		v >>= 7
	}
	return append(out, byte(v))
}

// props is a property block: its length, then the properties.
func props(p ...[]byte) []byte {
	b := cat(p...)
	return cat(vbi(len(b)), b)
}

// prop is one property: identifier and value.
func prop(id packet.PropID, value ...[]byte) []byte {
	return cat(bs(byte(id)), cat(value...))
}

// userProp is a User Property.
func userProp(k, v string) []byte { return prop(packet.PropUserProperty, str(k), str(v)) }

// has builds a Properties.Has mask.
func has(ids ...packet.PropID) uint64 {
	var m uint64
	for _, id := range ids {
		m |= 1 << id
	}
	return m
}
