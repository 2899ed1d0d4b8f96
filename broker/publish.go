package broker

import (
	"errors"
	"time"

	"gantry/broker/packet"
	"gantry/broker/topic"
)

// pendingAck is an inbound QoS 1/2 publish whose acknowledgement waits for
// the publish pipeline. It is the Resolver handed to deferring hooks.
type pendingAck struct {
	c         *conn
	msg       *Message
	pid       uint16
	qos       byte
	nextHook  int          // hook to run after a deferral resolves
	done      bool         // pipeline finished
	err       error        // refusal, nil when accepted
	routed    bool         // delivered to the subscribers
	persisted bool         // its QoS 2 identifier was handed to the persister
	storing   bool         // waiting for the persister to make it durable
	ticket    *storeTicket // outcome of the writes routing caused
	// code is the acknowledgement's code when accepted: Success, or
	// NoMatchingSubscribers (see informativeCode).
	code packet.ReasonCode
	// watch, when set (WatchStore), learns the local outcome once.
	watch func(error)
}

// Pause implements Pauser: the reader waits after this publish.
func (p *pendingAck) Pause(wait <-chan struct{}) {
	p.c.ackMu.Lock()
	p.c.pauseFor(wait)
	p.c.ackMu.Unlock()
}

// WatchStore implements StoreWatcher.
func (p *pendingAck) WatchStore(f func(error)) { p.watch = f }

// settled reports the local outcome to the watching hook, once.
func (p *pendingAck) settled(err error) {
	if f := p.watch; f != nil {
		p.watch = nil
		f(err)
	}
}

// informativeCode is the code acknowledging m, which the reader has just
// routed on the fast path: 0x10 No matching subscribers when it reached
// no session, for an MQTT 5 client and a message that is not retained (a
// retained one waits for the subscribers to come). Only the fast path
// runs without publish hooks, so a hook that takes the message elsewhere
// (the cluster forwarding to other nodes) never gets this code.
func (c *conn) informativeCode(m *Message) packet.ReasonCode {
	if c.noTargets && c.version == packet.V5 && !m.Retain {
		return packet.NoMatchingSubscribers
	}
	return packet.Success
}

// stored is the persister's answer for a message whose acknowledgement
// waits for the store.
func (p *pendingAck) stored(err error) {
	c := p.c
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	p.storing = false
	if err == nil {
		err = p.ticket.failure() // a write before the barrier may have failed in an earlier batch
	}
	if err != nil {
		c.srv.stats.StoreFailures.Add(1)
		c.srv.opts.Logger.Error("store write failed: publish refused", "component", "broker", "client", c.info.ClientID, "topic", p.msg.Topic, "err", err)
		p.err = errStoreFailed
	}
	p.settled(p.err)
	c.drainAcksLocked()
}

// errStoreFailed refuses a publish whose storing failed (disk full, I/O
// error): MQTT 5 reason 0x80.
var errStoreFailed = packet.UnspecifiedError

// Resolve implements Resolver. The remaining hooks run without c.ackMu
// held, so that a hook may resolve another deferred publish of the same
// connection from inside its call.
func (p *pendingAck) Resolve(err error) {
	c := p.c
	if err == nil {
		err = c.srv.runHooks(p.msg, p.nextHook, p)
		if errors.Is(err, ErrDeferred) {
			return
		}
	}
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if p.done {
		return
	}
	p.done, p.err = true, err
	if err != nil {
		p.settled(err) // a later hook refused it
	}
	c.drainAcksLocked()
}

// handlePublish decodes and admits one PUBLISH from the client.
func (c *conn) handlePublish(h packet.FixedHeader, body []byte) error {
	var p packet.Publish
	if err := packet.DecodePublish(h, body, c.version, &p); err != nil {
		return err
	}
	tp, err := c.resolveTopic(&p)
	if err != nil {
		return err
	}
	if p.Retain && c.srv.opts.RetainDisabled {
		return packet.RetainNotSupported
	}
	c.srv.stats.MessagesIn.Add(1)
	c.srv.stats.MessagesInByQoS[p.QoS].Add(1)
	persisted := false
	if p.QoS == 2 {
		dup, held, err := c.admitQoS2(p.PacketID)
		if err != nil || dup {
			return err
		}
		persisted = held
	} else if p.QoS == 1 {
		if err := c.admitQoS1(); err != nil {
			return err
		}
	}
	var m *Message
	if !p.Retain && len(c.srv.hooks) == 0 && c.srv.persist == nil {
		// Only sessions' deliveries will hold it: its payload can go back
		// to a pool once they are done with it (see acquire).
		m = newPooledMessage(&p, tp, time.Now())
	} else {
		m = NewMessage(&p, tp, time.Now())
	}
	m.Origin = OriginClient
	m.ClientID = c.info.ClientID
	m.Username = c.info.Username
	if p.QoS == 2 {
		m.PacketID, m.Dup = p.PacketID, p.Dup
	}
	if c.srv.authz != nil && !c.srv.authz.CanPublish(&c.info, m.Topic) {
		return c.finishRefused(m, p.PacketID, packet.NotAuthorized)
	}
	if p.QoS == 0 {
		if err := c.srv.runHooks(m, 0, nil); err != nil {
			c.srv.stats.RefusedPublishes.Add(1)
			return nil
		}
		c.srv.routeVia(m, c)
		m.release()
		return nil
	}
	if err := c.pipeline(m, p.PacketID, persisted); err != nil {
		return err
	}
	c.awaitRoom()
	return nil
}

// pauseFor remembers a congested session for the reader to wait for. The
// caller holds c.ackMu.
func (c *conn) pauseFor(wait <-chan struct{}) {
	if wait != nil && c.pause == nil {
		c.pause = wait
	}
}

// awaitRoom pauses the reader while a session this client published to is
// congested: the client's socket is not read, so TCP slows it down instead
// of the broker dropping its QoS 1/2 messages. The pause ends when the
// session has drained, goes offline or ends, when this connection stops,
// or after StuckTimeout (by then a subscriber that accepts nothing has
// been disconnected).
func (c *conn) awaitRoom() {
	c.ackMu.Lock()
	wait := c.pause
	c.pause = nil
	c.ackMu.Unlock()
	if wait == nil {
		return
	}
	// The reader waits without reading: what it routed and acknowledged
	// leaves now.
	c.sendDeferred()
	c.srv.awaitRoom(wait, c.stopped)
}

// resolveTopic applies an inbound topic alias and validates the topic.
func (c *conn) resolveTopic(p *packet.Publish) ([]byte, error) {
	tp := p.Topic
	if len(tp) == 0 && !p.Props.IsSet(packet.PropTopicAlias) {
		return nil, packet.ProtocolError // MQTT 5.0 section 3.3.2.1
	}
	if p.Props.IsSet(packet.PropTopicAlias) {
		alias := p.Props.TopicAlias
		if alias == 0 || alias > c.srv.opts.TopicAliasMaximum {
			return nil, packet.TopicAliasInvalid
		}
		if len(tp) == 0 {
			known, ok := c.inAliases[alias]
			if !ok {
				return nil, packet.ProtocolError
			}
			return bytesOf(known), nil
		}
		if c.inAliases == nil {
			c.inAliases = make(map[uint16]string)
		}
		c.inAliases[alias] = string(tp)
	}
	if err := topic.ValidateName(stringOf(tp)); err != nil || c.srv.topicTooDeep(stringOf(tp)) {
		return nil, packet.TopicNameInvalid
	}
	return tp, nil
}

// admitQoS1 counts an inbound QoS 1 message against Receive Maximum.
func (c *conn) admitQoS1() error {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if c.inflightIn >= int(c.srv.opts.ReceiveMaximum) {
		return packet.ReceiveMaximumExceeded
	}
	c.inflightIn++
	return nil
}

// admitQoS2 registers an inbound QoS 2 packet identifier. It reports dup
// when the identifier is already held: the message was received before,
// so it is acknowledged again but not routed again; and persisted when
// the identifier went to the persister.
func (c *conn) admitQoS2(pid uint16) (dup, persisted bool, err error) {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if c.sess.holdsQoS2(pid) {
		if !c.ackPendingLocked(pid) {
			c.queueAckLocked(packet.PUBREC, pid, packet.Success)
		}
		return true, false, nil
	}
	if c.inflightIn >= int(c.srv.opts.ReceiveMaximum) {
		return false, false, packet.ReceiveMaximumExceeded
	}
	persisted = c.sess.holdQoS2(pid)
	c.inflightIn++
	return false, persisted, nil
}

func (c *conn) ackPendingLocked(pid uint16) bool {
	for _, p := range c.acks {
		if p.pid == pid && p.qos == 2 {
			return true
		}
	}
	return false
}

// pipeline runs the hooks for a QoS 1/2 message, routes it, waits for the
// store when it had to be stored, and acknowledges it in arrival order.
func (c *conn) pipeline(m *Message, pid uint16, persisted bool) error {
	c.ackMu.Lock()
	if len(c.acks) == 0 && len(c.srv.hooks) == 0 {
		// Fast path: no earlier publish and no hook to wait for.
		stored, t, wait := c.srv.routeVia(m, c)
		c.pauseFor(wait)
		code := c.informativeCode(m)
		if stored || persisted {
			p := &pendingAck{c: c, msg: m, pid: pid, qos: m.QoS, done: true, routed: true, storing: true, ticket: t, code: code}
			c.acks = append(c.acks, p)
			c.srv.persistOps(p.stored) // a barrier: done once all before it is durable
		} else {
			c.replyLocked(m.QoS, pid, code)
			m.release() // routed; a pendingAck above keeps its reference
		}
		c.ackMu.Unlock()
		return nil
	}
	p := &pendingAck{c: c, msg: m, pid: pid, qos: m.QoS, persisted: persisted}
	c.acks = append(c.acks, p)
	c.ackMu.Unlock()
	// The hooks run without c.ackMu held: one may resolve an earlier
	// deferred publish of this connection from inside its call.
	err := c.srv.runHooks(m, 0, p)
	if errors.Is(err, ErrDeferred) {
		return nil
	}
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	p.done, p.err = true, err
	if err != nil {
		p.settled(err)
	}
	return c.drainAcksLocked()
}

// drainAcksLocked routes and acknowledges finished publishes from the head
// of the queue, so acknowledgements leave in arrival order. The caller
// holds c.ackMu.
func (c *conn) drainAcksLocked() error {
	c.routeDecidedLocked()
	var refused error
	n := 0
	for ; n < len(c.acks); n++ {
		p := c.acks[n]
		if !p.done || p.storing {
			break
		}
		if p.err == nil && p.code != packet.Success {
			c.ackLocked(p.qos, p.pid, p.code)
		} else if p.err == nil {
			c.ackLocked(p.qos, p.pid, nil)
		} else if errors.Is(p.err, ErrDuplicate) {
			c.ackLocked(p.qos, p.pid, nil) // accepted before (on another node): not routed again
		} else if err := c.refusalLocked(p.msg, p.pid, p.err); err != nil && refused == nil {
			refused = err
		}
		c.acks[n] = nil
	}
	c.acks = c.acks[n:]
	if len(c.acks) == 0 {
		c.acks = c.acks[:0:0]
	}
	if refused != nil {
		c.disconnect(refused)
	}
	return refused
}

// routeDecidedLocked routes, in arrival order, every accepted publish
// whose hooks are done, up to the first one still in its hooks. A publish
// that had to be stored waits for its barrier, but the ones behind it are
// routed and stored meanwhile: a connection with many publishes in flight
// puts them all into the next group commit, while the acknowledgements
// still leave in order. The caller holds c.ackMu.
func (c *conn) routeDecidedLocked() {
	for _, p := range c.acks {
		if !p.done {
			return
		}
		if p.err != nil || p.routed {
			continue
		}
		p.routed = true
		stored, t, wait := c.srv.route(p.msg)
		c.pauseFor(wait)
		if stored || p.persisted {
			p.storing, p.ticket = true, t
			c.srv.persistOps(p.stored) // a barrier: done once all before it is durable
		} else {
			p.settled(nil) // nothing to write here
		}
	}
}

// finishRefused refuses a publish before it entered the pipeline.
func (c *conn) finishRefused(m *Message, pid uint16, err error) error {
	if m.QoS == 0 {
		c.srv.stats.RefusedPublishes.Add(1)
		return nil
	}
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if len(c.acks) > 0 {
		c.acks = append(c.acks, &pendingAck{c: c, msg: m, pid: pid, qos: m.QoS, done: true, err: err})
		return nil
	}
	return c.refusalLocked(m, pid, err)
}

// refusalLocked answers a refused QoS 1/2 publish: a v5 client gets the
// reason code; a v3 client is acknowledged when access control refused it
// (as other brokers do) and disconnected otherwise, so that it sends the
// message again later. The caller holds c.ackMu.
func (c *conn) refusalLocked(m *Message, pid uint16, err error) error {
	c.srv.stats.RefusedPublishes.Add(1)
	rc := reasonOf(err)
	if c.version == packet.V5 {
		c.ackLocked(m.QoS, pid, err) // err, not rc: a Refusal's text goes along
		return nil
	}
	if rc == packet.NotAuthorized {
		c.ackLocked(m.QoS, pid, nil)
		return nil
	}
	return rc
}

// ackLocked queues PUBACK or PUBREC; for a refused QoS 2 message the
// identifier is released at once. The caller holds c.ackMu.
func (c *conn) ackLocked(qos byte, pid uint16, rc error) {
	code := packet.Success
	if rc != nil {
		code = reasonOf(rc)
	}
	t := packet.PUBREC
	if qos == 1 {
		c.inflightIn--
		t = packet.PUBACK
	} else if code.IsError() {
		c.sess.releaseQoS2(pid, nil)
		c.inflightIn--
	}
	var r *Refusal
	if c.version == packet.V5 && errors.As(rc, &r) && r.Text != "" {
		a := packet.Ack{Type: t, PacketID: pid, ReasonCode: code}
		a.Props.Set(packet.PropReasonString)
		a.Props.ReasonString = r.Text
		c.outMu.Lock()
		c.ctrl = a.Append(c.ctrl, c.version)
		c.outMu.Unlock()
		c.wakeWriter()
		return
	}
	c.queueAckLocked(t, pid, code)
}

func (c *conn) queueAckLocked(t packet.Type, pid uint16, code packet.ReasonCode) {
	c.appendAckLocked(t, pid, code)
	c.wakeWriter()
}

// replyLocked queues the acknowledgement of a publish the reader has just
// routed (PUBACK, or PUBREC), for the reader to send before it reads on
// (see conn.Read). Only the reader calls it; it holds c.ackMu.
func (c *conn) replyLocked(qos byte, pid uint16, code packet.ReasonCode) {
	t := packet.PUBREC
	if qos == 1 {
		c.inflightIn--
		t = packet.PUBACK
	}
	c.appendAckLocked(t, pid, code)
	c.replies = true
}

func (c *conn) appendAckLocked(t packet.Type, pid uint16, code packet.ReasonCode) {
	a := packet.Ack{Type: t, PacketID: pid, ReasonCode: code}
	c.outMu.Lock()
	c.ctrl = a.Append(c.ctrl, c.version)
	c.outMu.Unlock()
}

// handleAck processes PUBACK, PUBREC, PUBREL and PUBCOMP from the client.
func (c *conn) handleAck(a *packet.Ack) error {
	switch a.Type {
	case packet.PUBACK, packet.PUBCOMP:
		more, err := c.sess.completeAck(a.PacketID, a.Type)
		if err != nil {
			return err
		}
		if more {
			c.wakeWriter()
		}
	case packet.PUBREC:
		if a.ReasonCode.IsError() {
			more, err := c.sess.completeAck(a.PacketID, packet.PUBREC)
			if err != nil {
				return err
			}
			if more {
				c.wakeWriter()
			}
			return nil
		}
		found, err := c.sess.release(a.PacketID)
		if err != nil {
			return err
		}
		code := packet.Success
		if !found {
			code = packet.PacketIdentifierNotFound
		}
		c.queueCtrl(func(b []byte) []byte {
			r := packet.Ack{Type: packet.PUBREL, PacketID: a.PacketID, ReasonCode: code}
			return r.Append(b, c.version)
		})
	case packet.PUBREL:
		c.handlePubrel(a.PacketID)
	}
	return nil
}

// handlePubrel releases an inbound QoS 2 identifier and answers PUBCOMP;
// for a durable session only once the release is on disk, so that a new
// message reusing the identifier after a restart is not taken for a
// duplicate.
func (c *conn) handlePubrel(pid uint16) {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if c.ackPendingLocked(pid) {
		c.queueAckLocked(packet.PUBCOMP, pid, packet.PacketIdentifierNotFound)
		return
	}
	held, deferred := c.sess.releaseQoS2(pid, func(error) {
		// Even when the delete failed the identifier is released in
		// memory; the worst case after a restart is a duplicate dropped.
		c.ackMu.Lock()
		c.queueAckLocked(packet.PUBCOMP, pid, packet.Success)
		c.ackMu.Unlock()
	})
	if !held {
		c.queueAckLocked(packet.PUBCOMP, pid, packet.PacketIdentifierNotFound)
		return
	}
	c.inflightIn--
	if !deferred {
		c.appendAckLocked(packet.PUBCOMP, pid, packet.Success)
		c.replies = true // the reader's: see replyLocked
	}
}

// Refusal is a hook's refusal with a text for an MQTT 5 client (the
// acknowledgement's Reason String): the cluster's "Cluster starting".
type Refusal struct {
	Code packet.ReasonCode
	Text string
}

func (r *Refusal) Error() string { return r.Code.Error() + ": " + r.Text }

// Unwrap makes the code the refusal's reason (reasonOf, errors.Is).
func (r *Refusal) Unwrap() error { return r.Code }

// reasonOf maps an error to the reason code sent to the client.
func reasonOf(err error) packet.ReasonCode {
	var rc packet.ReasonCode
	if errors.As(err, &rc) {
		return rc
	}
	return packet.UnspecifiedError
}

// runHooks runs the publish hooks from index i. It returns nil, a
// refusal, or ErrDeferred (r keeps the position to resume from).
func (s *Server) runHooks(m *Message, i int, r *pendingAck) error {
	for ; i < len(s.hooks); i++ {
		var res Resolver = noResolver{}
		if r != nil {
			r.nextHook = i + 1
			res = r
		}
		if err := s.hooks[i].InterceptPublish(m, res); err != nil {
			if errors.Is(err, ErrDeferred) && r == nil {
				return packet.UnspecifiedError // QoS 0 cannot wait
			}
			return err
		}
	}
	return nil
}

// noResolver is handed to hooks for messages that cannot be deferred.
type noResolver struct{}

func (noResolver) Resolve(error) {}
