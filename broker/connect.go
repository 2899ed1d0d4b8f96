package broker

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"time"

	"gantry/broker/packet"
	"gantry/broker/topic"
)

// handshake reads CONNECT, authenticates, attaches the session, queues
// CONNACK and starts the writer. On refusal it sends the refusing CONNACK
// itself and returns the reason.
func (c *conn) handshake() error {
	c.nc.SetReadDeadline(time.Now().Add(c.srv.opts.ConnectTimeout))
	if c.isStopped() {
		return c.serverReason()
	}
	h, body, err := c.readPacket()
	if err != nil {
		return err
	}
	if h.Type != packet.CONNECT {
		return packet.ProtocolError
	}
	var cp packet.Connect
	if err := packet.DecodeConnect(body, &cp); err != nil {
		c.srv.stats.MalformedPackets.Add(1)
		c.refuseDecode(&cp, err)
		return err
	}
	c.version = cp.Version
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.info.TLS = &st
	}
	if rc := c.admit(&cp); rc != packet.Success {
		c.refuse(rc)
		return rc
	}
	c.negotiate(&cp)
	return c.accept(&cp)
}

// refuseDecode answers a CONNECT that failed to decode, where the protocol
// allows an answer.
func (c *conn) refuseDecode(cp *packet.Connect, err error) {
	var rc packet.ReasonCode
	if !errors.As(err, &rc) {
		return
	}
	switch {
	case rc == packet.UnsupportedProtocolVersion:
		c.version = packet.V311 // the v3 CONNACK format is the one every version reads
		if cp.Version == packet.V5 {
			c.version = packet.V5
		}
		c.refuse(rc)
	case cp.Version == packet.V5:
		c.version = packet.V5
		c.refuse(rc)
	}
}

// refuse writes a CONNACK with rc directly (the writer is not running).
func (c *conn) refuse(rc packet.ReasonCode) {
	ack := packet.Connack{ReasonCode: rc}
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.nc.Write(ack.Append(nil, c.version))
}

// admit checks identity, credentials and limits. It may assign a client
// identifier.
func (c *conn) admit(cp *packet.Connect) packet.ReasonCode {
	if cp.ClientID == "" {
		if c.version == packet.V31 || (c.version == packet.V311 && !cp.CleanStart) {
			return packet.ClientIdentifierNotValid
		}
		cp.ClientID = newClientID()
		cp.Props.AssignedClientID = cp.ClientID
		cp.Props.Set(packet.PropAssignedClientID)
	}
	c.info.ClientID = cp.ClientID
	c.info.Username = cp.Username
	c.info.Version = byte(cp.Version)
	if cp.WillFlag {
		if err := topic.ValidateName(cp.WillTopic); err != nil {
			return packet.TopicNameInvalid
		}
	}
	if rc := c.authenticate(cp); rc != packet.Success {
		c.srv.stats.AuthFailures.Add(1)
		c.srv.opts.Logger.Info("connection refused", "component", "broker", "remote", c.info.RemoteAddr,
			"client", cp.ClientID, "user", cp.Username, "reason", rc.Error())
		return rc
	}
	if max := c.srv.opts.MaxConnections; max > 0 && c.srv.stats.Connections.Load() >= int64(max) {
		return packet.QuotaExceeded
	}
	return packet.Success
}

func (c *conn) authenticate(cp *packet.Connect) packet.ReasonCode {
	if c.version == packet.V5 && cp.Props.AuthMethod != "" {
		return packet.BadAuthenticationMethod
	}
	anonymousOK := c.lc.AllowAnonymous && (!c.lc.AnonymousLoopbackOnly || isLoopback(c.info.RemoteAddr))
	if !cp.UsernameFlag || c.srv.auth == nil {
		if anonymousOK {
			return packet.Success
		}
		if cp.UsernameFlag {
			return packet.BadUserNameOrPassword
		}
		return packet.NotAuthorized
	}
	info := c.info
	info.Password = cp.Password
	err := c.srv.auth.Authenticate(&info)
	if err == nil {
		return packet.Success
	}
	var rc packet.ReasonCode
	if errors.As(err, &rc) && rc.IsError() {
		return rc
	}
	return packet.BadUserNameOrPassword
}

func isLoopback(a net.Addr) bool {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP.IsLoopback()
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newClientID() string {
	var b [12]byte
	rand.Read(b[:])
	return "auto-" + hex.EncodeToString(b[:])
}

// negotiate fixes the connection's parameters from CONNECT and the options.
func (c *conn) negotiate(cp *packet.Connect) {
	o := &c.srv.opts
	ka := cp.KeepAlive
	if c.version == packet.V5 && o.MaxKeepAlive > 0 && (ka == 0 || ka > o.MaxKeepAlive) {
		ka = o.MaxKeepAlive
		cp.Props.ServerKeepAlive = ka
		cp.Props.Set(packet.PropServerKeepAlive)
	}
	c.keepAlive = time.Duration(ka) * time.Second
	c.clientRecvMax = int(o.MaxInflight)
	c.problemInfo = true
	if c.version == packet.V5 {
		if cp.Props.IsSet(packet.PropReceiveMaximum) {
			c.clientRecvMax = min(c.clientRecvMax, int(cp.Props.ReceiveMaximum))
		}
		if cp.Props.IsSet(packet.PropMaximumPacketSize) {
			c.clientMaxPacket = cp.Props.MaximumPacketSize
		}
		c.clientAliasMax = cp.Props.TopicAliasMaximum
		if cp.Props.IsSet(packet.PropRequestProblemInfo) {
			c.problemInfo = cp.Props.RequestProblemInfo == 1
		}
	}
}

// sessionExpiry returns the expiry the session gets, capped by options.
func (c *conn) sessionExpiry(cp *packet.Connect) (expiry uint32, capped bool) {
	max := c.srv.opts.MaxSessionExpiry
	if c.version != packet.V5 {
		if cp.CleanStart {
			return 0, false
		}
		return max, false
	}
	e := cp.Props.SessionExpiry
	if e > max {
		return max, true
	}
	return e, false
}

// accept attaches the session, queues CONNACK and starts the writer.
func (c *conn) accept(cp *packet.Connect) error {
	expiry, capped := c.sessionExpiry(cp)
	present := c.srv.attach(c, cp.ClientID, cp.CleanStart, expiry, c.willSpec(cp))
	ack := packet.Connack{SessionPresent: present}
	if c.version == packet.V5 {
		ack.Props = c.connackProps(cp, expiry, capped)
	}
	c.queueCtrl(func(b []byte) []byte { return ack.Append(b, c.version) })
	c.stopWriter = make(chan struct{})
	c.writerDone = make(chan struct{})
	c.srv.goTracked(c.writeLoop)
	c.srv.emit(Event{Kind: EventConnect, ClientID: cp.ClientID, Username: cp.Username, Remote: addrString(c.info.RemoteAddr)})
	c.srv.opts.Logger.Debug("client connected", "component", "broker", "client", cp.ClientID, "remote", c.info.RemoteAddr,
		"version", int(c.version), "session_present", present)
	return nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func (c *conn) connackProps(cp *packet.Connect, expiry uint32, capped bool) packet.Properties {
	o := &c.srv.opts
	var p packet.Properties
	if capped {
		p.SessionExpiry = expiry
		p.Set(packet.PropSessionExpiry)
	}
	p.ReceiveMaximum = o.ReceiveMaximum
	p.Set(packet.PropReceiveMaximum)
	p.MaximumPacketSize = o.MaxPacketSize
	p.Set(packet.PropMaximumPacketSize)
	p.TopicAliasMaximum = o.TopicAliasMaximum
	if o.TopicAliasMaximum > 0 {
		p.Set(packet.PropTopicAliasMaximum)
	}
	if o.RetainDisabled {
		p.RetainAvailable = 0
		p.Set(packet.PropRetainAvailable)
	}
	if cp.Props.IsSet(packet.PropAssignedClientID) {
		p.AssignedClientID = cp.Props.AssignedClientID
		p.Set(packet.PropAssignedClientID)
	}
	if cp.Props.IsSet(packet.PropServerKeepAlive) {
		p.ServerKeepAlive = cp.Props.ServerKeepAlive
		p.Set(packet.PropServerKeepAlive)
	}
	return p
}

// willSpec is a client's will: the message, its delay, and its message
// expiry counted from when it is published.
type willSpec struct {
	msg    *Message
	delay  uint32
	expiry uint32 // 0 = none
}

func (c *conn) willSpec(cp *packet.Connect) *willSpec {
	if !cp.WillFlag {
		return nil
	}
	props := cp.WillProps
	props.Clear(packet.PropMessageExpiry)
	pub := packet.Publish{QoS: cp.WillQoS, Retain: cp.WillRetain, Payload: cp.WillPayload, Props: props}
	m := NewMessage(&pub, []byte(cp.WillTopic), time.Now())
	m.Origin = OriginClient
	m.ClientID = cp.ClientID
	m.Username = cp.Username
	w := &willSpec{msg: m}
	if cp.WillProps.IsSet(packet.PropWillDelay) {
		w.delay = cp.WillProps.WillDelay
	}
	if cp.WillProps.IsSet(packet.PropMessageExpiry) {
		w.expiry = cp.WillProps.MessageExpiry
	}
	return w
}
