package packet

// Protocol names carried in CONNECT.
const (
	protocolMQTT   = "MQTT"   // 3.1.1 and 5.0
	protocolMQIsdp = "MQIsdp" // 3.1
)

// CONNECT flag bits.
const (
	connectReserved   = 0x01
	connectCleanStart = 0x02
	connectWill       = 0x04
	connectWillQoS    = 3 // shift of the 2-bit Will QoS
	connectWillRetain = 0x20
	connectPassword   = 0x40
	connectUsername   = 0x80
)

// DecodeConnect decodes a CONNECT body; the version comes from the packet.
// An unknown protocol name or level yields UnsupportedProtocolVersion with
// c.ProtocolName and c.Version filled (c.Version holds the level byte as
// sent). ClientID may be empty; Password and WillPayload are owned copies.
func DecodeConnect(body []byte, c *Connect) error {
	*c = Connect{}
	r := reader{buf: body}
	if err := c.decodeProtocol(&r); err != nil {
		return err
	}
	flags, err := r.readByte()
	if err != nil {
		return err
	}
	if err := c.setFlags(flags); err != nil {
		return err
	}
	if c.KeepAlive, err = r.readUint16(); err != nil {
		return err
	}
	if c.Version == V5 {
		if err := decodeProperties(&r, ctxConnect, &c.Props); err != nil {
			return err
		}
	}
	if c.ClientID, err = r.readString(); err != nil {
		return err
	}
	if err := c.decodePayloadRest(&r); err != nil {
		return err
	}
	return r.expectEnd()
}

// decodeProtocol reads the protocol name and level and checks that they
// name a supported version.
func (c *Connect) decodeProtocol(r *reader) error {
	name, err := r.readUTF8()
	if err != nil {
		return err
	}
	switch string(name) { // no allocation: the compiler compares in place
	case protocolMQTT:
		c.ProtocolName = protocolMQTT
	case protocolMQIsdp:
		c.ProtocolName = protocolMQIsdp
	default:
		c.ProtocolName = string(name)
	}
	level, err := r.readByte()
	if err != nil {
		return err
	}
	c.Version = Version(level)
	if !supportedProtocol(c.ProtocolName, c.Version) {
		return UnsupportedProtocolVersion
	}
	return nil
}

func supportedProtocol(name string, v Version) bool {
	switch name {
	case protocolMQTT:
		return v == V311 || v == V5
	case protocolMQIsdp:
		return v == V31
	}
	return false
}

// setFlags applies and checks the CONNECT flags byte.
func (c *Connect) setFlags(flags byte) error {
	if flags&connectReserved != 0 {
		return MalformedPacket
	}
	c.CleanStart = flags&connectCleanStart != 0
	c.WillFlag = flags&connectWill != 0
	c.WillQoS = flags >> connectWillQoS & 3
	c.WillRetain = flags&connectWillRetain != 0
	c.PasswordFlag = flags&connectPassword != 0
	c.UsernameFlag = flags&connectUsername != 0
	if c.WillQoS == 3 || !c.WillFlag && (c.WillQoS != 0 || c.WillRetain) {
		return MalformedPacket
	}
	if c.Version != V5 && c.PasswordFlag && !c.UsernameFlag {
		return MalformedPacket
	}
	return nil
}

// decodePayloadRest reads the will, user name and password.
func (c *Connect) decodePayloadRest(r *reader) error {
	var err error
	if c.WillFlag {
		if err := c.decodeWill(r); err != nil {
			return err
		}
	}
	if c.UsernameFlag {
		if c.Username, err = r.readString(); err != nil {
			return err
		}
	}
	if c.PasswordFlag {
		password, err := r.readBinary()
		if err != nil {
			return err
		}
		c.Password = cloneBytes(password)
	}
	return nil
}

func (c *Connect) decodeWill(r *reader) error {
	var err error
	if c.Version == V5 {
		if err := decodeProperties(r, ctxWill, &c.WillProps); err != nil {
			return err
		}
	}
	if c.WillTopic, err = r.readString(); err != nil {
		return err
	}
	payload, err := r.readBinary()
	if err != nil {
		return err
	}
	c.WillPayload = cloneBytes(payload)
	return nil
}

// protocolName is the name to encode: ProtocolName, or the one matching
// Version when it is empty.
func (p *Connect) protocolName() string {
	switch {
	case p.ProtocolName != "":
		return p.ProtocolName
	case p.Version == V31:
		return protocolMQIsdp
	default:
		return protocolMQTT
	}
}

// flagsByte builds the CONNECT flags; Will QoS and Retain are written only
// with the Will flag.
func (p *Connect) flagsByte() byte {
	var f byte
	if p.CleanStart {
		f |= connectCleanStart
	}
	if p.WillFlag {
		f |= connectWill | p.WillQoS&3<<connectWillQoS
		if p.WillRetain {
			f |= connectWillRetain
		}
	}
	if p.PasswordFlag {
		f |= connectPassword
	}
	if p.UsernameFlag {
		f |= connectUsername
	}
	return f
}

func (p *Connect) bodySize() int {
	n := prefixedSize(len(p.protocolName())) + 1 + 1 + 2 + prefixedSize(len(p.ClientID))
	if p.Version == V5 {
		n += propertiesBlockSize(&p.Props, ctxConnect)
	}
	if p.WillFlag {
		if p.Version == V5 {
			n += propertiesBlockSize(&p.WillProps, ctxWill)
		}
		n += prefixedSize(len(p.WillTopic)) + prefixedSize(len(p.WillPayload))
	}
	if p.UsernameFlag {
		n += prefixedSize(len(p.Username))
	}
	if p.PasswordFlag {
		n += prefixedSize(len(p.Password))
	}
	return n
}

// Size returns the encoded length of the CONNECT in p.Version.
func (p *Connect) Size() int { return packetSize(p.bodySize()) }

// Append appends the CONNECT in the format of p.Version. The protocol name
// is ProtocolName, or "MQIsdp"/"MQTT" from Version when it is empty. The
// Will, Username and Password fields are written only when their flag is
// set.
func (p *Connect) Append(dst []byte) []byte {
	dst = AppendFixedHeader(dst, CONNECT, 0, p.bodySize())
	dst = appendPrefixed(dst, p.protocolName())
	dst = append(dst, byte(p.Version), p.flagsByte())
	dst = appendUint16(dst, p.KeepAlive)
	if p.Version == V5 {
		dst = appendProperties(dst, &p.Props, ctxConnect)
	}
	dst = appendPrefixed(dst, p.ClientID)
	if p.WillFlag {
		if p.Version == V5 {
			dst = appendProperties(dst, &p.WillProps, ctxWill)
		}
		dst = appendPrefixed(dst, p.WillTopic)
		dst = appendPrefixed(dst, p.WillPayload)
	}
	if p.UsernameFlag {
		dst = appendPrefixed(dst, p.Username)
	}
	if p.PasswordFlag {
		dst = appendPrefixed(dst, p.Password)
	}
	return dst
}

// connackSessionPresent is the only defined bit of the CONNACK flags.
const connackSessionPresent = 0x01

// DecodeConnack decodes a CONNACK (used by clients and tests). A v3 return
// code is mapped with ConnackCodeFromV3.
func DecodeConnack(h FixedHeader, body []byte, v Version, p *Connack) error {
	*p = Connack{}
	if err := expectHeader(h, CONNACK); err != nil {
		return err
	}
	r := reader{buf: body}
	flags, err := r.readByte()
	if err != nil {
		return err
	}
	if flags&^connackSessionPresent != 0 {
		return MalformedPacket
	}
	p.SessionPresent = flags&connackSessionPresent != 0
	if err := p.decodeCode(&r, v); err != nil {
		return err
	}
	if v == V5 {
		if err := decodeProperties(&r, ctxConnack, &p.Props); err != nil {
			return err
		}
	}
	return r.expectEnd()
}

func (p *Connack) decodeCode(r *reader, v Version) error {
	code, err := r.readByte()
	if err != nil {
		return err
	}
	ok := true
	if v == V5 {
		p.ReasonCode, ok = ReasonCode(code), connackCodes.has(ReasonCode(code))
	} else {
		p.ReasonCode, ok = ConnackCodeFromV3(code)
	}
	if !ok || p.SessionPresent && p.ReasonCode != Success {
		return ProtocolError
	}
	return nil
}

func (p *Connack) bodySize(v Version) int {
	if v != V5 {
		return 2
	}
	return 2 + propertiesBlockSize(&p.Props, ctxConnack)
}

// Size returns the encoded length of the CONNACK in version v.
func (p *Connack) Size(v Version) int { return packetSize(p.bodySize(v)) }

// Append appends the CONNACK. On v3 it writes V3ConnackCode(ReasonCode)
// and no properties. Session Present is written only with Success, and
// never on v3.1, where that byte is reserved.
func (p *Connack) Append(dst []byte, v Version) []byte {
	dst = AppendFixedHeader(dst, CONNACK, 0, p.bodySize(v))
	var flags byte
	if p.SessionPresent && p.ReasonCode == Success && v != V31 {
		flags = connackSessionPresent
	}
	if v != V5 {
		return append(dst, flags, V3ConnackCode(p.ReasonCode))
	}
	dst = append(dst, flags, byte(p.ReasonCode))
	return appendProperties(dst, &p.Props, ctxConnack)
}
