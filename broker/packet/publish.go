package packet

// DecodePublish decodes a PUBLISH body. QoS, DUP and Retain come from
// h.Flags. Topic and Payload reference body (no copy): a PUBLISH without
// properties decodes without allocating. Topic alias ranges and topic
// name rules (wildcards, empty topic without alias) are left to the broker.
func DecodePublish(h FixedHeader, body []byte, v Version, p *Publish) error {
	*p = Publish{}
	if err := expectHeader(h, PUBLISH); err != nil {
		return err
	}
	p.Dup = h.Flags&flagDup != 0
	p.QoS = h.Flags >> flagQoSShift & 3
	p.Retain = h.Flags&flagRetain != 0
	if p.Dup && p.QoS == 0 {
		return MalformedPacket
	}
	r := reader{buf: body}
	topic, err := r.readUTF8()
	if err != nil {
		return err
	}
	p.Topic = nilIfEmpty(topic)
	if p.QoS > 0 {
		if p.PacketID, err = r.readPacketID(); err != nil {
			return err
		}
	}
	if v == V5 {
		if err := decodeProperties(&r, ctxPublish, &p.Props); err != nil {
			return err
		}
	}
	p.Payload = nilIfEmpty(r.rest())
	return nil
}

// flags builds the fixed-header flags; DUP is written only with QoS > 0.
func (p *Publish) flags() byte {
	qos := p.QoS & 3
	f := qos << flagQoSShift
	if p.Dup && qos > 0 {
		f |= flagDup
	}
	if p.Retain {
		f |= flagRetain
	}
	return f
}

func (p *Publish) bodySize(v Version) int {
	n := prefixedSize(len(p.Topic)) + len(p.Payload)
	if p.QoS&3 > 0 {
		n += 2
	}
	if v == V5 {
		n += propertiesBlockSize(&p.Props, ctxPublish)
	}
	return n
}

// Size returns the encoded length of the PUBLISH in version v.
func (p *Publish) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the PUBLISH. QoS must be 0..2; PacketID is written only
// for QoS > 0 and properties only on v5.
func (p *Publish) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, PUBLISH, p.flags(), p.bodySize(v))
	dst = appendPrefixed(dst, p.Topic)
	if p.QoS&3 > 0 {
		dst = appendUint16(dst, p.PacketID)
	}
	if v == V5 {
		dst = appendProperties(dst, &p.Props, ctxPublish)
	}
	return append(dst, p.Payload...)
}

// DecodeAck decodes PUBACK/PUBREC/PUBREL/PUBCOMP; a.Type is h.Type. On v5
// a Remaining Length of 2 means Success without properties and 3 means a
// reason code without properties; on v3 the body is exactly the Packet
// Identifier.
func DecodeAck(h FixedHeader, body []byte, v Version, a *Ack) error {
	*a = Ack{}
	if h.Type < PUBACK || h.Type > PUBCOMP {
		return MalformedPacket
	}
	if err := checkFlags(h.Type, h.Flags); err != nil {
		return err
	}
	a.Type = h.Type
	r := reader{buf: body}
	var err error
	if a.PacketID, err = r.readPacketID(); err != nil {
		return err
	}
	if v == V5 && !r.empty() {
		if err := a.decodeReason(&r); err != nil {
			return err
		}
	}
	return r.expectEnd()
}

// decodeReason reads the v5 reason code and the optional properties.
func (a *Ack) decodeReason(r *reader) error {
	code, err := r.readByte()
	if err != nil {
		return err
	}
	a.ReasonCode = ReasonCode(code)
	if !ackCodes(a.Type).has(a.ReasonCode) {
		return ProtocolError
	}
	if r.empty() {
		return nil
	}
	return decodeProperties(r, ctxAck, &a.Props)
}

// ackFlags is the fixed-header flags of an ack type.
func ackFlags(t Type) byte {
	if t == PUBREL {
		return flagsPUBREL
	}
	return 0
}

func (p *Ack) bodySize(v Version) (body, props int) {
	if v != V5 {
		return 2, 0
	}
	props = propertiesSize(&p.Props, ctxAck)
	return 2 + reasonAndPropsSize(p.ReasonCode, props), props
}

// Size returns the encoded length of the ack in version v.
func (p *Ack) Size(v Version) int {
	body, _ := p.bodySize(v)
	return packetSize(body)
}

// Append appends the ack of type p.Type. v3 acks are 2 bytes; v5 acks
// use the shortest form (2 bytes for Success without properties).
func (p *Ack) Append(dst []byte, v Version) []byte {
	body, props := p.bodySize(v)
	dst = AppendFixedHeader(dst, p.Type, ackFlags(p.Type), body)
	dst = appendUint16(dst, p.PacketID)
	if v != V5 {
		return dst
	}
	return appendReasonAndProps(dst, p.ReasonCode, &p.Props, ctxAck, props)
}
