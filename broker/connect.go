package broker

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"sync"
	"sync/atomic"
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
	if rate := c.srv.opts.MaxConnectRate; rate > 0 && !c.srv.limits.takeToken(rate, time.Now()) {
		// Refused before anything costly, authentication included.
		c.srv.stats.ConnectRateRefused.Add(1)
		if ok, suppressed := c.srv.limits.logs[limitConnectRate].allow(time.Now(), 1); ok {
			c.srv.opts.Logger.Warn("connection refused: connect rate exceeded", "component", "broker",
				"max_per_second", rate, "remote", c.info.RemoteAddr, "client", cp.ClientID, "suppressed", suppressed)
		}
		return packet.ConnectionRateExceeded
	}
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
		if err := topic.ValidateName(cp.WillTopic); err != nil || c.srv.topicTooDeep(cp.WillTopic) {
			return packet.TopicNameInvalid
		}
	}
	if rc := c.authenticate(cp); rc != packet.Success {
		c.srv.stats.AuthFailures.Add(1)
		c.srv.opts.Logger.Info("connection refused", "component", "broker", "remote", c.info.RemoteAddr,
			"client", cp.ClientID, "user", cp.Username, "reason", rc.Error())
		return rc
	}
	return c.reserve()
}

// reserve counts the connection against its listener's and the server's
// connection limits (serve releases it), or refuses it.
func (c *conn) reserve() packet.ReasonCode {
	s := c.srv
	if max := c.lc.MaxConnections; max > 0 {
		if !s.limits.enterListener(c.lc.Name, max) {
			return c.refuseLimit(limitListenerConnections, "listener connection limit reached", max)
		}
		c.inListener = true
	}
	max := int64(s.opts.MaxConnections)
	for {
		n := s.stats.Connections.Load()
		if max > 0 && n >= max {
			if c.inListener {
				s.limits.leaveListener(c.lc.Name)
				c.inListener = false
			}
			return c.refuseLimit(limitConnections, "connection limit reached", int(max))
		}
		if s.stats.Connections.CompareAndSwap(n, n+1) {
			c.counted = true
			return packet.Success
		}
	}
}

// release gives back what reserve counted.
func (c *conn) release() {
	if c.counted {
		c.srv.stats.Connections.Add(-1)
	}
	if c.inListener {
		c.srv.limits.leaveListener(c.lc.Name)
	}
}

// refuseLimit counts and logs a CONNECT refused by a connection limit and
// returns the code to answer: 0x97 quota exceeded, which MQTT 3 lacks (its
// closest is 3, server unavailable).
func (c *conn) refuseLimit(lim limit, msg string, max int) packet.ReasonCode {
	s := c.srv
	s.stats.ConnectionsRefused.Add(1)
	if ok, suppressed := s.limits.logs[lim].allow(time.Now(), 1); ok {
		s.opts.Logger.Warn("connection refused: "+msg, "component", "broker", "max", max,
			"listener", c.lc.Name, "remote", c.info.RemoteAddr, "client", c.info.ClientID, "suppressed", suppressed)
	}
	if c.version == packet.V5 {
		return packet.QuotaExceeded
	}
	return packet.ServerUnavailable
}

func (c *conn) authenticate(cp *packet.Connect) packet.ReasonCode {
	rc := c.checkCredentials(cp)
	if rc != packet.Success {
		return rc
	}
	if ca, ok := c.srv.authz.(ConnectAuthorizer); ok && !ca.CanConnect(&c.info) {
		return packet.NotAuthorized
	}
	return packet.Success
}

// checkCredentials accepts an anonymous client its listener allows, or
// asks the Authenticator about the user name and password.
func (c *conn) checkCredentials(cp *packet.Connect) packet.ReasonCode {
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
	if c.version == packet.V5 {
		switch {
		case o.ServerKeepAlive > 0:
			ka = o.ServerKeepAlive
		case o.MaxKeepAlive > 0 && (ka == 0 || ka > o.MaxKeepAlive):
			ka = o.MaxKeepAlive
		}
		if ka != cp.KeepAlive || o.ServerKeepAlive > 0 {
			cp.Props.ServerKeepAlive = ka
			cp.Props.Set(packet.PropServerKeepAlive)
		}
	}
	c.keepAlive = time.Duration(ka) * time.Second
	c.clientRecvMax = int(o.MaxInflight)
	if c.version == packet.V5 {
		if cp.Props.IsSet(packet.PropReceiveMaximum) {
			c.clientRecvMax = min(c.clientRecvMax, int(cp.Props.ReceiveMaximum))
		}
		if cp.Props.IsSet(packet.PropMaximumPacketSize) {
			c.clientMaxPacket = cp.Props.MaximumPacketSize
		}
		c.clientAliasMax = cp.Props.TopicAliasMaximum
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
	if cl := c.srv.claimer; cl != nil {
		cl.ClaimSession(&c.info, cp.CleanStart, expiry) // the cluster: the session may be on another node (handover.go)
	}
	present, err := c.srv.attach(c, cp.ClientID, cp.CleanStart, expiry, c.willSpec(cp))
	if err != nil {
		rc := reasonOf(err)
		c.refuse(rc)
		return rc
	}
	if present {
		c.srv.reauthorizeResumed(c.sess) // the identity may differ from the last connection's
	}
	ack := packet.Connack{SessionPresent: present}
	if c.version == packet.V5 {
		ack.Props = c.connackProps(cp, expiry, capped)
	}
	c.queueCtrl(func(b []byte) []byte { return ack.Append(b, c.version) })
	c.startWriter() // the first writer: see newConn
	c.srv.emit(Event{Kind: EventConnect, ClientID: cp.ClientID, Username: cp.Username, Remote: addrString(c.info.RemoteAddr),
		CleanStart: cp.CleanStart})
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

// limit names a client-protection limit, for its log line.
type limit uint8

const (
	limitConnections         limit = iota // Options.MaxConnections
	limitListenerConnections              // ListenerConfig.MaxConnections
	limitConnectRate                      // Options.MaxConnectRate
	limitConnectTimeout                   // Options.ConnectTimeout
	limitTopicLevels                      // Options.MaxTopicLevels
	limitSlowDrop                         // Options.MaxOutboundBytes
	limitSlowDisconnect                   // Options.StuckTimeout
	numLimits
)

// limitLogInterval is the least time between two log lines of one limit;
// a line says how many events went unlogged since the previous one.
const limitLogInterval = 10 * time.Second

// limits is the state of the client-protection limits. Its zero value is
// ready.
type limits struct {
	mu       sync.Mutex     // guards listener, tokens, refilled
	listener map[string]int // connections counted per listener name
	tokens   float64        // MaxConnectRate bucket
	refilled time.Time      // last refill of tokens; zero: bucket full
	logs     [numLimits]logLimiter
}

// takeToken takes one token from the connect-rate bucket, which holds at
// most rate tokens and gains rate per second. It reports false when the
// bucket is empty.
func (l *limits) takeToken(rate int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	burst := float64(rate)
	if l.refilled.IsZero() {
		l.tokens = burst
	} else if d := now.Sub(l.refilled); d > 0 {
		l.tokens = min(burst, l.tokens+d.Seconds()*burst)
	}
	l.refilled = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// enterListener counts one connection of listener name unless it has max.
func (l *limits) enterListener(name string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener[name] >= max {
		return false
	}
	if l.listener == nil {
		l.listener = make(map[string]int)
	}
	l.listener[name]++
	return true
}

func (l *limits) leaveListener(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener[name]--; l.listener[name] <= 0 {
		delete(l.listener, name)
	}
}

// logLimiter lets one log line through per limitLogInterval.
type logLimiter struct {
	next       atomic.Int64  // Unix nanoseconds before which lines are suppressed
	suppressed atomic.Uint64 // events not logged since the last line
}

// allow reports whether the line for n new events may be logged now, and
// how many earlier events went unlogged; when it may not, the n events
// are added to those.
func (l *logLimiter) allow(now time.Time, n uint64) (ok bool, suppressed uint64) {
	t := now.UnixNano()
	next := l.next.Load()
	if t < next || !l.next.CompareAndSwap(next, t+int64(limitLogInterval)) {
		l.suppressed.Add(n)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
