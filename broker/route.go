package broker

import (
	"slices"
	"strings"
	"time"

	"gantry/broker/topic"
)

// router is per-routing scratch space, pooled so that routing a message to
// many subscribers does not allocate.
type router struct {
	matches []*topic.Entry[*session]
	targets []target
	index   map[*session]int // session → position in targets, for overlap
}

// target is one session's combined view of all its matching
// subscriptions: delivered once at the highest QoS (MQTT 5 semantics).
type target struct {
	sess  *session
	qos   byte
	rap   bool // retain as published
	subID uint32
	more  []uint32
}

func newRouter() any {
	return &router{
		matches: make([]*topic.Entry[*session], 0, 64),
		targets: make([]target, 0, 64),
		index:   make(map[*session]int),
	}
}

// onlineOrInproc accepts shared-subscription members that can take a
// message now.
func onlineOrInproc(s *session) bool {
	s.mu.Lock()
	ok := s.conn != nil || s.inproc != nil
	s.mu.Unlock()
	return ok
}

// PublishMessage routes m as if a client had published it, through the
// same pipeline as a network publish: the publish hooks (a QoS 1/2
// message a hook defers waits for its decision), routing on the caller's
// goroutine, and what a network publisher's acknowledgement waits for.
// For QoS 1/2 it returns once every write routing caused (offline queues
// of persistent sessions, the retained store) is durable, and reports a
// failed write as 0x80 (unspecified error), as the publisher's PUBACK
// would; and when a connected subscriber's queue is full it returns only
// once that session has drained, gone offline or StuckTimeout passed
// (backpressure instead of loss). It returns the hooks' refusal, if any.
// LoT, the device connectors and wills publish this way.
func (s *Server) PublishMessage(m *Message) error {
	if err := s.runPublishHooks(m); err != nil {
		s.stats.RefusedPublishes.Add(1)
		return err
	}
	stored, t, wait := s.route(m)
	var err error
	if stored && m.QoS > 0 {
		err = s.awaitStored(t, m)
	}
	s.awaitRoom(wait, nil)
	return err
}

// runPublishHooks runs the publish hooks for an in-process publish,
// waiting for a hook that defers a QoS 1/2 message.
func (s *Server) runPublishHooks(m *Message) error {
	if len(s.hooks) == 0 {
		return nil
	}
	if m.QoS == 0 {
		return s.runHooks(m, 0, nil)
	}
	w := &internalResolver{srv: s, msg: m, done: make(chan error, 1)}
	err := s.runHooksInternal(w, 0)
	if err == ErrDeferred {
		return <-w.done
	}
	return err
}

// awaitStored waits for a barrier behind the writes of t, the store
// ticket of m's routing, and returns errStoreFailed when one failed.
func (s *Server) awaitStored(t *storeTicket, m *Message) error {
	ch := make(chan error, 1)
	var tickets []*storeTicket
	if t != nil {
		tickets = []*storeTicket{t}
	}
	s.afterStored(tickets, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		s.stats.StoreFailures.Add(1)
		s.stats.RefusedPublishes.Add(1)
		s.opts.Logger.Error("store write failed: publish refused", "component", "broker", "client", m.ClientID,
			"origin", m.Origin.String(), "topic", m.Topic, "err", err)
		return errStoreFailed
	}
	return nil
}

// awaitRoom pauses a publisher while a session it published to is
// congested (wait, from route, not nil): until the session has drained,
// gone offline or ended, until stop closes or the server stops, or for
// StuckTimeout at most (by then a subscriber that accepts nothing has been
// disconnected). A network reader and an in-process publisher both wait
// here.
func (s *Server) awaitRoom(wait, stop <-chan struct{}) {
	if wait == nil {
		return
	}
	s.stats.PublisherPauses.Add(1)
	t := time.NewTimer(s.opts.StuckTimeout)
	defer t.Stop()
	select {
	case <-wait:
	case <-stop:
	case <-s.ctx.Done():
	case <-t.C:
	}
}

// Deliver routes a message from a peer node to local subscribers only:
// no hooks run, so it is neither forwarded again nor seen by LoT.
func (s *Server) Deliver(m *Message) {
	s.route(m)
}

// DeliverBatch routes messages from a peer node to local subscribers, as
// Deliver does, and reports whether routing them had to store anything
// (offline queues of persistent sessions, retained messages): done is then
// called, from the store's goroutine, once all of it is durable, with the
// first failure. When it returns false nothing waits and done is never
// called. The data plane confirms a reliable frame to its sender only
// after that.
//
// A message that names its record (PeerRecord) is recognised when it
// comes again after a failed answer (its sender resends what was not
// confirmed): it then reaches only the sessions that took their delivery
// back when their write failed, not those that hold it (see peerResends).
func (s *Server) DeliverBatch(ms []*Message, done func(error)) bool {
	var tickets []*storeTicket
	var routed []routedPeer
	persisted := false
	for _, m := range ms {
		p, t, _ := s.route(m)
		if m.Record != (PeerRecord{}) {
			if routed == nil {
				routed = make([]routedPeer, 0, len(ms))
			}
			routed = append(routed, routedPeer{rec: m.Record, t: t})
		}
		if p {
			persisted = true
			if t != nil {
				tickets = append(tickets, t)
			}
		}
	}
	if !persisted {
		return false
	}
	return s.afterStored(tickets, func(err error) {
		if err != nil {
			// Before done: the sender resends only once it learnt.
			s.noteResends(routed)
		}
		done(err)
	})
}

// afterStored calls done, from the store's goroutine, once everything
// handed to the persister so far is durable, with the first failure of
// tickets. It returns true (done will be called).
func (s *Server) afterStored(tickets []*storeTicket, done func(error)) bool {
	s.persistOps(func(err error) { // a barrier: done once all before it is durable
		for _, t := range tickets {
			if err == nil {
				err = t.failure()
			}
		}
		done(err)
	})
	return true
}

// route stores a retained message and delivers m to every matching
// session. It reports whether it handed anything to the persister: a
// QoS 1/2 publisher's acknowledgement must then wait for the store.
//
// The outcome of those writes is collected in the returned ticket (nil
// when nothing was persisted): see storeTicket.
//
// wait, when not nil, is the channel of a congested session: the
// publisher should pause until it is closed.
func (s *Server) route(m *Message) (persisted bool, t *storeTicket, wait <-chan struct{}) {
	return s.routeVia(m, nil)
}

// routeVia is route called by the reader of via, which the writers of the
// sessions it delivers to are handed to (see conn.deferWake) instead of
// being woken at once.
func (s *Server) routeVia(m *Message, via *conn) (persisted bool, t *storeTicket, wait <-chan struct{}) {
	if m.Retain {
		persisted = s.storeRetained(m, &t)
	}
	accept := onlineOrInproc
	var owed []*session
	resend := false
	if m.Origin == OriginPeer {
		owed, resend = s.resends.take(m.Record) // a resend after a failed write
	}
	if resend {
		// A shared group takes the member its first delivery went to
		// and that took it back; a group without one holds it already.
		accept = func(c *session) bool { return slices.Contains(owed, c) }
	}
	r := s.routers.Get().(*router)
	r.matches = s.subs.Match(m.Topic, r.matches[:0], accept)
	if m.Origin == OriginPeer {
		r.matches = peerGroupsOnly(r.matches, m.PeerGroups)
	}
	if len(r.matches) == 0 {
		s.routers.Put(r)
		if via != nil {
			via.noTargets = true
		}
		return persisted, t, nil
	}
	r.collect(m, s.reader)
	if resend {
		r.targets = onlyOwed(r.targets, owed)
	}
	if via != nil {
		via.noTargets = len(r.targets) == 0
	}
	for i := range r.targets {
		tg := &r.targets[i]
		d := delivery{msg: m, qos: min(m.QoS, tg.qos), retain: m.Retain && tg.rap, subID: tg.subID, more: tg.more}
		p, w := tg.sess.enqueue(d, &t, via)
		if p {
			persisted = true
		}
		if w != nil && wait == nil {
			wait = w
		}
	}
	r.reset()
	s.routers.Put(r)
	return persisted, t, wait
}

// peerGroupsOnly drops from matches the shared subscriptions a peer's
// message is not for (see Message.PeerGroups), in place.
func peerGroupsOnly(matches []*topic.Entry[*session], groups []string) []*topic.Entry[*session] {
	n := 0
	for _, e := range matches {
		if e.Group != "" && !slices.Contains(groups, e.Filter) {
			continue
		}
		matches[n] = e
		n++
	}
	clear(matches[n:])
	return matches[:n]
}

// collect folds the matched entries into one target per session. A
// session with a checked subscription gets only what ra lets it read.
func (r *router) collect(m *Message, ra ReadAuthorizer) {
	if len(r.matches) == 1 {
		e := r.matches[0]
		if e.Options.NoLocal && e.Client.id == m.ClientID && m.Origin == OriginClient {
			return
		}
		if ci := e.Client.readCheck.Load(); ci != nil && ra != nil && !ra.CanRead(ci, m.Topic) {
			return
		}
		r.targets = append(r.targets, target{sess: e.Client, qos: e.Options.QoS, rap: e.Options.RetainAsPublished, subID: e.SubID})
		return
	}
	for _, e := range r.matches {
		if e.Options.NoLocal && e.Client.id == m.ClientID && m.Origin == OriginClient {
			continue
		}
		if ci := e.Client.readCheck.Load(); ci != nil && ra != nil && !ra.CanRead(ci, m.Topic) {
			continue
		}
		if e.Client.nsubs.Load() <= 1 {
			// One subscription cannot overlap with itself: no need to
			// look for an earlier target of this session.
			r.targets = append(r.targets, target{sess: e.Client, qos: e.Options.QoS, rap: e.Options.RetainAsPublished, subID: e.SubID})
			continue
		}
		i, seen := r.index[e.Client]
		if !seen {
			r.index[e.Client] = len(r.targets)
			r.targets = append(r.targets, target{sess: e.Client, qos: e.Options.QoS, rap: e.Options.RetainAsPublished, subID: e.SubID})
			continue
		}
		t := &r.targets[i]
		t.qos = max(t.qos, e.Options.QoS)
		t.rap = t.rap || e.Options.RetainAsPublished
		if e.SubID != 0 {
			if t.subID == 0 {
				t.subID = e.SubID
			} else {
				t.more = append(t.more, e.SubID) // rare: overlapping subscriptions with identifiers
			}
		}
	}
}

func (r *router) reset() {
	clear(r.matches)
	r.matches = r.matches[:0]
	clear(r.targets)
	r.targets = r.targets[:0]
	if len(r.index) > 0 {
		clear(r.index)
	}
}

// VolatileRetainedPrefix is the topic tree whose retained messages are
// kept in memory only, never written to the persister: the broker's
// statistics ($SYS/broker/uptime, ...), which change on every interval and
// are published again after a restart. Writing them would cost a disk
// write per interval for nothing.
const VolatileRetainedPrefix = "$SYS/broker/"

func volatileRetained(tp string) bool { return strings.HasPrefix(tp, VolatileRetainedPrefix) }

// storeRetained sets or clears the retained message of m's topic, and
// reports whether it handed the change to the persister.
func (s *Server) storeRetained(m *Message, t **storeTicket) bool {
	var err error
	if len(m.Payload) == 0 {
		err = s.retained.Delete(m.Topic)
	} else {
		err = s.retained.Set(m)
	}
	if err != nil {
		s.opts.Logger.Error("retained store failed", "component", "broker", "topic", m.Topic, "err", err)
	}
	if s.persist == nil || volatileRetained(m.Topic) {
		return false
	}
	done := ticketFor(t).record
	if len(m.Payload) == 0 {
		s.persistOps(done, PersistOp{Kind: DeleteRetained, Topic: m.Topic})
	} else {
		s.persistOps(done, PersistOp{Kind: PersistRetained, Topic: m.Topic, Msg: m})
	}
	return true
}

// internalResolver completes a deferred publish made inside the broker.
type internalResolver struct {
	srv  *Server
	msg  *Message
	next int
	done chan error
}

func (w *internalResolver) Resolve(err error) {
	if err == nil {
		err = w.srv.runHooksInternal(w, w.next)
		if err == ErrDeferred {
			return
		}
	}
	w.done <- err // the publisher routes it (see PublishMessage)
}

func (s *Server) runHooksInternal(w *internalResolver, i int) error {
	for ; i < len(s.hooks); i++ {
		w.next = i + 1
		if err := s.hooks[i].InterceptPublish(w.msg, w); err != nil {
			return err
		}
	}
	return nil
}
