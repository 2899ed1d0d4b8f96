package broker

import (
	"errors"
	"sync"
	"time"

	"gantry/broker/packet"
)

// finalFlushTimeout bounds the last write to a closing connection, so a
// client that stopped reading cannot hold up a takeover or a shutdown.
const finalFlushTimeout = 2 * time.Second

const (
	// writeChunk bounds one write call on a connection whose writes
	// cannot go on after a timeout (TLS, WebSocket): each chunk must leave
	// within StuckTimeout, so that a slow but live client is not taken
	// for a stuck one.
	writeChunk = 64 << 10
	// maxWriteSlice bounds the wait of one write call on a plain TCP
	// connection. Between calls the writer takes what was queued
	// meanwhile, dropping QoS 0 messages beyond MaxOutboundBytes, so that
	// a client that stopped reading does not pin its session queue full.
	maxWriteSlice = 500 * time.Millisecond
)

// errStuck closes a connection whose socket accepted nothing for
// StuckTimeout.
var errStuck = errors.New("broker: slow consumer: the socket accepted no data within the stuck timeout")

// Bits of conn.wstate, the writer's state. A writer goroutine runs only
// while there is something to send: wakeWriter starts one (idle to
// running) or, when one runs, sets writerRearm; the writer clears
// writerRearm before each flush and exits only by clearing writerRunning
// in a compare-and-swap that fails when writerRearm was set meanwhile. A
// wake-up is thus either seen by the running writer's next flush or
// starts a new writer.
const (
	writerRunning uint32 = 1 << iota // a writer goroutine runs (or, before accept, is yet to start)
	writerRearm                      // woken while running: flush again before exiting
	writerClosed                     // shutdown: start no writer; a running one stops
	writerFailed                     // a write failed: nothing more is written
)

// writer is the scratch space of a running writer goroutine, pooled so
// that an idle connection holds none.
type writer struct {
	buf     []byte // write buffer; buf[sent:] is not written yet
	scratch [64]outgoing
	pub     packet.Publish
	subIDs  [4]uint32
}

var writers = sync.Pool{New: func() any { return new(writer) }}

// writeLoop sends what the reader and the router queue for this
// connection: control packets first, then publishes, coalesced into one
// write call per batch. It returns once nothing is left to send (see
// wakeWriter), on shutdown, or when a write fails.
func (c *conn) writeLoop() {
	w := writers.Get().(*writer)
	defer writers.Put(w)
	for {
		c.wstate.And(^writerRearm) // what is queued before this is flushed below
		err := c.flush(w)
		var exit, set uint32 = writerRunning | writerRearm, 0
		if err != nil {
			if errors.Is(err, errStuck) {
				c.slowConsumerDisconnected()
			}
			c.disconnect(err)
			set = writerClosed | writerFailed
		}
		for {
			s := c.wstate.Load()
			if err == nil && s&(writerRearm|writerClosed) == writerRearm {
				break // woken meanwhile: flush again
			}
			if c.wstate.CompareAndSwap(s, s&^exit|set) {
				// Gone: this goroutine must no longer touch c, which
				// the next writer or shutdown owns, except to tell a
				// waiting shutdown.
				if s&writerClosed != 0 {
					close(c.writerExit)
				}
				return
			}
		}
	}
}

// finalFlush writes the control packets still queued when the connection
// closes, within finalFlushTimeout. No writer runs any more.
func (c *conn) finalFlush() {
	if c.torn {
		return // the stream ends mid-packet: nothing more can follow
	}
	c.outMu.Lock()
	buf := c.ctrl
	c.ctrl = nil
	c.outMu.Unlock()
	if len(buf) > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
		c.nc.Write(buf)
	}
}

// flush writes until nothing is left to send.
//
// A batch is written with one write call (in chunks of writeChunk on TLS
// and WebSocket). While the socket does not take it all, the writer keeps
// adding what gets queued after the unwritten bytes, within
// MaxOutboundBytes, and gives up when the socket has taken no byte for
// StuckTimeout.
func (c *conn) flush(w *writer) error {
	if c.torn {
		return nil // the stream ends mid-packet: nothing more can follow
	}
	buf, sent := w.buf[:0], 0 // buf[sent:] is not written yet
	progress := time.Now()    // when the socket last took data
	for {
		switch {
		case sent == len(buf):
			buf, sent = recycle(buf), 0
		case c.isStopped() || c.writerStopping():
			// Closing with a write half done: a slow client, which need
			// not be waited for.
			c.torn = true
			w.buf = recycle(buf)
			return nil
		case sent >= len(buf)/2:
			n := copy(buf, buf[sent:])
			buf, sent = buf[:n], 0
		}
		now := time.Now()
		buf = c.fill(w, buf, sent, now.UnixNano())
		if sent == len(buf) {
			w.buf = recycle(buf)
			return nil
		}
		n, err := c.writeSome(buf[sent:], now, progress)
		sent += n
		c.srv.stats.BytesOut.Add(uint64(n))
		if n > 0 {
			progress = time.Now()
		}
		if err == nil {
			continue
		}
		c.torn = sent < len(buf)
		if !isTimeout(err) {
			w.buf = recycle(buf)
			return err
		}
		if !c.resumable || time.Since(progress) >= c.srv.opts.StuckTimeout {
			w.buf = recycle(buf)
			return errStuck
		}
		c.torn = false // the write goes on where it stopped
	}
}

// writeSome makes one write call of p, or of its first writeChunk bytes
// when a timed-out write could not go on, with the deadline that tells a
// stuck socket.
func (c *conn) writeSome(p []byte, now, progress time.Time) (int, error) {
	stuck := c.srv.opts.StuckTimeout
	if !c.resumable {
		c.nc.SetWriteDeadline(now.Add(stuck))
		return c.nc.Write(p[:min(len(p), writeChunk)])
	}
	deadline := progress.Add(stuck)
	if d := now.Add(min(stuck/4, maxWriteSlice)); d.Before(deadline) {
		deadline = d
	}
	c.nc.SetWriteDeadline(deadline)
	return c.rw.Write(p)
}

func (c *conn) writerStopping() bool {
	return c.wstate.Load()&writerClosed != 0
}

// fill appends what waits for the client to buf, whose bytes from sent on
// are not written yet: the queued control packets, the messages to send
// again, then the session queue, taken whole (up to MaxQueuedMessages
// messages) so that what a slow client leaves waiting is measured here
// against MaxOutboundBytes.
func (c *conn) fill(w *writer, buf []byte, sent int, now int64) []byte {
	buf = c.takeCtrl(buf)
	if len(c.resend) > 0 {
		buf = c.appendResend(w, buf, sent, now)
	}
	for taken := 0; taken < c.srv.opts.MaxQueuedMessages; {
		c.sess.mu.Lock()
		out := c.sess.take(w.scratch[:0], c.clientRecvMax, now)
		c.sess.mu.Unlock()
		for i := range out {
			buf = c.appendOutgoing(w, buf, sent, &out[i], now)
			out[i].msg.release() // encoded: the bytes are in buf
		}
		clear(out)
		taken += len(out)
		if len(out) < len(w.scratch) {
			break // queue empty, or the inflight window full
		}
	}
	c.countFill()
	return buf
}

// countFill adds the counts of one fill to the server's counters: once
// per batch, not per message, so that writers do not contend on them.
func (c *conn) countFill() {
	st := &c.srv.stats
	var total uint64
	for q, n := range c.sentByQoS {
		if n > 0 {
			st.MessagesOutByQoS[q].Add(n)
			total += n
		}
	}
	if total > 0 {
		st.MessagesOut.Add(total)
		c.sentByQoS = [3]uint64{}
	}
	if c.drops > 0 {
		st.SlowConsumerDrops.Add(c.drops)
		st.Dropped.Add(c.drops)
		if ok, suppressed := c.srv.limits.logs[limitSlowDrop].allow(time.Now(), c.drops); ok {
			c.srv.opts.Logger.Warn("slow consumer: QoS 0 messages dropped", "component", "broker",
				"client", c.info.ClientID, "remote", c.info.RemoteAddr, "dropped", c.drops,
				"max_outbound_bytes", c.srv.opts.MaxOutboundBytes, "suppressed", suppressed)
		}
		c.drops = 0
	}
}

// slowConsumerDisconnected counts and logs a connection closed by
// StuckTimeout.
func (c *conn) slowConsumerDisconnected() {
	s := c.srv
	s.stats.SlowConsumerDisconnects.Add(1)
	if ok, suppressed := s.limits.logs[limitSlowDisconnect].allow(time.Now(), 1); ok {
		s.opts.Logger.Warn("slow consumer disconnected", "component", "broker", "client", c.info.ClientID,
			"remote", c.info.RemoteAddr, "stuck_timeout", s.opts.StuckTimeout, "suppressed", suppressed)
	}
}

// maxIdleCtrl bounds the control packet buffer a connection keeps between
// writes.
const maxIdleCtrl = 1 << 10

// takeCtrl moves the queued control packets to the end of buf. They are
// copied, not swapped with buf: the writer's buffer goes back to a pool,
// which must not end up held by an idle connection.
func (c *conn) takeCtrl(buf []byte) []byte {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if len(c.ctrl) == 0 {
		return buf
	}
	buf = append(buf, c.ctrl...)
	if cap(c.ctrl) > maxIdleCtrl {
		c.ctrl = nil
	} else {
		c.ctrl = c.ctrl[:0]
	}
	return buf
}

// recycle keeps a write buffer for reuse unless a burst made it large.
func recycle(b []byte) []byte {
	if cap(b) > 256<<10 {
		return nil
	}
	return b[:0]
}

// appendResend writes the messages that were in flight when the session's
// previous connection closed: PUBLISH with DUP, or PUBREL.
func (c *conn) appendResend(w *writer, buf []byte, sent int, now int64) []byte {
	for i := range c.resend {
		buf = c.appendOutgoing(w, buf, sent, &c.resend[i], now)
		c.resend[i].msg.release()
	}
	c.resend = nil
	return buf
}

// appendOutgoing encodes one delivery for this client at the end of buf,
// whose bytes from sent on are not written yet.
func (c *conn) appendOutgoing(w *writer, buf []byte, sent int, o *outgoing, now int64) []byte {
	if o.release {
		return appendPubrel(buf, o.pid, c.version)
	}
	m := o.msg
	// Set field by field: a composite literal would be built in this
	// function's stack frame first, which a writer goroutine starting
	// on a small stack would have to grow for.
	p := &w.pub
	p.Props = packet.Properties{}
	p.Dup, p.QoS, p.Retain, p.PacketID = o.dup, o.qos, o.retain, o.pid
	p.Topic, p.Payload = bytesOf(m.Topic), m.Payload
	if c.version == packet.V5 {
		c.setProps(w, &p.Props, o, now)
	}
	limit := c.srv.opts.MaxOutboundBytes
	size := 0
	if c.clientMaxPacket > 0 || (o.qos == 0 && limit > 0) {
		size = p.Size(c.version)
	}
	if c.clientMaxPacket > 0 && uint32(size) > c.clientMaxPacket {
		// Too large for this client: not sent, and complete as if it
		// had been (MQTT 5.0 section 3.1.2.11.4).
		c.srv.stats.Dropped.Add(1)
		if o.qos > 0 {
			c.sess.complete(o.pid)
		}
		return buf
	}
	if o.qos == 0 && limit > 0 {
		// A slow consumer: what it has not taken yet plus this message
		// would pass MaxOutboundBytes. Dropped before an alias is given,
		// which the client would then never learn. A message alone is
		// always sent, however large.
		if pending := len(buf) - sent; pending > 0 && pending+size > limit {
			c.drops++
			return buf
		}
	}
	if c.clientAliasMax > 0 && !o.dup {
		c.applyAlias(p, m.Topic)
	}
	c.sentByQoS[o.qos]++
	return p.Append(buf, c.version)
}

// appendPubrel appends a PUBREL, from a function of its own: see
// appendOutgoing.
//
//go:noinline
func appendPubrel(buf []byte, pid uint16, v packet.Version) []byte {
	a := packet.Ack{Type: packet.PUBREL, PacketID: pid}
	return a.Append(buf, v)
}

// setProps copies the message's v5 properties for one delivery.
func (c *conn) setProps(w *writer, pr *packet.Properties, o *outgoing, now int64) {
	m := o.msg
	if m.PayloadFormat != 0 {
		pr.PayloadFormat = m.PayloadFormat
		pr.Set(packet.PropPayloadFormat)
	}
	if m.ExpiresAt != 0 {
		pr.MessageExpiry = m.remainingExpiry(now)
		pr.Set(packet.PropMessageExpiry)
	}
	pr.ContentType = m.ContentType
	pr.ResponseTopic = m.ResponseTopic
	pr.CorrelationData = m.CorrelationData
	pr.UserProperties = m.UserProperties
	if o.subID != 0 {
		ids := append(w.subIDs[:0], o.subID)
		pr.SubscriptionIDs = append(ids, o.more...)
	}
}

// applyAlias replaces the topic by an alias the client already knows, or
// establishes a new one while the client's Topic Alias Maximum allows.
func (c *conn) applyAlias(p *packet.Publish, tp string) {
	if a, ok := c.outAliases[tp]; ok {
		p.Topic = nil
		p.Props.TopicAlias = a
		p.Props.Set(packet.PropTopicAlias)
		return
	}
	if len(c.outAliases) >= int(c.clientAliasMax) {
		return
	}
	if c.outAliases == nil {
		c.outAliases = make(map[string]uint16)
	}
	a := uint16(len(c.outAliases) + 1)
	c.outAliases[tp] = a
	p.Props.TopicAlias = a
	p.Props.Set(packet.PropTopicAlias)
}

// stopWriter keeps writers from starting, waits for a running one to
// return (one in a write call does when the call returns: at its
// deadline at the latest) and reports whether a write failed.
func (c *conn) stopWriter() (failed bool) {
	c.writerExit = make(chan struct{})
	for {
		s := c.wstate.Load()
		if c.wstate.CompareAndSwap(s, s|writerClosed) {
			if s&writerRunning != 0 {
				<-c.writerExit
			}
			return c.wstate.Load()&writerFailed != 0
		}
	}
}

// shutdown tears the connection down after the reader stopped with err.
func (c *conn) shutdown(err error) {
	if c.isStopped() {
		err = c.serverReason()
	}
	if !c.stopWriter() {
		c.finalFlush()
	}
	var rc packet.ReasonCode
	if c.version == packet.V5 && errors.As(err, &rc) && rc.IsError() && !c.torn {
		d := packet.Disconnect{ReasonCode: rc}
		c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
		if _, werr := c.nc.Write(d.Append(nil, c.version)); werr == nil {
			c.srv.closeLingering(c.nc) // so that the client reads it: see linger.go
		} else {
			c.nc.Close()
		}
	} else {
		c.nc.Close()
	}
	if errors.Is(err, packet.MalformedPacket) || errors.Is(err, packet.ProtocolError) {
		c.srv.stats.MalformedPackets.Add(1)
	}
	publishWill := !c.normalClose || c.sendWill
	c.srv.detach(c, publishWill)
	var reason error
	if !c.normalClose {
		reason = err
	}
	c.srv.emit(Event{Kind: EventDisconnect, ClientID: c.info.ClientID, Username: c.info.Username,
		Remote: addrString(c.info.RemoteAddr), Reason: reason})
	c.logClose(err)
}
