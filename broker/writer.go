package broker

import (
	"errors"
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

// writeLoop sends what the reader and the router queue for this
// connection: control packets first, then publishes, coalesced into one
// write call per batch.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.wake:
		case <-c.stopWriter:
			c.flush(true)
			return
		}
		if err := c.flush(false); err != nil {
			if errors.Is(err, errStuck) {
				c.slowConsumerDisconnected()
			}
			c.disconnect(err)
			<-c.stopWriter
			return
		}
	}
}

// flush writes until nothing is left to send. When final, only control
// packets are written, within finalFlushTimeout.
//
// A batch is written with one write call (in chunks of writeChunk on TLS
// and WebSocket). While the socket does not take it all, the writer keeps
// adding what gets queued after the unwritten bytes, within
// MaxOutboundBytes, and gives up when the socket has taken no byte for
// StuckTimeout.
func (c *conn) flush(final bool) error {
	if final {
		if c.torn {
			return nil // the stream ends mid-packet: nothing more can follow
		}
		buf := c.takeCtrl(c.wbuf[:0])
		if len(buf) > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
			c.nc.Write(buf)
		}
		return nil
	}
	buf, sent := c.wbuf[:0], 0 // buf[sent:] is not written yet
	progress := time.Now()     // when the socket last took data
	for {
		switch {
		case sent == len(buf):
			buf, sent = recycle(buf), 0
		case c.isStopped() || c.writerStopping():
			// Closing with a write half done: a slow client, which need
			// not be waited for.
			c.torn = true
			return nil
		case sent >= len(buf)/2:
			n := copy(buf, buf[sent:])
			buf, sent = buf[:n], 0
		}
		now := time.Now()
		buf = c.fill(buf, sent, now.UnixNano())
		if sent == len(buf) {
			c.wbuf = buf
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
			return err
		}
		if !c.resumable || time.Since(progress) >= c.srv.opts.StuckTimeout {
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
	return c.nc.Write(p)
}

func (c *conn) writerStopping() bool {
	select {
	case <-c.stopWriter:
		return true
	default:
		return false
	}
}

// fill appends what waits for the client to buf, whose bytes from sent on
// are not written yet: the queued control packets, the messages to send
// again, then the session queue, taken whole (up to MaxQueuedMessages
// messages) so that what a slow client leaves waiting is measured here
// against MaxOutboundBytes.
func (c *conn) fill(buf []byte, sent int, now int64) []byte {
	buf = c.takeCtrl(buf)
	if len(c.resend) > 0 {
		buf = c.appendResend(buf, sent, now)
	}
	for taken := 0; taken < c.srv.opts.MaxQueuedMessages; {
		c.sess.mu.Lock()
		out := c.sess.take(c.scratch[:0], c.clientRecvMax, now)
		c.sess.mu.Unlock()
		for i := range out {
			buf = c.appendOutgoing(buf, sent, &out[i], now)
		}
		clear(out)
		taken += len(out)
		if len(out) < len(c.scratch) {
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

// takeCtrl moves the queued control packets to the end of buf.
func (c *conn) takeCtrl(buf []byte) []byte {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	switch {
	case len(c.ctrl) == 0:
		return buf
	case len(buf) == 0: // swap the buffers rather than copy
		full := c.ctrl
		c.ctrl = buf
		return full
	}
	buf = append(buf, c.ctrl...)
	c.ctrl = c.ctrl[:0]
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
func (c *conn) appendResend(buf []byte, sent int, now int64) []byte {
	for i := range c.resend {
		buf = c.appendOutgoing(buf, sent, &c.resend[i], now)
	}
	c.resend = nil
	return buf
}

// appendOutgoing encodes one delivery for this client at the end of buf,
// whose bytes from sent on are not written yet.
func (c *conn) appendOutgoing(buf []byte, sent int, o *outgoing, now int64) []byte {
	if o.release {
		a := packet.Ack{Type: packet.PUBREL, PacketID: o.pid}
		return a.Append(buf, c.version)
	}
	m := o.msg
	p := &c.pub
	*p = packet.Publish{Dup: o.dup, QoS: o.qos, Retain: o.retain, Topic: bytesOf(m.Topic), PacketID: o.pid, Payload: m.Payload}
	if c.version == packet.V5 {
		c.setProps(&p.Props, o, now)
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

// setProps copies the message's v5 properties for one delivery.
func (c *conn) setProps(pr *packet.Properties, o *outgoing, now int64) {
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
		ids := append(c.subIDs[:0], o.subID)
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

// shutdown tears the connection down after the reader stopped with err.
func (c *conn) shutdown(err error) {
	if c.isStopped() {
		err = c.serverReason()
	}
	close(c.stopWriter)
	<-c.writerDone
	var rc packet.ReasonCode
	if c.version == packet.V5 && errors.As(err, &rc) && rc.IsError() && !c.torn {
		d := packet.Disconnect{ReasonCode: rc}
		c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
		c.nc.Write(d.Append(nil, c.version))
	}
	c.nc.Close()
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
