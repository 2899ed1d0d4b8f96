package broker

import (
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
	"gantry/broker/rawsock"
)

var (
	errShuttingDown = packet.ServerShuttingDown
	errTakenOver    = packet.SessionTakenOver
	errClientClosed = errors.New("broker: client disconnected")
)

// conn is one network connection. Its reader goroutine (serve) decodes and
// handles packets; its writer goroutine (writeLoop), started when
// something is queued and gone once it is sent, writes what is queued,
// many packets per write call. An idle connection thus has one goroutine,
// no read buffer (see readBuf) and no write buffer (see writer).
type conn struct {
	srv  *Server
	nc   net.Conn
	lc   ListenerConfig
	info ConnInfo
	in   readBuf // reader: input buffer
	// idleUntil is the keep-alive deadline of the next packet while an
	// idle connection's reader is handed over (see readOn).
	idleUntil time.Time
	body      []byte // reader: buffer of packets larger than a read buffer, reused

	version packet.Version
	sess    *session

	keepAlive       time.Duration // 0 = none
	clientMaxPacket uint32        // 0 = no limit
	clientRecvMax   int
	clientAliasMax  uint16
	inAliases       map[uint16]string // reader only
	outAliases      map[string]uint16 // writer only

	ackMu      sync.Mutex // guards acks, inflightIn
	acks       []*pendingAck
	pause      <-chan struct{} // a congested session the reader waits for before reading on
	inflightIn int             // inbound QoS 1/2 not yet completed, against ReceiveMaximum

	outMu     sync.Mutex    // guards ctrl
	ctrl      []byte        // encoded control packets waiting for the writer
	wstate    atomic.Uint32 // writerRunning, writerRearm, writerClosed, writerFailed
	runWriter func()        // writeLoop as a func value, so that starting a writer does not allocate
	resend    []outgoing    // writer: inflight messages to send again first
	stopOnce  sync.Once
	stopped   chan struct{} // closed when the connection is being torn down
	done      chan struct{} // closed when serve has finished its clean-up
	reason    atomic.Value  // error: why the server closed it

	normalClose bool                    // reader: DISCONNECT 0x00 received
	sendWill    bool                    // reader: DISCONNECT 0x04 received
	writerExit  chan struct{}           // made by shutdown, closed by a writer it waits for
	resumable   bool                    // a write that timed out may go on (plain TCP)
	rw          io.ReadWriter           // reads and writes nc: nc itself, or raw
	raw         *rawsock.Sock           // rw when it is a raw socket (see package rawsock), else nil
	replies     bool                    // reader: acknowledgements queued for Read to send (see replyLocked)
	woken       [maxDeferredWakes]*conn // reader: writers to wake or run before reading on (see deferWake)
	nwoken      int
	// drained says that the reader's last socket read found the socket
	// empty: only then does it yield before sending what it deferred (see
	// sendDeferred). With more to read, it reads on first, so that the
	// writers it woke write several messages at a time.
	drained    bool
	torn       bool      // writer: a write stopped mid-packet; write nothing more
	drops      uint64    // writer: QoS 0 messages dropped during this fill
	sentByQoS  [3]uint64 // writer: messages encoded during this fill
	counted    bool      // reader: counted in Stats.Connections (see reserve)
	noTargets  bool      // reader: its last routeVia delivered to no session
	inListener bool      // reader: counted against lc.MaxConnections
}

func newConn(s *Server, nc net.Conn, lc ListenerConfig) *conn {
	c := &conn{
		srv:     s,
		nc:      nc,
		lc:      lc,
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
		info:    ConnInfo{RemoteAddr: nc.RemoteAddr(), Listener: lc.Name},
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		c.resumable = true
	}
	c.rw = nc
	if rs := rawsock.New(nc); rs != nil {
		c.rw, c.raw = rs, rs
	}
	// As if a writer ran: a wake-up before accept has queued CONNACK
	// must not start one (accept starts the first).
	c.wstate.Store(writerRunning)
	c.runWriter = func() {
		defer c.srv.wg.Done()
		c.writeLoop()
	}
	return c
}

// serve reads CONNECT, then runs the reader until the connection ends
// and cleans up.
func (c *conn) serve() {
	err := c.handshake()
	if err != nil {
		c.nc.Close()
		if isTimeout(err) && !c.isStopped() {
			c.connectTimedOut()
		}
		c.logClose(err)
		c.cleanUp()
		return
	}
	c.srv.stats.Connects.Add(1) // Stats.Connections: counted by reserve
	// The handshake's calls grew this goroutine's stack: the reader goes
	// on on a fresh one.
	c.handOff(c.packetDeadline(time.Now()))
}

// readOn runs the reader until the connection ends, then tears it down,
// or until it has been idle for idleProbe: it then hands the wait for
// the next packet to a fresh goroutine and returns.
func (c *conn) readOn() {
	err := c.readLoop()
	if err == errIdle {
		c.handOff(c.idleUntil)
		return
	}
	c.wakeDeferred()
	c.shutdown(err)
	c.srv.stats.Disconnects.Add(1)
	c.cleanUp()
}

// handOff starts a new reader goroutine, which waits for the next packet
// until deadline (see awaitPacket). The calling goroutine must return.
func (c *conn) handOff(deadline time.Time) {
	c.idleUntil = deadline
	c.srv.wg.Add(1) // tracked like goTracked's goroutines
	go c.awaitPacket()
}

// packetDeadline returns the keep-alive deadline of a packet awaited from
// now on: zero (none) when keep alive is 0.
func (c *conn) packetDeadline(now time.Time) time.Time {
	if c.keepAlive == 0 {
		return time.Time{}
	}
	return now.Add(c.keepAlive * 3 / 2)
}

// cleanUp gives back what the connection holds once it is closed.
func (c *conn) cleanUp() {
	c.in.release()
	c.release()
	c.srv.dropConn(c)
	close(c.done)
}

// idleProbe is how long the reader waits for a packet before it hands
// the wait to a fresh goroutine. A goroutine's stack grows to fit the
// deepest call it made (CONNECT, SUBSCRIBE, a publish hook), and the
// garbage collector halves it only while less than a quarter of it is in
// use, guard included, which a goroutine blocked in a read never is on a
// 4 KiB stack. A new goroutine that has done nothing but wait has a 2 KiB
// one: with 20,000 idle clients, 40 MB less.
const idleProbe = 2 * time.Second

// errIdle ends readLoop when the connection has been idle for idleProbe.
var errIdle = errors.New("broker: connection idle")

// awaitPacket waits for the next packet of an idle connection on a
// goroutine of its own, which has a small stack as long as it waits,
// then goes on as the reader. The read buffer goes back to its pool
// meanwhile.
func (c *conn) awaitPacket() {
	defer c.srv.wg.Done()
	c.in.idle()
	if err := c.awaitByte(c.idleUntil); err != nil {
		c.shutdown(c.readErr(err))
		c.srv.stats.Disconnects.Add(1)
		c.cleanUp()
		return
	}
	c.readOn()
}

// awaitByte waits until the client has sent at least one byte, or until
// deadline (zero: none). The read buffer is empty.
func (c *conn) awaitByte(deadline time.Time) error {
	c.nc.SetReadDeadline(deadline)
	// Checked after the deadline is set: disconnect sets its own
	// deadline after closing stopped, so a stop is never missed.
	if c.isStopped() {
		return errStopped
	}
	return c.in.ensure(c, 1)
}

// errStopped stands for the server's reason when a read is not even
// tried: the connection was stopped.
var errStopped = errors.New("broker: connection stopped")

// readErr is the reason a read error closes the connection.
func (c *conn) readErr(err error) error {
	if c.isStopped() {
		return c.serverReason()
	}
	if isTimeout(err) {
		return packet.KeepAliveTimeout
	}
	return err
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

// readPacket reads one whole packet. The body is valid until the next
// readPacket.
func (c *conn) readPacket() (packet.FixedHeader, []byte, error) {
	in := &c.in
	if err := in.ensure(c, 2); err != nil {
		return packet.FixedHeader{}, nil, err
	}
	n := 2
	for in.buf[in.r+n-1]&0x80 != 0 && n < 5 {
		n++
		if err := in.ensure(c, n); err != nil {
			return packet.FixedHeader{}, nil, err
		}
	}
	h, _, err := packet.DecodeFixedHeader(in.take(n))
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

// readBody reads n bytes. Up to readBufSize they are read into the read
// buffer and returned in place; a larger body goes to c.body. A buffer too
// small for them grows as the bytes arrive, not to the claimed length at
// once: a client that announces a huge packet costs only the memory of
// what it really sends.
func (c *conn) readBody(n int) ([]byte, error) {
	if n <= readBufSize {
		if err := c.in.ensure(c, n); err != nil {
			return nil, err
		}
		return c.in.take(n), nil
	}
	if n <= cap(c.body) {
		body := c.body[:n]
		_, err := c.in.readFull(c, body)
		return body, err
	}
	body := c.body[:0]
	for len(body) < n {
		chunk := min(n-len(body), max(len(body), 64<<10))
		body = slices.Grow(body, chunk)
		got, err := c.in.readFull(c, body[len(body):len(body)+chunk])
		body = body[:len(body)+got]
		if err != nil {
			return nil, err
		}
	}
	c.body = body
	return body, nil
}

// readLoop handles packets until the connection ends, or returns errIdle
// when no byte came for idleProbe (c.idleUntil is then the keep-alive
// deadline of the next packet).
func (c *conn) readLoop() error {
	for {
		if c.in.buffered() == 0 {
			// Nothing buffered: wait for the next packet's first byte
			// for idleProbe at most (keeping the read buffer: the
			// connection is active), then read the packet within its
			// keep-alive deadline (none when keep alive is 0, which also
			// lifts the CONNECT deadline).
			now := time.Now()
			deadline := c.packetDeadline(now)
			probe := now.Add(idleProbe)
			if !deadline.IsZero() && deadline.Before(probe) {
				probe = deadline
			}
			if err := c.awaitByte(probe); err != nil {
				if isTimeout(err) && !c.isStopped() && (deadline.IsZero() || time.Now().Before(deadline)) {
					c.idleUntil = deadline
					return errIdle // see readOn
				}
				return c.readErr(err)
			}
			c.nc.SetReadDeadline(deadline)
		} else if c.keepAlive > 0 {
			c.nc.SetReadDeadline(c.packetDeadline(time.Now()))
		}
		// Checked after the deadline is set: disconnect sets its own
		// deadline after closing stopped, so a stop is never missed.
		if c.isStopped() {
			return c.serverReason()
		}
		h, body, err := c.readPacket()
		if err != nil {
			return c.readErr(err)
		}
		if err := c.handle(h, body); err != nil {
			return err
		}
	}
}

// handle dispatches one packet.
func (c *conn) handle(h packet.FixedHeader, body []byte) error {
	if (c.nwoken > 0 || c.replies) && c.mayWait(h.Type) {
		// What the packets before it routed and acknowledged must not
		// wait for this one: send it now (see sendDeferred).
		c.sendDeferred()
	}
	switch h.Type {
	case packet.PUBLISH:
		return c.handlePublish(h, body)
	case packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP:
		return c.ackPacket(h, body)
	case packet.SUBSCRIBE:
		return c.subscribePacket(h, body)
	case packet.UNSUBSCRIBE:
		return c.unsubscribePacket(h, body)
	case packet.PINGREQ:
		if len(body) != 0 {
			return packet.MalformedPacket
		}
		c.queueCtrl(func(b []byte) []byte { return packet.AppendPingresp(b) })
		return nil
	case packet.DISCONNECT:
		return c.disconnectPacket(h, body)
	case packet.AUTH:
		// No authentication method is supported, so no AUTH exchange
		// can have started.
		return packet.ProtocolError
	default: // a second CONNECT, or a server-to-client packet
		return packet.ProtocolError
	}
}

// mayWait reports whether handling a packet of type t may wait: in an
// authorizer, a hook, an observer or the retained store, which a
// SUBSCRIBE calls, or in a publish hook or authorizer that is not
// NonBlocking. Acknowledgements and PINGREQ never wait.
func (c *conn) mayWait(t packet.Type) bool {
	switch t {
	case packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP, packet.PINGREQ:
		return false
	case packet.PUBLISH:
		return c.srv.publishMayBlock
	}
	return true
}

// Each kind of packet is decoded in a function of its own, so that the
// decoded packet, hundreds of bytes, is in that function's stack frame
// and not in handle's: a PINGREQ then takes a reader on a 2 KiB stack
// (see idleProbe) through handle without growing it.

func (c *conn) ackPacket(h packet.FixedHeader, body []byte) error {
	var a packet.Ack
	if err := packet.DecodeAck(h, body, c.version, &a); err != nil {
		return err
	}
	return c.handleAck(&a)
}

func (c *conn) subscribePacket(h packet.FixedHeader, body []byte) error {
	var sp packet.Subscribe
	if err := packet.DecodeSubscribe(h, body, c.version, &sp); err != nil {
		return err
	}
	return c.handleSubscribe(&sp)
}

func (c *conn) unsubscribePacket(h packet.FixedHeader, body []byte) error {
	var u packet.Unsubscribe
	if err := packet.DecodeUnsubscribe(h, body, c.version, &u); err != nil {
		return err
	}
	return c.handleUnsubscribe(&u)
}

func (c *conn) disconnectPacket(h packet.FixedHeader, body []byte) error {
	var d packet.Disconnect
	if err := packet.DecodeDisconnect(h, body, c.version, &d); err != nil {
		return err
	}
	return c.handleDisconnect(&d)
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

// Read is the reader's view of the socket: before it reads on, it
// delivers what the packets read so far routed and sends their
// acknowledgements (see sendDeferred).
func (c *conn) Read(p []byte) (int, error) {
	c.sendDeferred()
	n, err := c.rw.Read(p)
	c.drained = n < len(p)
	return n, err
}

// sendDeferred delivers the messages this reader routed to subscribers
// whose writers it was handed (see deferWake), then sends the
// acknowledgements it queued (see replyLocked): deliveries first, as the
// subscribers wait for them. The writers go onto the server's deferred
// stack, and a reader whose last read emptied its socket yields before it
// writes what the stack holds, so that the readers of one round deliver
// in arrival order (see deferredStack). The reader calls it before it
// reads on or pauses.
func (c *conn) sendDeferred() {
	if c.nwoken == 0 && !c.replies {
		return
	}
	st := &c.srv.deferred
	if c.nwoken > 0 {
		st.mu.Lock()
		st.conns = append(st.conns, c.woken[:c.nwoken]...)
		st.mu.Unlock()
		clear(c.woken[:c.nwoken])
		c.nwoken = 0
	}
	if c.drained {
		runtime.Gosched()
	}
	st.run()
	if c.replies {
		c.replies = false
		c.writeFromReader()
	}
}

// deferredStack holds the subscribers' writers that readers handed over
// before yielding (see sendDeferred), last pushed on top.
//
// The runtime's poller makes the goroutines of the sockets that became
// readable ready in the reverse order of their readiness, and runs them
// in that order: readers that each wrote their deliveries at once
// served the publisher that sent last first, and each delivery waited
// behind the acknowledgements the readers before it wrote. Now each
// reader pushes what it routed and yields; runtime.Gosched puts it on the
// global run queue, which the scheduler looks at once the readers made
// ready with it have run. The first one back pops the whole stack, so the
// subscribers that the readers of one round delivered to are written in
// the order their publishers sent (the reverse of the reverse), before
// any of the readers' acknowledgements; then each reader writes its own.
// (A subscriber that several of them delivered to gets its queue in the
// order they routed, newest first: the stack orders writes, not queues.)
type deferredStack struct {
	mu    sync.Mutex
	conns []*conn
}

// run writes, from the top, what the stack holds when called and what is
// pushed meanwhile.
func (st *deferredStack) run() {
	for {
		st.mu.Lock()
		n := len(st.conns)
		if n == 0 {
			st.mu.Unlock()
			return
		}
		sc := st.conns[n-1]
		st.conns[n-1] = nil
		st.conns = st.conns[:n-1]
		st.mu.Unlock()
		sc.writeFromReader()
	}
}

// wakeDeferred wakes the writers this reader was handed, when it stops
// without reading on.
func (c *conn) wakeDeferred() {
	for i := range c.nwoken {
		c.woken[i].wakeWriter()
		c.woken[i] = nil
	}
	c.nwoken = 0
}

// maxDeferredWakes bounds the writers a reader runs itself per read:
// beyond them (a publish to many subscribers) writer goroutines deliver,
// on every core.
const maxDeferredWakes = 4

// deferWake takes sc's wake-up for this reader to do before it reads on
// (see sendDeferred), and reports whether it did: a reader that routed a
// message runs the idle writer of a subscriber itself, once per read
// rather than per message, and no goroutine starts for it. Only c's
// reader calls it.
func (c *conn) deferWake(sc *conn) bool {
	if sc == c || sc.raw == nil {
		return false
	}
	for _, w := range c.woken[:c.nwoken] {
		if w == sc {
			return true
		}
	}
	if c.nwoken == len(c.woken) {
		return false
	}
	c.woken[c.nwoken] = sc
	c.nwoken++
	return true
}

// writeFromReader does the writer's part from a reader's goroutine: c's
// own reader (its acknowledgements, see replyLocked) or a publisher's
// (what it routed to c, see deferWake). When no writer runs, it writes
// what is queued for c, control packets first (see fill), with one
// non-blocking write, and leaves what the socket does not take at once to
// a writer goroutine; otherwise it wakes the writer.
//
// No writer goroutine starts per message this way, and the subscribers'
// deliveries are not put behind a PUBACK: the scheduler runs the
// goroutine made ready last first, so a writer started for the PUBACK
// after the message was routed made the subscriber wait for it and, on
// one core with publishes in bursts, for every other PUBACK of the burst.
func (c *conn) writeFromReader() {
	if c.raw == nil || !c.wstate.CompareAndSwap(0, writerRunning) {
		c.wakeWriter() // a writer runs (it looks again), must run, or closing
		return
	}
	// The calling goroutine is c's writer now.
	if c.torn {
		c.releaseWriter()
		return
	}
	w := writers.Get().(*writer)
	buf := c.fill(w, w.buf[:0], 0, time.Now().UnixNano())
	n := c.tryWrite(buf)
	if n < len(buf) {
		// The socket is full or failed: the rest goes first, by a
		// writer, which waits for the socket or handles the error. It
		// is copied: buf goes back to the pool.
		c.outMu.Lock()
		c.ctrl = append(append(make([]byte, 0, len(buf)-n+len(c.ctrl)), buf[n:]...), c.ctrl...)
		c.outMu.Unlock()
	}
	w.buf = recycle(buf)
	writers.Put(w)
	if n < len(buf) {
		c.startWriter()
		return
	}
	c.releaseWriter()
}

// tryWrite writes what the socket takes of p now, for a goroutine that
// took the writer's role. A write deadline the writer left fails even a
// write that does not wait once it has passed: it is cleared then (the
// writer sets its own before each write).
func (c *conn) tryWrite(p []byte) int {
	n, err := c.raw.TryWrite(p)
	if n == 0 && err != nil && isTimeout(err) {
		c.nc.SetWriteDeadline(time.Time{})
		n, _ = c.raw.TryWrite(p)
	}
	c.srv.stats.BytesOut.Add(uint64(n))
	return n
}

// releaseWriter gives up the writer's role that writeFromReader took: a
// writer starts when a wake-up came meanwhile.
func (c *conn) releaseWriter() {
	for {
		s := c.wstate.Load()
		if s&(writerRearm|writerClosed) == writerRearm {
			c.startWriter()
			return
		}
		if c.wstate.CompareAndSwap(s, s&^(writerRunning|writerRearm)) {
			if s&writerClosed != 0 {
				close(c.writerExit)
			}
			return
		}
	}
}

// queueCtrl appends a control packet for the writer.
func (c *conn) queueCtrl(enc func([]byte) []byte) {
	c.outMu.Lock()
	c.ctrl = enc(c.ctrl)
	c.outMu.Unlock()
	c.wakeWriter()
}

// wakeWriter has what is queued sent: it starts the writer, or, when one
// runs, makes it look again before it exits. Safe from any goroutine.
func (c *conn) wakeWriter() {
	for {
		s := c.wstate.Load()
		var next uint32
		switch {
		case s&(writerClosed|writerRearm) != 0:
			return // closing, or the running writer will look again
		case s&writerRunning != 0:
			next = s | writerRearm
		default:
			next = writerRunning
		}
		if c.wstate.CompareAndSwap(s, next) {
			if next == writerRunning {
				c.startWriter()
			}
			return
		}
	}
}

// startWriter starts a writer goroutine, tracked like goTracked's. The
// caller has set writerRunning.
func (c *conn) startWriter() {
	c.srv.wg.Add(1)
	go c.runWriter()
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
