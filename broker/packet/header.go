package packet

// flagsPUBREL is the fixed-header flag nibble required by PUBREL, SUBSCRIBE
// and UNSUBSCRIBE.
const flagsPUBREL = 0x02

// Fixed-header flag bits of PUBLISH.
const (
	flagRetain   = 0x01
	flagQoSShift = 1
	flagDup      = 0x08
)

// DecodeFixedHeader reads the fixed header at the start of b and returns it
// with its encoded length n. It returns ErrShort while b does not hold the
// whole header, and MalformedPacket for reserved type 0, invalid flags
// (including PUBLISH QoS 3) or a fifth Remaining Length byte. Flags are
// checked as soon as the first byte is there. It does not check that the
// body is present.
func DecodeFixedHeader(b []byte) (h FixedHeader, n int, err error) {
	if len(b) == 0 {
		return FixedHeader{}, 0, ErrShort
	}
	t, flags := Type(b[0]>>4), b[0]&0x0F
	if err := checkFlags(t, flags); err != nil {
		return FixedHeader{}, 0, err
	}
	remaining, size, err := decodeVarint(b[1:])
	if err == errVarintShort {
		return FixedHeader{}, 0, ErrShort
	}
	if err != nil {
		return FixedHeader{}, 0, err
	}
	return FixedHeader{Type: t, Flags: flags, Remaining: remaining}, 1 + size, nil
}

// AppendFixedHeader appends a fixed header.
func AppendFixedHeader(dst []byte, t Type, flags byte, remaining int) []byte {
	dst = append(dst, byte(t)<<4|flags&0x0F)
	return appendVarint(dst, remaining)
}

// checkFlags validates the flag nibble of packet type t.
func checkFlags(t Type, flags byte) error {
	switch t {
	case 0:
		return MalformedPacket
	case PUBLISH:
		if flags>>flagQoSShift&3 == 3 {
			return MalformedPacket
		}
		return nil
	case PUBREL, SUBSCRIBE, UNSUBSCRIBE:
		if flags != flagsPUBREL {
			return MalformedPacket
		}
		return nil
	default:
		if flags != 0 || t > AUTH {
			return MalformedPacket
		}
		return nil
	}
}

// expectHeader checks that h is a valid header of type t.
func expectHeader(h FixedHeader, t Type) error {
	if h.Type != t {
		return MalformedPacket
	}
	return checkFlags(h.Type, h.Flags)
}

// Decode decodes any packet into a new value: *Connect, *Connack, *Publish,
// *Ack (PUBACK, PUBREC, PUBREL, PUBCOMP), *Subscribe, *Suback,
// *Unsubscribe, *Unsuback, Pingreq{}, Pingresp{}, *Disconnect or *Auth.
// body must be exactly the h.Remaining bytes after the fixed header; a
// returned *Publish references it (see DecodePublish).
//
// On error it returns a nil packet, except for a CONNECT refused with
// UnsupportedProtocolVersion: then the *Connect is returned with
// ProtocolName and Version filled, so the caller can pick the CONNACK
// format.
func Decode(h FixedHeader, body []byte, v Version) (any, error) {
	if err := checkFlags(h.Type, h.Flags); err != nil {
		return nil, err
	}
	switch h.Type {
	case CONNECT:
		return decodeConnectPacket(body)
	case CONNACK:
		return decodeNew(h, body, v, DecodeConnack)
	case PUBLISH:
		return decodeNew(h, body, v, DecodePublish)
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		return decodeNew(h, body, v, DecodeAck)
	case SUBSCRIBE:
		return decodeNew(h, body, v, DecodeSubscribe)
	case SUBACK:
		return decodeNew(h, body, v, DecodeSuback)
	case UNSUBSCRIBE:
		return decodeNew(h, body, v, DecodeUnsubscribe)
	case UNSUBACK:
		return decodeNew(h, body, v, DecodeUnsuback)
	case PINGREQ:
		return decodeEmpty(body, Pingreq{})
	case PINGRESP:
		return decodeEmpty(body, Pingresp{})
	case DISCONNECT:
		return decodeNew(h, body, v, DecodeDisconnect)
	case AUTH:
		return decodeNew(h, body, v, DecodeAuth)
	}
	return nil, MalformedPacket
}

// decodeNew decodes body into a new T with the given decoder.
func decodeNew[T any](h FixedHeader, body []byte, v Version,
	decode func(FixedHeader, []byte, Version, *T) error) (any, error) {
	p := new(T)
	if err := decode(h, body, v, p); err != nil {
		return nil, err
	}
	return p, nil
}

func decodeConnectPacket(body []byte) (any, error) {
	c := new(Connect)
	err := DecodeConnect(body, c)
	switch err {
	case nil:
		return c, nil
	case UnsupportedProtocolVersion:
		return c, err
	default:
		return nil, err
	}
}
