package broker

import (
	"errors"
	"time"

	"gantry/broker/packet"
)

// finalFlushTimeout bounds the last write to a closing connection, so a
// client that stopped reading cannot hold up a takeover or a shutdown.
const finalFlushTimeout = 2 * time.Second

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
			c.disconnect(err)
			<-c.stopWriter
			return
		}
	}
}

// flush writes until nothing is left to send. When final, only control
// packets are written, within finalFlushTimeout.
func (c *conn) flush(final bool) error {
	for {
		buf := c.takeCtrl(c.wbuf[:0])
		if final {
			if len(buf) > 0 {
				c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
				c.nc.Write(buf)
			}
			return nil
		}
		now := time.Now()
		nowNs := now.UnixNano()
		if len(c.resend) > 0 {
			buf = c.appendResend(buf, nowNs)
		}
		c.sess.mu.Lock()
		out := c.sess.take(c.scratch[:0], c.clientRecvMax, nowNs)
		c.sess.mu.Unlock()
		for i := range out {
			buf = c.appendOutgoing(buf, &out[i], nowNs)
		}
		clear(out)
		if len(buf) == 0 {
			c.wbuf = buf
			return nil
		}
		c.nc.SetWriteDeadline(now.Add(c.srv.opts.WriteTimeout))
		n, err := c.nc.Write(buf)
		c.srv.stats.BytesOut.Add(uint64(n))
		c.wbuf = recycle(buf)
		if err != nil {
			return err
		}
	}
}

// takeCtrl swaps the queued control packets into the writer's buffer.
func (c *conn) takeCtrl(empty []byte) []byte {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if len(c.ctrl) == 0 {
		return empty
	}
	full := c.ctrl
	c.ctrl = empty
	return full
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
func (c *conn) appendResend(buf []byte, now int64) []byte {
	for i := range c.resend {
		buf = c.appendOutgoing(buf, &c.resend[i], now)
	}
	c.resend = nil
	return buf
}

// appendOutgoing encodes one delivery for this client.
func (c *conn) appendOutgoing(buf []byte, o *outgoing, now int64) []byte {
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
	if c.clientMaxPacket > 0 && uint32(p.Size(c.version)) > c.clientMaxPacket {
		// Too large for this client: not sent, and complete as if it
		// had been (MQTT 5.0 section 3.1.2.11.4).
		c.srv.stats.Dropped.Add(1)
		if o.qos > 0 {
			c.sess.complete(o.pid)
		}
		return buf
	}
	if c.clientAliasMax > 0 && !o.dup {
		c.applyAlias(p, m.Topic)
	}
	c.srv.stats.MessagesOut.Add(1)
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
	if c.version == packet.V5 && errors.As(err, &rc) && rc.IsError() {
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
