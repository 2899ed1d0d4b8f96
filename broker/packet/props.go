package packet

// decodeProperties reads a v5 property block (length, then properties)
// allowed in ctx into p.
func decodeProperties(r *reader, ctx propContext, p *Properties) error {
	n, err := r.readVarint()
	if err != nil {
		return err
	}
	block, err := r.take(n)
	if err != nil {
		return err
	}
	br := reader{buf: block}
	for !br.empty() {
		if err := decodeProperty(&br, ctx, p); err != nil {
			return err
		}
	}
	if p.IsSet(PropAuthData) && !p.IsSet(PropAuthMethod) {
		return ProtocolError
	}
	return nil
}

// decodeProperty reads one identifier and value.
func decodeProperty(r *reader, ctx propContext, p *Properties) error {
	b, err := r.readByte()
	if err != nil {
		return err
	}
	id := PropID(b)
	spec, ok := lookupProp(id, ctx)
	if !ok {
		return MalformedPacket
	}
	if p.IsSet(id) && !repeatable(id, ctx) {
		return ProtocolError
	}
	p.Set(id)
	switch spec.kind {
	case kindByte, kindUint16, kindUint32, kindVarint:
		return decodeNumericProperty(r, id, spec, p)
	case kindString:
		s, err := r.readString()
		*p.stringField(id) = s
		return err
	case kindBinary:
		data, err := r.readBinary()
		*p.binaryField(id) = cloneBytes(data)
		return err
	default: // kindPair
		return decodeUserProperty(r, p)
	}
}

// decodeNumericProperty reads a byte, integer or variable byte integer
// property and checks its range.
func decodeNumericProperty(r *reader, id PropID, spec propSpec, p *Properties) error {
	var v uint32
	var err error
	switch spec.kind {
	case kindByte:
		var b byte
		b, err = r.readByte()
		v = uint32(b)
	case kindUint16:
		var u uint16
		u, err = r.readUint16()
		v = uint32(u)
	case kindUint32:
		v, err = r.readUint32()
	default: // kindVarint
		var n int
		n, err = r.readVarint()
		v = uint32(n)
	}
	if err != nil {
		return err
	}
	if err := spec.checkRange(v); err != nil {
		return err
	}
	switch spec.kind {
	case kindByte:
		*p.byteField(id) = byte(v)
	case kindUint16:
		*p.uint16Field(id) = uint16(v)
	case kindUint32:
		*p.uint32Field(id) = v
	default:
		p.SubscriptionIDs = append(p.SubscriptionIDs, v)
	}
	return nil
}

func decodeUserProperty(r *reader, p *Properties) error {
	key, err := r.readString()
	if err != nil {
		return err
	}
	value, err := r.readString()
	if err != nil {
		return err
	}
	p.UserProperties = append(p.UserProperties, UserProperty{Key: key, Value: value})
	return nil
}

// propertiesSize is the encoded size of the properties of p allowed in
// ctx, without the length prefix.
func propertiesSize(p *Properties, ctx propContext) int {
	if p.isEmpty() {
		return 0
	}
	n := 0
	for _, id := range allowedProps[ctx] {
		n += propertySize(p, id)
	}
	return n
}

// propertiesBlockSize is propertiesSize plus its length prefix.
func propertiesBlockSize(p *Properties, ctx propContext) int {
	n := propertiesSize(p, ctx)
	return varintSize(n) + n
}

// appendProperties appends the length prefix and the properties of p
// allowed in ctx.
func appendProperties(dst []byte, p *Properties, ctx propContext) []byte {
	return appendPropertiesSized(dst, p, ctx, propertiesSize(p, ctx))
}

// appendPropertiesSized is appendProperties with the size already known.
func appendPropertiesSized(dst []byte, p *Properties, ctx propContext, size int) []byte {
	dst = appendVarint(dst, size)
	if size == 0 {
		return dst
	}
	for _, id := range allowedProps[ctx] {
		dst = appendProperty(dst, p, id)
	}
	return dst
}

// isEmpty reports whether p holds no property at all, so the encoder can
// skip the per-identifier walk.
func (p *Properties) isEmpty() bool {
	return p.Has == 0 && len(p.SubscriptionIDs) == 0 && len(p.UserProperties) == 0 &&
		len(p.CorrelationData) == 0 && len(p.AuthData) == 0 &&
		p.ContentType == "" && p.ResponseTopic == "" && p.AssignedClientID == "" &&
		p.AuthMethod == "" && p.ResponseInfo == "" && p.ServerReference == "" && p.ReasonString == ""
}

// propertySize is the encoded size of property id of p (0 when absent).
func propertySize(p *Properties, id PropID) int {
	switch propSpecs[id].kind {
	case kindByte, kindUint16, kindUint32:
		if !p.IsSet(id) {
			return 0
		}
		return 1 + fixedPropertyWidth(propSpecs[id].kind)
	case kindString:
		if s := *p.stringField(id); p.IsSet(id) || s != "" {
			return 1 + prefixedSize(len(s))
		}
	case kindBinary:
		if b := *p.binaryField(id); p.IsSet(id) || len(b) != 0 {
			return 1 + prefixedSize(len(b))
		}
	case kindVarint:
		n := 0
		for _, sid := range p.SubscriptionIDs {
			n += 1 + varintSize(int(sid))
		}
		return n
	case kindPair:
		n := 0
		for _, up := range p.UserProperties {
			n += 1 + prefixedSize(len(up.Key)) + prefixedSize(len(up.Value))
		}
		return n
	}
	return 0
}

func fixedPropertyWidth(k propKind) int {
	switch k {
	case kindByte:
		return 1
	case kindUint16:
		return 2
	default:
		return 4
	}
}

// appendProperty appends property id of p, if present.
func appendProperty(dst []byte, p *Properties, id PropID) []byte {
	switch propSpecs[id].kind {
	case kindByte, kindUint16, kindUint32:
		if p.IsSet(id) {
			dst = appendFixedProperty(dst, p, id)
		}
	case kindString:
		if s := *p.stringField(id); p.IsSet(id) || s != "" {
			dst = appendPrefixed(append(dst, byte(id)), s)
		}
	case kindBinary:
		if b := *p.binaryField(id); p.IsSet(id) || len(b) != 0 {
			dst = appendPrefixed(append(dst, byte(id)), b)
		}
	case kindVarint:
		for _, sid := range p.SubscriptionIDs {
			dst = appendVarint(append(dst, byte(id)), int(sid))
		}
	case kindPair:
		for _, up := range p.UserProperties {
			dst = appendPrefixed(append(dst, byte(id)), up.Key)
			dst = appendPrefixed(dst, up.Value)
		}
	}
	return dst
}

func appendFixedProperty(dst []byte, p *Properties, id PropID) []byte {
	dst = append(dst, byte(id))
	switch propSpecs[id].kind {
	case kindByte:
		return append(dst, *p.byteField(id))
	case kindUint16:
		return appendUint16(dst, *p.uint16Field(id))
	default:
		return appendUint32(dst, *p.uint32Field(id))
	}
}
