package packet

// This file holds the connection-control packets: PINGREQ, PINGRESP,
// DISCONNECT and AUTH.

// Pingreq, Pingresp are the body-less packets returned by Decode.
type (
	Pingreq  struct{}
	Pingresp struct{}
)

// decodeEmpty checks that a body-less packet has no body.
func decodeEmpty(body []byte, p any) (any, error) {
	if len(body) != 0 {
		return nil, MalformedPacket
	}
	return p, nil
}

// AppendPingreq appends a PINGREQ.
func AppendPingreq(dst []byte) []byte { return append(dst, byte(PINGREQ)<<4, 0) }

// AppendPingresp appends a PINGRESP.
func AppendPingresp(dst []byte) []byte { return append(dst, byte(PINGRESP)<<4, 0) }

// DecodeDisconnect decodes DISCONNECT. On v3 the body must be empty. On v5
// an empty body means Success, and a 1-byte body a reason code without
// properties.
func DecodeDisconnect(h FixedHeader, body []byte, v Version, d *Disconnect) error {
	*d = Disconnect{}
	if err := expectHeader(h, DISCONNECT); err != nil {
		return err
	}
	if v != V5 {
		return (&reader{buf: body}).expectEnd()
	}
	return decodeReasonAndProps(body, &disconnectCodes, ctxDisconnect, &d.ReasonCode, &d.Props)
}

func (p *Disconnect) bodySize(v Version) (body, props int) {
	if v != V5 {
		return 0, 0
	}
	props = propertiesSize(&p.Props, ctxDisconnect)
	return reasonAndPropsSize(p.ReasonCode, props), props
}

// Size returns the encoded length of the DISCONNECT in version v.
func (p *Disconnect) Size(v Version) int {
	body, _ := p.bodySize(v)
	return packetSize(body)
}

// Append appends the DISCONNECT: empty on v3; on v5 in the shortest form
// (empty for Success without properties).
func (p *Disconnect) Append(dst []byte, v Version) []byte {
	body, props := p.bodySize(v)
	dst = AppendFixedHeader(dst, DISCONNECT, 0, body)
	if v != V5 {
		return dst
	}
	return appendReasonAndProps(dst, p.ReasonCode, &p.Props, ctxDisconnect, props)
}

// DecodeAuth decodes AUTH, which exists only in v5 (MalformedPacket on v3,
// where type 15 is reserved). An empty body means Success; a reason code
// without property length is accepted too, as for DISCONNECT.
func DecodeAuth(h FixedHeader, body []byte, v Version, a *Auth) error {
	*a = Auth{}
	if err := expectHeader(h, AUTH); err != nil {
		return err
	}
	if v != V5 {
		return MalformedPacket
	}
	return decodeReasonAndProps(body, &authCodes, ctxAuth, &a.ReasonCode, &a.Props)
}

// bodySize returns the AUTH body size: empty for Success without
// properties, else the reason code and a property block (AUTH has no
// code-only form, unlike DISCONNECT and the acks).
func (p *Auth) bodySize() (body, props int) {
	props = propertiesSize(&p.Props, ctxAuth)
	if props == 0 && p.ReasonCode == Success {
		return 0, 0
	}
	return 1 + varintSize(props) + props, props
}

// Size returns the encoded length of the AUTH. AUTH exists only in v5: v is
// ignored and the v5 layout is always used.
func (p *Auth) Size(v Version) int {
	body, _ := p.bodySize()
	return packetSize(body)
}

// Append appends the AUTH in the v5 layout (v is ignored): empty for
// Success without properties, else reason code and properties.
func (p *Auth) Append(dst []byte, v Version) []byte {
	body, props := p.bodySize()
	dst = AppendFixedHeader(dst, AUTH, 0, body)
	if body == 0 {
		return dst
	}
	return appendPropertiesSized(append(dst, byte(p.ReasonCode)), &p.Props, ctxAuth, props)
}
