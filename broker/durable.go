package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gantry/broker/topic"
)

// SetPersister makes the broker keep its state through p (durability):
// sessions of clients with a session expiry, their subscriptions, queued
// and inflight QoS 1/2 messages and inbound QoS 2 identifiers, pending
// wills, and retained messages. Call it, then Restore, before Serve.
//
// With a persister, a QoS 1/2 publish that had to be stored (a retained
// message, or a message for a session with an expiry) is acknowledged
// only once the store has made it durable; a failed write refuses it
// (0x80) and the broker goes on serving.
func (s *Server) SetPersister(p Persister) { s.persist = p }

// persistOps hands ops to the persister; done may be nil.
func (s *Server) persistOps(done func(error), ops ...PersistOp) {
	s.persist.Persist(ops, done)
}

// durable reports whether sess keeps its state on disk. The caller holds
// sess.mu.
func (sess *session) durable() bool {
	return sess.srv.persist != nil && sess.inproc == nil && sess.expiry > 0
}

// recordLocked is the durable form of sess. The caller holds sess.mu.
func (sess *session) recordLocked(disconnectedAt int64) *SessionRecord {
	r := &SessionRecord{ClientID: sess.id, Expiry: sess.expiry, DisconnectedAt: disconnectedAt,
		Subscriptions: make([]SubscriptionRecord, 0, len(sess.subs))}
	for f, sub := range sess.subs {
		r.Subscriptions = append(r.Subscriptions, SubscriptionRecord{Filter: f, Options: sub.opts, SubID: sub.subID})
	}
	if w := sess.will; w != nil {
		r.Will = &WillRecord{Msg: w.msg, Delay: w.delay, Expiry: w.expiry}
	}
	return r
}

// saveLocked writes sess's record (or deletes it when the session is no
// longer durable) and reports whether done will be called by the store;
// when it returns false the caller goes on at once. The caller holds
// sess.mu.
func (sess *session) saveLocked(disconnectedAt int64, done func(error)) bool {
	switch {
	case sess.durable():
		sess.stored = true
		sess.srv.persistOps(done, PersistOp{Kind: PersistSession, ClientID: sess.id, Session: sess.recordLocked(disconnectedAt)})
		return done != nil
	case sess.stored:
		sess.stored = false
		sess.srv.persistOps(done, PersistOp{Kind: DeleteSession, ClientID: sess.id})
		return done != nil
	}
	return false
}

// storeTicket collects the outcome of the writes one routed message
// caused. The publisher's acknowledgement waits for a barrier behind them;
// since the persister calls done in submission order, every write's
// outcome is recorded by the time the barrier's done runs.
type storeTicket struct {
	mu        sync.Mutex // guards err and withdrawn
	err       error      // first failure
	withdrawn []*session // sessions that took their delivery back (entryWrite)
}

// withdrew records that sess took its delivery of the message back.
func (t *storeTicket) withdrew(sess *session) {
	t.mu.Lock()
	t.withdrawn = append(t.withdrawn, sess)
	t.mu.Unlock()
}

// withdrawnSessions returns the sessions that took their delivery back.
func (t *storeTicket) withdrawnSessions() []*session {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.withdrawn
}

// record is the done of each write of the message.
func (t *storeTicket) record(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func (t *storeTicket) failure() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// ticketFor returns *t, making it on first use.
func ticketFor(t **storeTicket) *storeTicket {
	if *t == nil {
		*t = &storeTicket{}
	}
	return *t
}

// persistEntryLocked stores a QoS 1/2 delivery to a durable session and
// gives it its entry number; the write's outcome goes to *t. The caller
// holds sess.mu.
func (sess *session) persistEntryLocked(d *delivery, t **storeTicket) bool {
	if d.qos == 0 || !sess.durable() {
		return false
	}
	sess.entrySeq++
	d.entry = sess.entrySeq
	done := (func(error))(nil)
	switch {
	case t != nil && sentAgain(d.msg):
		w := &entryWrite{sess: sess, entry: d.entry, t: ticketFor(t), rec: d.msg.Record, peer: d.msg.Origin == OriginPeer}
		done = w.done
	case t != nil:
		done = ticketFor(t).record
	}
	sess.srv.persistOps(done, PersistOp{Kind: PersistEntry, ClientID: sess.id, Seq: d.entry, Entry: &EntryRecord{
		Seq: d.entry, Msg: d.msg, QoS: d.qos, Retain: d.retain, SubIDs: d.subIDs(),
	}})
	return true
}

// sentAgain reports whether m's publisher learns that a write of its
// routing failed and then sends m again: a client's QoS 1/2 publish is
// refused (0x80, or the connection of an MQTT 3.1.1 client is closed
// without acknowledgement) and the client publishes it again; a peer
// node's message is not confirmed to the peer, whose data-plane stream
// sends it again until this node confirms it. In-process publishers (LoT,
// connectors, wills) get the error but need not send again: their
// deliveries stay queued even when unwritten (kept while the node runs,
// lost if it stops), as before.
func sentAgain(m *Message) bool { return m.Origin == OriginClient || m.Origin == OriginPeer }

// entryWrite is the write of one queued delivery of a message whose
// publisher sends it again when the write fails (sentAgain).
type entryWrite struct {
	sess  *session
	entry uint64
	t     *storeTicket
	rec   PeerRecord // the message's
	// peer: rec names a peer's record, which the peer sends again under
	// the same name (a client's publish sent again is numbered anew).
	peer bool
}

// done records the write's outcome in the routing's ticket and, when the
// write failed, withdraws the delivery from the session's queue.
//
// Why withdraw: the store could not keep the message for this session
// (disk full, I/O error), so the node refuses it (its publisher gets 0x80,
// or the peer that sent it gets no confirmation) and the publisher sends
// it again: a client on a new attempt, a peer node with the same record of
// its stream, which it keeps and resends until this node confirms it
// stored it. Had the unwritten delivery stayed in the queue, every resend
// would queue the message once more, and a persistent subscriber that
// comes back would receive it once per attempt (a QoS 2 message, which
// MQTT delivers exactly once, twice or more on one connection: the full
// disk of make chaos). Withdrawn, the session holds the message only from
// the resend whose write succeeds, once the disk has room again: exactly
// once, and on disk, so that it survives a restart as everything the
// session holds must. Nothing is lost: whoever sent the message still
// holds it, because it was not acknowledged.
//
// A delivery already taken for sending (its session was online) is not
// withdrawn: its client has it, and it stays in flight until the client
// acknowledges it; a peer's resend skips that session (peerResends).
//
// done runs on the store's goroutine, before the barrier that answers the
// publisher (the store calls back in submission order): the delivery is
// gone from the queue before its publisher can send it again.
//
// A peer's message written while its session waits for the resend of an
// earlier one of the same peer (peerorder.go) is taken back too, and its
// stored entry deleted: queued now, it would stand ahead of that one.
func (w *entryWrite) done(err error) {
	if err == nil {
		if !w.peer || !w.sess.behindTakenBack(w.rec) || !w.sess.withdrawUnstored(w.entry) {
			return
		}
		// Not on the store's goroutine: Persist may wait for room in its
		// queue, which that goroutine makes.
		go w.sess.srv.persistOps(nil, PersistOp{Kind: DeleteEntry, ClientID: w.sess.id, Seq: w.entry})
		err = errBehindTakenBack
		w.t.record(err)
		w.t.withdrew(w.sess)
		w.logFailure(true, err)
		return
	}
	w.t.record(err)
	withdrawn := w.sess.withdrawUnstored(w.entry)
	if withdrawn {
		w.t.withdrew(w.sess) // a peer's resend goes to this session (peerResends)
		if w.peer && w.rec.Node != "" {
			w.sess.tookBack(w.rec)
		}
	}
	w.logFailure(withdrawn, err)
}

// logFailure logs, at debug level, a queued delivery whose write failed
// (or that was taken back behind one that did) and whether it was taken
// back: a full disk's duplicates were traced from these (make chaos with
// COREFLUX_LOG_LEVEL=debug).
func (w *entryWrite) logFailure(withdrawn bool, err error) {
	if log := w.sess.srv.opts.Logger; log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug("store: a queued delivery's write failed", "component", "broker", "client", w.sess.id,
			"entry", w.entry, "record", w.rec, "withdrawn", withdrawn, "err", err)
	}
}

// withdrawUnstored removes the queued delivery with entry number entry,
// whose write failed; a delivery taken for sending already stays. It
// reports whether one was removed.
func (sess *session) withdrawUnstored(entry uint64) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	q := &sess.queue
	// From the back: the failed write is of a recent delivery. Entry
	// numbers rise along the queue (0 for deliveries not stored), so the
	// search stops below entry.
	for i := len(q.items) - 1; i >= q.head; i-- {
		e := q.items[i].entry
		if e == entry {
			m := q.items[i].msg
			q.removeAt(i)
			m.release() // the queue's reference
			sess.srv.stats.StoreWithdrawn.Add(1)
			sess.relieveLocked(false)
			return true
		}
		if e != 0 && e < entry {
			break
		}
	}
	return false
}

// forgetEntryLocked deletes a stored delivery. The caller holds sess.mu.
func (sess *session) forgetEntryLocked(entry uint64) {
	if entry != 0 && sess.srv.persist != nil {
		sess.srv.persistOps(nil, PersistOp{Kind: DeleteEntry, ClientID: sess.id, Seq: entry})
	}
}

// entryStateLocked records that a stored delivery was sent or released.
// The caller holds sess.mu.
func (sess *session) entryStateLocked(entry uint64, state uint8, pid uint16) {
	if entry != 0 && sess.srv.persist != nil {
		sess.srv.persistOps(nil, PersistOp{Kind: PersistEntryState, ClientID: sess.id, Seq: entry, State: state, PID: pid})
	}
}

func (d *delivery) subIDs() []uint32 {
	if d.subID == 0 {
		return nil
	}
	return append([]uint32{d.subID}, d.more...)
}

// Restore loads the persister's state: retained messages, and sessions
// with their subscriptions, queues, inflight messages, inbound QoS 2
// identifiers and pending wills. A session whose expiry passed while the
// node was down is removed, and its pending will published. Call it once,
// after SetPersister and before Serve.
func (s *Server) Restore() error {
	if s.persist == nil {
		return nil
	}
	st, err := s.persist.Load()
	if err != nil {
		return err
	}
	for _, m := range st.Retained {
		if volatileRetained(m.Topic) {
			// Written by an older version: forget it, the statistics
			// are published again.
			s.persistOps(nil, PersistOp{Kind: DeleteRetained, Topic: m.Topic})
			continue
		}
		if err := s.retained.Set(m); err != nil {
			return fmt.Errorf("broker: restoring retained %q: %w", m.Topic, err)
		}
	}
	now := time.Now()
	var wills []*willSpec
	var infos []ConnInfo
	for i := range st.Sessions {
		if w, info := s.restoreSession(&st.Sessions[i], st.LastAlive, now); w != nil {
			wills, infos = append(wills, w), append(infos, info)
		}
	}
	for i, w := range wills {
		s.publishWill(w, &infos[i])
	}
	s.opts.Logger.Info("state restored", "component", "broker", "sessions", len(st.Sessions), "retained", len(st.Retained))
	return nil
}

// restoreSession rebuilds one stored session. It returns a will that is
// due now.
func (s *Server) restoreSession(ps *PersistedSession, lastAlive int64, now time.Time) (*willSpec, ConnInfo) {
	since := ps.DisconnectedAt
	if since == 0 {
		since = lastAlive // it was connected when the node stopped
	}
	gone := time.Unix(0, since)
	info := ConnInfo{ClientID: ps.ClientID}
	var will *willSpec
	if ps.Will != nil {
		will = &willSpec{msg: ps.Will.Msg, delay: ps.Will.Delay, expiry: ps.Will.Expiry}
		info.Username = ps.Will.Msg.Username
	}
	expiresAt := gone.Add(time.Duration(ps.Expiry) * time.Second)
	if ps.Expiry != 0xFFFFFFFF && !now.Before(expiresAt) {
		s.persistOps(nil, PersistOp{Kind: DeleteSession, ClientID: ps.ClientID})
		return will, info
	}
	sess := newSession(s, ps.ClientID)
	sess.expiry, sess.stored, sess.info = ps.Expiry, true, info
	sess.disconnectedAt = since
	s.restoreSubscriptions(sess, ps.Subscriptions)
	sess.restoreEntries(ps.Entries)
	for _, pid := range ps.InboundQoS2 {
		sess.holdQoS2Locked(pid)
	}
	s.mu.Lock()
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if ps.Expiry != 0xFFFFFFFF {
		sess.expiryTimer = time.AfterFunc(expiresAt.Sub(now), func() { s.expire(sess) })
	}
	if will != nil {
		due := gone.Add(time.Duration(min(will.delay, ps.Expiry)) * time.Second)
		if !now.Before(due) {
			sess.saveLocked(since, nil) // the will is published now: forget it
			return will, info
		}
		sess.will = will
		sess.willTimer = time.AfterFunc(due.Sub(now), func() { s.fireWill(sess) })
	}
	return nil, info
}

// restoreSubscriptions puts stored subscriptions back in the tree, without
// asking the authorizer again: they were allowed when they were made.
func (s *Server) restoreSubscriptions(sess *session, subs []SubscriptionRecord) {
	for _, r := range subs {
		group, _, _, err := topic.ParseShared(r.Filter)
		if err != nil {
			continue
		}
		sess.setSub(r.Filter, subscription{opts: r.Options, subID: r.SubID})
		sess.nsubs.Add(1)
		s.subs.Subscribe(topic.Entry[*session]{Client: sess, Filter: r.Filter, Options: r.Options, SubID: r.SubID, Group: group})
	}
}

// restoreEntries puts stored deliveries back: sent ones in flight (sent
// again with DUP on reconnect), the others in the queue.
func (sess *session) restoreEntries(entries []EntryRecord) {
	for _, e := range entries {
		d := delivery{msg: e.Msg, qos: e.QoS, retain: e.Retain, entry: e.Seq}
		if len(e.SubIDs) > 0 {
			d.subID, d.more = e.SubIDs[0], e.SubIDs[1:]
		}
		sess.entrySeq = max(sess.entrySeq, e.Seq)
		if e.State != EntryQueued && e.PID != 0 {
			sess.seq++
			sess.setInflight(e.PID, outflight{delivery: d, seq: sess.seq, released: e.State == EntryReleased})
			continue
		}
		sess.queue.pushBack(d)
	}
}
