package broker

import (
	"time"

	"gantry/broker/packet"
	"gantry/broker/topic"
)

// retainedRequest asks for the retained messages of a new subscription.
type retainedRequest struct {
	filter string
	qos    byte
	subID  uint32
	check  *ConnInfo // the subscription is SubscribeChecked: send only what this client may read
}

// handleSubscribe adds the subscriptions, answers SUBACK, then queues the
// retained messages the subscriptions ask for.
//
// The retained messages are looked up before the SUBACK is queued, and
// the SUBACK and they are queued together under the session lock: a
// message published once the client has its SUBACK is not among them,
// and is delivered once, live, after them.
func (c *conn) handleSubscribe(sp *packet.Subscribe) error {
	var subID uint32
	if len(sp.Props.SubscriptionIDs) > 0 {
		subID = sp.Props.SubscriptionIDs[0]
	}
	ack := packet.Suback{PacketID: sp.PacketID, ReasonCodes: make([]packet.ReasonCode, len(sp.Subscriptions))}
	var wants []retainedRequest
	for i, sub := range sp.Subscriptions {
		rc, want, check, err := c.srv.subscribe(c.sess, &c.info, sub, subID)
		if err != nil {
			return err
		}
		ack.ReasonCodes[i] = rc
		if want {
			wants = append(wants, retainedRequest{filter: sub.Filter, qos: sub.Options.QoS, subID: subID, check: check})
		}
	}
	finish := func(err error) {
		if err != nil {
			// Not on disk: the client must not count on the subscription
			// surviving a restart.
			failCodes(ack.ReasonCodes)
			wants = nil
		}
		c.finishSubscribe(&ack, wants)
	}
	save := func() {
		c.sess.mu.Lock()
		// A durable session answers once its subscriptions are on disk: a
		// client that has its SUBACK keeps the subscription across a crash.
		deferred := c.sess.saveLocked(0, finish)
		c.sess.mu.Unlock()
		if !deferred {
			finish(nil)
		}
	}
	if h := c.srv.subHook; h != nil {
		var added []string
		for i, sub := range sp.Subscriptions {
			if !ack.ReasonCodes[i].IsError() {
				added = append(added, sub.Filter)
			}
		}
		if len(added) > 0 && h.SubscriptionsAdded(added, save) {
			return nil
		}
	}
	save()
	return nil
}

// finishSubscribe queues SUBACK and the retained messages asked for.
func (c *conn) finishSubscribe(ack *packet.Suback, wants []retainedRequest) {
	var retained []delivery
	for _, w := range wants {
		retained = c.srv.collectRetained(retained, w)
	}
	c.sess.mu.Lock()
	c.outMu.Lock()
	c.ctrl = ack.Append(c.ctrl, c.version)
	c.outMu.Unlock()
	for _, d := range retained {
		c.sess.enqueueLocked(d, nil)
	}
	c.sess.mu.Unlock()
	c.wakeWriter()
}

// subscribe adds one subscription of sess. It returns the SUBACK code,
// whether retained messages must be sent (and, for a SubscribeChecked
// subscription, the identity they are checked against), or a protocol
// error that closes the connection.
func (s *Server) subscribe(sess *session, info *ConnInfo, sub packet.Subscription, subID uint32) (packet.ReasonCode, bool, *ConnInfo, error) {
	group, _, shared, err := topic.ParseShared(sub.Filter)
	if err != nil || s.topicTooDeep(sub.Filter) {
		return packet.TopicFilterInvalid, false, nil, nil
	}
	if shared && sub.Options.NoLocal {
		return 0, false, nil, packet.ProtocolError
	}
	var check *ConnInfo
	if s.authz != nil && sess.inproc == nil {
		// Held until the subscription is in the tree, so that a
		// ReauthorizeSubscriptions running now sees it (see access.go);
		// released before the observers run.
		s.aclMu.RLock()
		switch s.subscribeAccess(info, sub.Filter) {
		case SubscribeRefused:
			s.aclMu.RUnlock()
			return packet.NotAuthorized, false, nil, nil
		case SubscribeChecked:
			check = readIdentity(info)
		}
	}
	unlockACL := func() {
		if s.authz != nil && sess.inproc == nil {
			s.aclMu.RUnlock()
		}
	}
	sess.mu.Lock()
	_, had := sess.subs[sub.Filter]
	if max := s.opts.MaxSubscriptionsPerClient; !had && max > 0 && sess.inproc == nil && len(sess.subs) >= max {
		sess.mu.Unlock()
		unlockACL()
		return packet.QuotaExceeded, false, nil, nil
	}
	sess.setSub(sub.Filter, subscription{opts: sub.Options, subID: subID, checked: check != nil})
	if check != nil {
		sess.readCheck.Store(check)
	}
	if !had {
		sess.nsubs.Add(1) // before the tree insert: see router.collect
	}
	sess.mu.Unlock()
	existed := s.subs.Subscribe(topic.Entry[*session]{Client: sess, Filter: sub.Filter, Options: sub.Options, SubID: subID, Group: group})
	unlockACL() // recorded: a ReauthorizeSubscriptions from now on sees it; observers run without it
	s.emit(Event{Kind: EventSubscribe, ClientID: sess.id, Username: info.Username, Filter: sub.Filter, QoS: sub.Options.QoS})
	want := !shared && !s.opts.RetainDisabled &&
		(sub.Options.RetainHandling == 0 || (sub.Options.RetainHandling == 1 && !existed))
	return packet.ReasonCode(sub.Options.QoS), want, check, nil
}

// sendRetained queues the retained messages matching a new subscription.
func (s *Server) sendRetained(sess *session, w retainedRequest) {
	for _, d := range s.collectRetained(nil, w) {
		sess.enqueue(d, nil, nil)
	}
}

// collectRetained appends the deliveries of the retained messages matching
// a new subscription to dst.
func (s *Server) collectRetained(dst []delivery, w retainedRequest) []delivery {
	now := time.Now().UnixNano()
	from := len(dst)
	s.retained.Match(w.filter, func(m *Message) bool {
		if !m.Expired(now) {
			dst = append(dst, delivery{msg: m, qos: min(m.QoS, w.qos), retain: true, subID: w.subID})
		}
		return true
	})
	if w.check != nil && s.reader != nil {
		// Checked outside the retained store's lock.
		keep := dst[:from]
		for _, d := range dst[from:] {
			if s.reader.CanRead(w.check, d.msg.Topic) {
				keep = append(keep, d)
			}
		}
		clear(dst[len(keep):])
		dst = keep
	}
	return dst
}

// handleUnsubscribe removes subscriptions and answers UNSUBACK.
func (c *conn) handleUnsubscribe(u *packet.Unsubscribe) error {
	ack := packet.Unsuback{PacketID: u.PacketID, ReasonCodes: make([]packet.ReasonCode, len(u.Filters))}
	for i, f := range u.Filters {
		ack.ReasonCodes[i] = c.srv.unsubscribe(c.sess, &c.info, f)
	}
	finish := func(err error) {
		if err != nil {
			failCodes(ack.ReasonCodes)
		}
		c.queueCtrl(func(b []byte) []byte { return ack.Append(b, c.version) })
	}
	c.sess.mu.Lock()
	deferred := c.sess.saveLocked(0, finish)
	c.sess.mu.Unlock()
	if !deferred {
		finish(nil)
	}
	return nil
}

func (s *Server) unsubscribe(sess *session, info *ConnInfo, filter string) packet.ReasonCode {
	if _, _, _, err := topic.ParseShared(filter); err != nil {
		return packet.TopicFilterInvalid
	}
	sess.mu.Lock()
	_, had := sess.subs[filter]
	delete(sess.subs, filter)
	sess.mu.Unlock()
	if !had {
		return packet.NoSubscriptionExisted
	}
	s.subs.Unsubscribe(sess, filter)
	sess.nsubs.Add(-1) // after the tree removal: see router.collect
	s.emit(Event{Kind: EventUnsubscribe, ClientID: sess.id, Username: info.Username, Filter: filter})
	return packet.Success
}

// MemoryRetained keeps retained messages in memory.
type MemoryRetained struct {
	idx *topic.Index[*Message]
}

// NewMemoryRetained returns an empty in-memory retained store.
func NewMemoryRetained() *MemoryRetained {
	return &MemoryRetained{idx: new(topic.Index[*Message])}
}

// Set implements RetainedStore.
func (r *MemoryRetained) Set(m *Message) error {
	r.idx.Set(m.Topic, m)
	return nil
}

// Delete implements RetainedStore.
func (r *MemoryRetained) Delete(tp string) error {
	r.idx.Delete(tp)
	return nil
}

// Match implements RetainedStore.
func (r *MemoryRetained) Match(filter string, fn func(m *Message) bool) {
	if _, inner, shared, err := topic.ParseShared(filter); err == nil && shared {
		filter = inner
	}
	r.idx.Match(filter, func(_ string, m *Message) bool { return fn(m) })
}

// Len implements RetainedStore.
func (r *MemoryRetained) Len() int { return r.idx.Len() }

// failCodes turns the successful codes of a SUBACK or UNSUBACK into 0x80
// (the store failed to record the change).
func failCodes(codes []packet.ReasonCode) {
	for i, rc := range codes {
		if !rc.IsError() {
			codes[i] = packet.UnspecifiedError
		}
	}
}
