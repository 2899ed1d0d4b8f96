package packet

// Subscription option bits (v5; v3 uses only the QoS bits).
const (
	optQoSMask          = 0x03
	optNoLocal          = 0x04
	optRetainAsPub      = 0x08
	optRetainHandlShift = 4
	optReservedV5       = 0xC0
	optReservedV3       = 0xFC
)

// DecodeSubscribe decodes SUBSCRIBE. It needs at least one filter
// (ProtocolError); options with reserved bits, QoS 3 or Retain Handling 3
// are MalformedPacket. Empty filters are decoded: the broker rejects them.
func DecodeSubscribe(h FixedHeader, body []byte, v Version, s *Subscribe) error {
	*s = Subscribe{}
	if err := expectHeader(h, SUBSCRIBE); err != nil {
		return err
	}
	r := reader{buf: body}
	var err error
	if s.PacketID, err = r.readPacketID(); err != nil {
		return err
	}
	if v == V5 {
		if err := decodeProperties(&r, ctxSubscribe, &s.Props); err != nil {
			return err
		}
	}
	for !r.empty() {
		sub, err := decodeSubscription(&r, v)
		if err != nil {
			return err
		}
		s.Subscriptions = append(s.Subscriptions, sub)
	}
	if len(s.Subscriptions) == 0 {
		return ProtocolError
	}
	return nil
}

func decodeSubscription(r *reader, v Version) (Subscription, error) {
	filter, err := r.readString()
	if err != nil {
		return Subscription{}, err
	}
	b, err := r.readByte()
	if err != nil {
		return Subscription{}, err
	}
	opts, err := decodeSubOptions(b, v)
	return Subscription{Filter: filter, Options: opts}, err
}

func decodeSubOptions(b byte, v Version) (SubOptions, error) {
	reserved := byte(optReservedV3)
	if v == V5 {
		reserved = optReservedV5
	}
	o := SubOptions{
		QoS:               b & optQoSMask,
		NoLocal:           b&optNoLocal != 0,
		RetainAsPublished: b&optRetainAsPub != 0,
		RetainHandling:    b >> optRetainHandlShift & 3,
	}
	if b&reserved != 0 || o.QoS == 3 || o.RetainHandling == 3 {
		return SubOptions{}, MalformedPacket
	}
	return o, nil
}

// optionsByte encodes o; v3 carries only the QoS.
func (o SubOptions) optionsByte(v Version) byte {
	b := o.QoS & optQoSMask
	if v != V5 {
		return b
	}
	if o.NoLocal {
		b |= optNoLocal
	}
	if o.RetainAsPublished {
		b |= optRetainAsPub
	}
	return b | o.RetainHandling&3<<optRetainHandlShift
}

func (p *Subscribe) bodySize(v Version) int {
	n := 2
	if v == V5 {
		n += propertiesBlockSize(&p.Props, ctxSubscribe)
	}
	for _, sub := range p.Subscriptions {
		n += prefixedSize(len(sub.Filter)) + 1
	}
	return n
}

// Size returns the encoded length of the SUBSCRIBE in version v.
func (p *Subscribe) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the SUBSCRIBE (for clients and tests).
func (p *Subscribe) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, SUBSCRIBE, flagsPUBREL, p.bodySize(v))
	dst = appendUint16(dst, p.PacketID)
	if v == V5 {
		dst = appendProperties(dst, &p.Props, ctxSubscribe)
	}
	for _, sub := range p.Subscriptions {
		dst = appendPrefixed(dst, sub.Filter)
		dst = append(dst, sub.Options.optionsByte(v))
	}
	return dst
}

// DecodeSuback decodes a SUBACK (for clients and tests). It needs at least
// one reason code, each valid for SUBACK in v (v3: 0, 1, 2 or 0x80).
func DecodeSuback(h FixedHeader, body []byte, v Version, p *Suback) error {
	*p = Suback{}
	if err := expectHeader(h, SUBACK); err != nil {
		return err
	}
	allowed := &subackCodesV3
	if v == V5 {
		allowed = &subackCodes
	}
	return decodeAckList(body, v, ctxSuback, allowed, &p.PacketID, &p.Props, &p.ReasonCodes)
}

// decodeAckList decodes the shared SUBACK/UNSUBACK v5 layout: Packet
// Identifier, properties (v5 only) and at least one reason code.
func decodeAckList(body []byte, v Version, ctx propContext, allowed *codeSet,
	id *uint16, props *Properties, codes *[]ReasonCode) error {
	r := reader{buf: body}
	var err error
	if *id, err = r.readPacketID(); err != nil {
		return err
	}
	if v == V5 {
		if err := decodeProperties(&r, ctx, props); err != nil {
			return err
		}
	}
	list := r.rest()
	if len(list) == 0 {
		return ProtocolError
	}
	*codes = make([]ReasonCode, len(list))
	for i, b := range list {
		if !allowed.has(ReasonCode(b)) {
			return ProtocolError
		}
		(*codes)[i] = ReasonCode(b)
	}
	return nil
}

func (p *Suback) bodySize(v Version) int {
	n := 2 + len(p.ReasonCodes)
	if v == V5 {
		n += propertiesBlockSize(&p.Props, ctxSuback)
	}
	return n
}

// Size returns the encoded length of the SUBACK in version v.
func (p *Suback) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the SUBACK. On v3 granted QoS 0..2 are written as is and
// any code >= 0x80 as 0x80.
func (p *Suback) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, SUBACK, 0, p.bodySize(v))
	dst = appendUint16(dst, p.PacketID)
	if v == V5 {
		dst = appendProperties(dst, &p.Props, ctxSuback)
		for _, c := range p.ReasonCodes {
			dst = append(dst, byte(c))
		}
		return dst
	}
	for _, c := range p.ReasonCodes {
		dst = append(dst, v3SubackCode(c))
	}
	return dst
}

// DecodeUnsubscribe decodes UNSUBSCRIBE. It needs at least one filter
// (ProtocolError); empty filters are decoded.
func DecodeUnsubscribe(h FixedHeader, body []byte, v Version, u *Unsubscribe) error {
	*u = Unsubscribe{}
	if err := expectHeader(h, UNSUBSCRIBE); err != nil {
		return err
	}
	r := reader{buf: body}
	var err error
	if u.PacketID, err = r.readPacketID(); err != nil {
		return err
	}
	if v == V5 {
		if err := decodeProperties(&r, ctxUnsubscribe, &u.Props); err != nil {
			return err
		}
	}
	for !r.empty() {
		filter, err := r.readString()
		if err != nil {
			return err
		}
		u.Filters = append(u.Filters, filter)
	}
	if len(u.Filters) == 0 {
		return ProtocolError
	}
	return nil
}

func (p *Unsubscribe) bodySize(v Version) int {
	n := 2
	if v == V5 {
		n += propertiesBlockSize(&p.Props, ctxUnsubscribe)
	}
	for _, f := range p.Filters {
		n += prefixedSize(len(f))
	}
	return n
}

// Size returns the encoded length of the UNSUBSCRIBE in version v.
func (p *Unsubscribe) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the UNSUBSCRIBE (for clients and tests).
func (p *Unsubscribe) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, UNSUBSCRIBE, flagsPUBREL, p.bodySize(v))
	dst = appendUint16(dst, p.PacketID)
	if v == V5 {
		dst = appendProperties(dst, &p.Props, ctxUnsubscribe)
	}
	for _, f := range p.Filters {
		dst = appendPrefixed(dst, f)
	}
	return dst
}

// DecodeUnsuback decodes an UNSUBACK (for clients and tests). v3: exactly
// the Packet Identifier; v5: properties and at least one valid reason code.
func DecodeUnsuback(h FixedHeader, body []byte, v Version, p *Unsuback) error {
	*p = Unsuback{}
	if err := expectHeader(h, UNSUBACK); err != nil {
		return err
	}
	if v == V5 {
		return decodeAckList(body, v, ctxUnsuback, &unsubackCodes, &p.PacketID, &p.Props, &p.ReasonCodes)
	}
	r := reader{buf: body}
	var err error
	if p.PacketID, err = r.readPacketID(); err != nil {
		return err
	}
	return r.expectEnd()
}

func (p *Unsuback) bodySize(v Version) int {
	if v != V5 {
		return 2
	}
	return 2 + propertiesBlockSize(&p.Props, ctxUnsuback) + len(p.ReasonCodes)
}

// Size returns the encoded length of the UNSUBACK in version v.
func (p *Unsuback) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the UNSUBACK; v3 carries no reason codes.
func (p *Unsuback) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, UNSUBACK, 0, p.bodySize(v))
	dst = appendUint16(dst, p.PacketID)
	if v != V5 {
		return dst
	}
	dst = appendProperties(dst, &p.Props, ctxUnsuback)
	for _, c := range p.ReasonCodes {
		dst = append(dst, byte(c))
	}
	return dst
}
