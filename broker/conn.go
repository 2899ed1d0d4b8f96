package broker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
)

var (
	errShuttingDown = packet.ServerShuttingDown
	errTakenOver    = packet.SessionTakenOver
	errClientClosed = errors.New("broker: client disconnected")
)

// conn is one network connection. Its reader goroutine (serve) decodes and
// handles packets; its writer goroutine (writeLoop) sends what is queued,
// many packets per write call.
type conn struct {
	srv  *Server
	nc   net.Conn
	lc   ListenerConfig
	info ConnInfo
	br   *bufio.Reader
	body []byte // reader: packet body buffer, reused

	version packet.Version
	sess    *session

	keepAlive       time.Duration // 0 = none
	clientMaxPacket uint32        // 0 = no limit
	clientRecvMax   int
	clientAliasMax  uint16
	inAliases       map[uint16]string // reader only
	outAliases      map[string]uint16 // writer only
	problemInfo     bool              // client accepts reason strings

	ackMu      sync.Mutex // guards acks, inflightIn
	acks       []*pendingAck
	pause      <-chan struct{} // a congested session the reader waits for before reading on
	inflightIn int             // inbound QoS 1/2 not yet completed, against ReceiveMaximum

	outMu    sync.Mutex // guards ctrl, spare
	ctrl     []byte     // encoded control packets waiting for the writer
	spare    []byte
	wake     chan struct{}
	resend   []outgoing // writer: inflight messages to send again first
	stopOnce sync.Once
	stopped  chan struct{} // closed when the connection is being torn down
	done     chan struct{} // closed when serve has finished its clean-up
	reason   atomic.Value  // error: why the server closed it

	normalClose bool // reader: DISCONNECT 0x00 received
	sendWill    bool // reader: DISCONNECT 0x04 received
	stopWriter  chan struct{}
	writerDone  chan struct{}
	scratch     [64]outgoing // writer only
	wbuf        []byte       // writer only
	resumable   bool         // a write that timed out may go on (plain TCP)
	torn        bool         // writer: a write stopped mid-packet; write nothing more
	drops       uint64       // writer: QoS 0 messages dropped during this fill
	sentByQoS   [3]uint64    // writer: messages encoded during this fill
	counted     bool         // reader: counted in Stats.Connections (see reserve)
	inListener  bool         // reader: counted against lc.MaxConnections
	pub         packet.Publish
	subIDs      [4]uint32
}

func newConn(s *Server, nc net.Conn, lc ListenerConfig) *conn {
	c := &conn{
		srv:     s,
		nc:      nc,
		lc:      lc,
		br:      bufio.NewReaderSize(nc, 4096),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
		info:    ConnInfo{RemoteAddr: nc.RemoteAddr(), Listener: lc.Name},
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		c.resumable = true
	}
	return c
}

// serve runs the reader until the connection ends, then cleans up.
func (c *conn) serve() {
	defer close(c.done)
	defer c.srv.dropConn(c)
	defer c.release()
	err := c.handshake()
	if err != nil {
		c.nc.Close()
		if isTimeout(err) && !c.isStopped() {
			c.connectTimedOut()
		}
		c.logClose(err)
		return
	}
	c.srv.stats.Connects.Add(1) // Stats.Connections: counted by reserve
	err = c.readLoop()
	c.shutdown(err)
	c.srv.stats.Disconnects.Add(1)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// connectTimedOut counts and logs a connection closed for sending no
// (whole) CONNECT within ConnectTimeout.
func (c *conn) connectTimedOut() {
	s := c.srv
	s.stats.ConnectTimeouts.Add(1)
	if ok, suppressed := s.limits.logs[limitConnectTimeout].allow(time.Now(), 1); ok {
		s.opts.Logger.Warn("connection closed: no CONNECT within the connect timeout", "component", "broker",
			"timeout", s.opts.ConnectTimeout, "listener", c.lc.Name, "remote", c.info.RemoteAddr, "suppressed", suppressed)
	}
}

func (c *conn) logClose(err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errClientClosed) {
		return
	}
	c.srv.opts.Logger.Debug("connection closed", "component", "broker", "remote", c.info.RemoteAddr, "client", c.info.ClientID, "err", err)
}

// readPacket reads one whole packet into c.body.
func (c *conn) readPacket() (packet.FixedHeader, []byte, error) {
	var hdr [5]byte
	b, err := c.br.ReadByte()
	if err != nil {
		return packet.FixedHeader{}, nil, err
	}
	hdr[0] = b
	n := 1
	for {
		if b, err = c.br.ReadByte(); err != nil {
			return packet.FixedHeader{}, nil, err
		}
		hdr[n] = b
		n++
		if b&0x80 == 0 || n == 5 {
			break
		}
	}
	h, _, err := packet.DecodeFixedHeader(hdr[:n])
	if err != nil {
		return h, nil, err
	}
	if max := c.srv.opts.MaxPacketSize; uint64(h.Remaining)+uint64(n) > uint64(max) {
		return h, nil, packet.PacketTooLarge
	}
	body, err := c.readBody(h.Remaining)
	if err != nil {
		return h, nil, err
	}
	c.srv.stats.BytesIn.Add(uint64(n + h.Remaining))
	return h, body, nil
}

// readBody reads n bytes into c.body. A buffer too small for them grows
// as the bytes arrive, not to the claimed length at once: a client that
// announces a huge packet costs only the memory of what it really sends.
func (c *conn) readBody(n int) ([]byte, error) {
	if n <= cap(c.body) {
		body := c.body[:n]
		_, err := io.ReadFull(c.br, body)
		return body, err
	}
	body := c.body[:0]
	for len(body) < n {
		chunk := min(n-len(body), max(len(body), 64<<10))
		body = slices.Grow(body, chunk)
		got, err := io.ReadFull(c.br, body[len(body):len(body)+chunk])
		body = body[:len(body)+got]
		if err != nil {
			return nil, err
		}
	}
	c.body = body
	return body, nil
}

// readLoop handles packets until the connection ends.
func (c *conn) readLoop() error {
	if c.keepAlive == 0 {
		// Keep alive 0 turns the timeout off: lift the CONNECT deadline
		// (before the stop check below, like the per-packet deadline).
		c.nc.SetReadDeadline(time.Time{})
	}
	for {
		if c.keepAlive > 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.keepAlive * 3 / 2))
		}
		// Checked after the deadline is set: disconnect sets its own
		// deadline after closing stopped, so a stop is never missed.
		if c.isStopped() {
			return c.serverReason()
		}
		h, body, err := c.readPacket()
		if err != nil {
			if c.isStopped() {
				return c.serverReason()
			}
			if isTimeout(err) {
				return packet.KeepAliveTimeout
			}
			return err
		}
		if err := c.handle(h, body); err != nil {
			return err
		}
	}
}

// handle dispatches one packet.
func (c *conn) handle(h packet.FixedHeader, body []byte) error {
	switch h.Type {
	case packet.PUBLISH:
		return c.handlePublish(h, body)
	case packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP:
		var a packet.Ack
		if err := packet.DecodeAck(h, body, c.version, &a); err != nil {
			return err
		}
		return c.handleAck(&a)
	case packet.SUBSCRIBE:
		var sp packet.Subscribe
		if err := packet.DecodeSubscribe(h, body, c.version, &sp); err != nil {
			return err
		}
		return c.handleSubscribe(&sp)
	case packet.UNSUBSCRIBE:
		var u packet.Unsubscribe
		if err := packet.DecodeUnsubscribe(h, body, c.version, &u); err != nil {
			return err
		}
		return c.handleUnsubscribe(&u)
	case packet.PINGREQ:
		if len(body) != 0 {
			return packet.MalformedPacket
		}
		c.queueCtrl(func(b []byte) []byte { return packet.AppendPingresp(b) })
		return nil
	case packet.DISCONNECT:
		var d packet.Disconnect
		if err := packet.DecodeDisconnect(h, body, c.version, &d); err != nil {
			return err
		}
		return c.handleDisconnect(&d)
	case packet.AUTH:
		// No authentication method is supported, so no AUTH exchange
		// can have started.
		return packet.ProtocolError
	default: // a second CONNECT, or a server-to-client packet
		return packet.ProtocolError
	}
}

func (c *conn) handleDisconnect(d *packet.Disconnect) error {
	if c.version == packet.V5 && d.Props.IsSet(packet.PropSessionExpiry) {
		c.sess.mu.Lock()
		was := c.sess.expiry
		if was == 0 && d.Props.SessionExpiry != 0 {
			c.sess.mu.Unlock()
			return packet.ProtocolError
		}
		c.sess.expiry = min(d.Props.SessionExpiry, c.srv.opts.MaxSessionExpiry)
		c.sess.mu.Unlock()
	}
	switch d.ReasonCode {
	case packet.Success:
		c.normalClose = true
	case packet.DisconnectWithWill:
		c.sendWill = true
	}
	return errClientClosed
}

// queueCtrl appends a control packet for the writer.
func (c *conn) queueCtrl(enc func([]byte) []byte) {
	c.outMu.Lock()
	c.ctrl = enc(c.ctrl)
	c.outMu.Unlock()
	c.wakeWriter()
}

func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// disconnect asks the connection to close with reason (sent to a v5 client
// as DISCONNECT). Safe from any goroutine.
func (c *conn) disconnect(reason error) {
	c.stopOnce.Do(func() {
		c.reason.Store(reason)
		close(c.stopped)
		c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) isStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

// serverReason returns why the server closed the connection, if it did.
func (c *conn) serverReason() error {
	if r, ok := c.reason.Load().(error); ok {
		return r
	}
	return nil
}
