package broker

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"gantry/broker/topic"
)

// Moving a session between nodes (the cluster's "sessions follow the
// client"): the broker exposes the seams and knows nothing of the nodes.
//
//   - SessionClaimer is called on the reader of every new connection,
//     after its credentials were accepted and before its session is
//     attached, so that the cluster can take the client's session from
//     another node first (and close its connection there).
//   - TakeOver closes this node's connection of a client identifier
//     (DISCONNECT 0x8E, its will handled as for a takeover on one node)
//     and reports the session's subscriptions.
//   - ExportSession removes a session and returns it whole; ImportSession
//     adds one, its in-flight and queued messages ahead of what the
//     session queued here meanwhile (ImportSessionAfter: a later part of
//     one handover goes right after the earlier parts).
//   - LendSession hands a session over without deleting it: it leaves
//     this node's sessions and topic tree (nothing is delivered to it
//     here any more) but stays in the store until the receiving node has
//     confirmed that it stored it (LentSession.Release); without that
//     confirmation it comes back whole (LentSession.Return). A node that
//     restarts while a session is lent has it back from its store.
//
// Nothing here runs when no claimer is set (clustering off): the cost on
// a CONNECT is one nil check, and none on the publish path.

// SessionClaimer is told of every network connection about to attach to
// its session. It may block (it asks the other nodes); it runs on the
// connection's reader before the CONNACK, with no lock held.
type SessionClaimer interface {
	ClaimSession(info *ConnInfo, cleanStart bool, expiry uint32)
}

// SetSessionClaimer sets the claimer (nil: none). Call it before serving.
func (s *Server) SetSessionClaimer(c SessionClaimer) { s.claimer = c }

// SessionState is a session as it moves between nodes: its subscriptions,
// the QoS 1/2 messages in flight (in send order, with their packet
// identifiers) and queued (in order), and the inbound QoS 2 identifiers
// awaiting PUBREL; and the records of the messages its client
// acknowledged lately (delivered.go), which the taker drops its own
// copies of.
type SessionState struct {
	ClientID      string
	Expiry        uint32
	Subscriptions []SubscriptionRecord
	Inflight      []EntryRecord // State EntrySent or EntryReleased, PID set
	Queued        []EntryRecord
	InboundQoS2   []uint16
	Delivered     []PeerRecord
}

// SessionSummary is a persistent session as the cluster's directory
// lists it.
type SessionSummary struct {
	ClientID       string
	Expiry         uint32
	Connected      bool
	DisconnectedAt int64 // Unix ns; 0 while connected
	Subscriptions  []SubscriptionRecord
}

// TakeOver closes the network connection attached to clientID's session
// on this node, if any, as a takeover (DISCONNECT 0x8E to an MQTT 5
// client; the will is published, or scheduled after its delay, as when a
// client takes its session over on one node), and waits until it has
// detached. It returns the session's subscriptions and expiry and whether
// this node still holds a session for clientID (a session with expiry 0
// ends with its connection).
func (s *Server) TakeOver(clientID string) (*SessionState, bool) {
	for range 3 { // the client may reconnect here meanwhile
		s.mu.Lock()
		sess := s.sessions[clientID]
		if sess == nil || sess.inproc != nil {
			s.mu.Unlock()
			return nil, false
		}
		sess.mu.Lock()
		old := sess.conn
		if old == nil {
			st := &SessionState{ClientID: clientID, Expiry: sess.expiry, Subscriptions: sess.subscriptionsLocked()}
			sess.mu.Unlock()
			s.mu.Unlock()
			return st, true
		}
		sess.mu.Unlock()
		s.mu.Unlock()
		old.disconnect(errTakenOver)
		<-old.done
	}
	return nil, false
}

// subscriptionsLocked lists the session's subscriptions, sorted by filter.
// The caller holds sess.mu.
func (sess *session) subscriptionsLocked() []SubscriptionRecord {
	out := make([]SubscriptionRecord, 0, len(sess.subs))
	for f, sub := range sess.subs {
		out = append(out, SubscriptionRecord{Filter: f, Options: sub.opts, SubID: sub.subID})
	}
	slices.SortFunc(out, func(a, b SubscriptionRecord) int { return cmp.Compare(a.Filter, b.Filter) })
	return out
}

// ExportSession takes clientID's session over (see TakeOver), removes it
// from this node (memory, subscriptions and store) and returns it whole.
// A pending will is published when publishWill is set (the session ends:
// a clean start elsewhere), otherwise dropped (the client connected again
// before its delay passed). It reports false when this node holds no
// session for clientID.
func (s *Server) ExportSession(clientID string, publishWill bool) (*SessionState, bool) {
	if _, ok := s.TakeOver(clientID); !ok {
		return nil, false
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil || sess.inproc != nil {
		s.mu.Unlock()
		return nil, false
	}
	sess.mu.Lock()
	if sess.conn != nil { // reconnected here in between: it stays
		sess.mu.Unlock()
		s.mu.Unlock()
		return nil, false
	}
	st := sess.exportLocked()
	w, info := sess.will, sess.info
	sess.will = nil
	// In the same critical section: a delivery routed from now on, until
	// discardLocked takes the session out of the tree, is ignored rather
	// than queued behind the export and lost.
	sess.gone = true
	sess.mu.Unlock()
	s.discardLocked(sess)
	s.mu.Unlock()
	if w != nil && publishWill {
		s.publishWill(w, &info)
	}
	return st, true
}

// LentSession is a session handed to another node and kept here, out of
// reach (no connection attaches to it, nothing is delivered to it), until
// that node confirms it has stored it (Release) or fails to (Return).
type LentSession struct {
	srv  *Server
	sess *session
	st   *SessionState

	mu   sync.Mutex // guards over
	over bool       // released or returned
}

// State is the session as it was lent: what the other node imports.
func (l *LentSession) State() *SessionState { return l.st }

// LendSession takes clientID's session over (see TakeOver) and lends it:
// it returns the session whole, as ExportSession does, and takes it out
// of this node's sessions and topic tree (a delivery routed from now on
// is ignored: the claiming node has the subscriptions), but keeps it in
// the store until Release. Its pending will is dropped (the client
// connected again). It reports false when this node holds no session for
// clientID.
func (s *Server) LendSession(clientID string) (*LentSession, bool) {
	if _, ok := s.TakeOver(clientID); !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[clientID]
	if sess == nil || sess.inproc != nil {
		return nil, false
	}
	sess.mu.Lock()
	if sess.conn != nil { // reconnected here in between: it stays
		sess.mu.Unlock()
		return nil, false
	}
	st := sess.exportLocked()
	stopTimer(&sess.expiryTimer)
	stopTimer(&sess.willTimer)
	if sess.will != nil {
		sess.will = nil
		if sess.stored {
			sess.saveLocked(sess.disconnectedAt, nil) // kept without it, should this node restart
		}
	}
	// In the same critical section as the export: see ExportSession.
	sess.gone = true
	filters := make([]string, 0, len(sess.subs))
	for f := range sess.subs {
		filters = append(filters, f)
	}
	sess.mu.Unlock()
	for _, f := range filters {
		s.subs.Unsubscribe(sess, f)
		sess.nsubs.Add(-1)
	}
	delete(s.sessions, clientID)
	return &LentSession{srv: s, sess: sess, st: st}, true
}

// end marks l settled and reports whether it was not already.
func (l *LentSession) end() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return false
	}
	l.over = true
	return true
}

// Release deletes the lent session from the store: the other node has it.
// It does nothing once l was released or returned.
func (l *LentSession) Release() {
	if !l.end() {
		return
	}
	s, sess := l.srv, l.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	// A new session of the client here meanwhile wrote its own record
	// over this one's: it stays.
	if sess.stored && s.persist != nil && s.sessions[sess.id] == nil {
		s.persistOps(nil, PersistOp{Kind: DeleteSession, ClientID: sess.id})
	}
	sess.stored = false
	clear(sess.subs)
	sess.clearState()
}

// Return takes the lent session back as it was: subscribed again, its
// messages deliverable, its expiry counting from its disconnection. When
// a new session of the client was made here meanwhile, the lent one's
// messages go ahead of that one's queue instead (as new deliveries). It
// does nothing once l was released or returned.
func (l *LentSession) Return() error {
	if !l.end() {
		return nil
	}
	s, sess := l.srv, l.sess
	s.mu.Lock()
	if s.sessions[sess.id] != nil {
		s.mu.Unlock()
		st := *l.st
		st.Queued = append(slices.Clone(st.Inflight), st.Queued...)
		st.Inflight = nil
		for i := range st.Queued {
			st.Queued[i].PID, st.Queued[i].State = 0, 0
		}
		return s.ImportSession(&st)
	}
	defer s.mu.Unlock()
	sess.mu.Lock()
	sess.gone = false
	s.sessions[sess.id] = sess
	if sess.expiry != 0xFFFFFFFF && !s.closed {
		left := time.Until(time.Unix(0, sess.disconnectedAt).Add(time.Duration(sess.expiry) * time.Second))
		sess.expiryTimer = time.AfterFunc(max(left, 0), func() { s.expire(sess) })
	}
	subs := sess.subscriptionsLocked()
	c := sess.conn
	sess.mu.Unlock()
	for _, r := range subs {
		group, _, _, _ := topic.ParseShared(r.Filter)
		sess.nsubs.Add(1) // before the tree insert: see router.collect
		s.subs.Subscribe(topic.Entry[*session]{Client: sess, Filter: r.Filter, Options: r.Options, SubID: r.SubID, Group: group})
	}
	if c != nil {
		c.wakeWriter()
	}
	return nil
}

// exportLocked is the whole state of sess. The caller holds sess.mu.
func (sess *session) exportLocked() *SessionState {
	st := &SessionState{ClientID: sess.id, Expiry: sess.expiry, Subscriptions: sess.subscriptionsLocked()}
	fl := make([]outflight, 0, len(sess.inflight))
	pids := make(map[uint64]uint16, len(sess.inflight))
	for pid, f := range sess.inflight {
		fl = append(fl, f)
		pids[f.seq] = pid
	}
	slices.SortFunc(fl, func(a, b outflight) int { return cmp.Compare(a.seq, b.seq) })
	for _, f := range fl {
		state := EntrySent
		if f.released {
			state = EntryReleased
		}
		st.Inflight = append(st.Inflight, EntryRecord{Msg: f.msg, QoS: f.qos, Retain: f.retain, SubIDs: f.subIDs(),
			State: state, PID: pids[f.seq]})
	}
	for i := sess.queue.head; i < len(sess.queue.items); i++ {
		d := &sess.queue.items[i]
		if d.qos == 0 {
			continue
		}
		st.Queued = append(st.Queued, EntryRecord{Msg: d.msg, QoS: d.qos, Retain: d.retain, SubIDs: d.subIDs()})
	}
	for pid := range sess.qos2In {
		st.InboundQoS2 = append(st.InboundQoS2, pid)
	}
	slices.Sort(st.InboundQoS2)
	st.Delivered = sess.recent.list(time.Now())
	return st
}

// ImportSession adds st to clientID's session on this node, creating it
// offline (its expiry counting from now) when there is none: the
// subscriptions it lacks (put in the tree without retained messages: they
// are resumed, not new), then st's in-flight messages (sent again with
// DUP and their identifiers when the client attaches), st's queued
// messages, and after them what the session had queued here, less the
// messages st carries too (the same Message.Record: published while the
// session moved, each node queued it), and those its client acknowledged
// on the other node (SessionState.Delivered). With
// durability it is stored like any session, and ImportSession returns once
// the store has it (or failed to write it: the error). An in-process
// client's identifier is refused.
func (s *Server) ImportSession(st *SessionState) error {
	_, err := s.ImportSessionAfter(st, nil)
	return err
}

// ImportSessionAfter is ImportSession for a session handed over in parts:
// st's queued messages go right after after in the session's queue (the
// last message of the previous part), ahead of the rest; when after is
// nil, or no longer queued (sent meanwhile, and with it every earlier
// part), ahead of the whole queue. It returns the message the next part
// goes after: the last one it queued, or after when it queued none.
func (s *Server) ImportSessionAfter(st *SessionState, after *Message) (*Message, error) {
	stored := make(chan error, 1)
	waits, last, err := s.importSession(st, after, func(err error) { stored <- err })
	if err == nil && waits {
		err = <-stored
	}
	return last, err
}

// importSession is ImportSessionAfter without the wait: it reports
// whether done will be called once the store has the session.
func (s *Server) importSession(st *SessionState, after *Message, done func(error)) (bool, *Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[st.ClientID]
	if sess != nil && sess.inproc != nil {
		return false, after, ErrNotAuthorized
	}
	if sess == nil {
		sess = newSession(s, st.ClientID)
		sess.expiry = st.Expiry
		sess.info = ConnInfo{ClientID: st.ClientID}
		sess.disconnectedAt = time.Now().UnixNano()
		s.sessions[st.ClientID] = sess
		if st.Expiry != 0xFFFFFFFF && !s.closed {
			sess.expiryTimer = time.AfterFunc(time.Duration(st.Expiry)*time.Second, func() { s.expire(sess) })
		}
	}
	sess.mu.Lock()
	var added []SubscriptionRecord
	for _, r := range st.Subscriptions {
		if _, had := sess.subs[r.Filter]; had {
			continue
		}
		if _, _, _, err := topic.ParseShared(r.Filter); err != nil {
			continue
		}
		sess.setSub(r.Filter, subscription{opts: r.Options, subID: r.SubID})
		sess.nsubs.Add(1) // before the tree insert: see router.collect
		added = append(added, r)
	}
	last := sess.importEntriesLocked(st, after)
	// The store calls done in submission order: once the session's record
	// is written, its entries written before it are too.
	waits := sess.saveLocked(sess.disconnectedAt, done)
	c := sess.conn
	sess.mu.Unlock()
	for _, r := range added {
		group, _, _, _ := topic.ParseShared(r.Filter)
		s.subs.Subscribe(topic.Entry[*session]{Client: sess, Filter: r.Filter, Options: r.Options, SubID: r.SubID, Group: group})
	}
	if c != nil {
		c.wakeWriter() // connected here already: the imported messages follow what it has
	}
	return waits, last, nil
}

// importEntriesLocked puts st's messages ahead of the session's queue, or
// right after the queued delivery of message after. An imported in-flight
// message whose identifier is taken here, or any when a connection is
// attached already (its resends went out when it attached), is queued
// instead: sent again as a new delivery. A delivery queued here behind
// them that names the record of a message st carries is dropped: the
// imported copy is the one in place; so is one st's client acknowledged
// on the other node already (st.Delivered). With durability every entry
// behind the imported ones is stored again, in the new order (those
// ahead of them were stored before them already). The caller holds
// sess.mu. It returns the last message it queued (after when none).
func (sess *session) importEntriesLocked(st *SessionState, after *Message) *Message {
	if len(st.Inflight) == 0 && len(st.Queued) == 0 && len(st.InboundQoS2) == 0 && len(st.Delivered) == 0 {
		return after
	}
	last := after
	mine := sess.queue
	sess.queue = deque{}
	keep := mine.head
	if after != nil {
		for i := mine.head; i < len(mine.items); i++ {
			if mine.items[i].msg == after {
				keep = i + 1
				break
			}
		}
	}
	for i := mine.head; i < keep; i++ {
		sess.queue.pushBack(mine.items[i])
	}
	var front []EntryRecord
	for _, e := range st.Inflight {
		if _, used := sess.inflight[e.PID]; used || e.PID == 0 || sess.conn != nil {
			front = append(front, e)
			continue
		}
		d := entryDelivery(e)
		sess.persistEntryLocked(&d, nil)
		sess.entryStateLocked(d.entry, e.State, e.PID)
		sess.seq++
		sess.setInflight(e.PID, outflight{delivery: d, seq: sess.seq, released: e.State == EntryReleased})
	}
	for _, e := range append(front, st.Queued...) {
		d := entryDelivery(e)
		sess.persistEntryLocked(&d, nil)
		sess.queue.pushBack(d)
		last = d.msg
	}
	carried := carriedRecords(st)
	for i := keep; i < len(mine.items); i++ {
		d := mine.items[i]
		sess.forgetEntryLocked(d.entry)
		if rec := d.msg.Record; rec != (PeerRecord{}) && carried[rec] {
			// Queued here too: published while the session was moving,
			// it reached both nodes. The imported copy keeps its place.
			d.msg.release() // the queue's reference
			sess.srv.stats.HandoverDuplicates.Add(1)
			continue
		}
		d.entry = 0
		sess.persistEntryLocked(&d, nil)
		sess.queue.pushBack(d)
	}
	sess.relieveLocked(false)
	sess.rememberLocked(carried)
	for _, pid := range st.InboundQoS2 {
		if _, held := sess.qos2In[pid]; held {
			continue
		}
		sess.holdQoS2Locked(pid)
		if sess.durable() {
			sess.srv.persistOps(nil, PersistOp{Kind: PersistInboundQoS2, ClientID: sess.id, PID: pid})
		}
	}
	return last
}

// importedFor is how long a session remembers the records of the messages
// a handover brought: a copy of one that reaches this node only after the
// import (from a peer whose stream to this node lagged behind its stream
// to the old holder, or the old holder's own publish) is dropped rather
// than queued twice. A later one still arrives twice.
const importedFor = 10 * time.Second

// importedRecords is the records a session's handovers brought, each
// remembered importedFor from the import that brought it. One deadline
// for the whole set, pushed back by every import, kept the records of
// every import since the first for as long as the session kept moving
// (a client flapping between nodes): the set only grew.
type importedRecords struct {
	recs  map[PeerRecord]time.Time // each record's end
	until time.Time                // the latest end: the set is over then
	// forget drops the set once it is over, for a session that gets no
	// message after its import (nothing else would look at it).
	forget *time.Timer
}

// had reports whether rec came with a handover that is not over at now;
// a record found is forgotten (a stream delivers it once). The caller
// holds the session's mu.
func (ir *importedRecords) had(rec PeerRecord, now time.Time) bool {
	if ir == nil || rec == (PeerRecord{}) {
		return false
	}
	end, ok := ir.recs[rec]
	if ok {
		delete(ir.recs, rec)
	}
	return ok && !now.After(end)
}

// over reports whether every record's time has passed at now.
func (ir *importedRecords) over(now time.Time) bool { return ir == nil || now.After(ir.until) }

// add returns ir (a new set when nil or over) with the records carried
// by an import at now, less those whose time has passed. The caller holds
// the session's mu.
func (ir *importedRecords) add(carried map[PeerRecord]bool, now time.Time) *importedRecords {
	if ir.over(now) {
		ir = &importedRecords{recs: make(map[PeerRecord]time.Time, len(carried))}
	}
	for r, end := range ir.recs {
		if now.After(end) {
			delete(ir.recs, r)
		}
	}
	end := now.Add(importedFor)
	for r := range carried {
		ir.recs[r] = end
	}
	ir.until = end
	return ir
}

// checkImportedLocked drops sess.imported once it is over. The caller
// holds sess.mu.
func (sess *session) checkImportedLocked(now time.Time) {
	if ir := sess.imported; ir != nil && ir.over(now) {
		ir.forget.Stop()
		sess.imported = nil
	}
}

// rememberLocked adds the records of an import to sess.imported, and
// makes sure they are dropped once over even if no message comes. The
// caller holds sess.mu.
func (sess *session) rememberLocked(carried map[PeerRecord]bool) {
	if len(carried) == 0 {
		return
	}
	old := sess.imported
	ir := old.add(carried, time.Now())
	sess.imported = ir
	if ir == old {
		ir.forget.Reset(importedFor + time.Millisecond)
		return
	}
	if old != nil {
		old.forget.Stop()
	}
	ir.forget = time.AfterFunc(importedFor+time.Millisecond, func() {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if sess.imported != ir {
			return // replaced, or dropped already
		}
		if now := time.Now(); !ir.over(now) {
			ir.forget.Reset(ir.until.Sub(now) + time.Millisecond) // another import since
			return
		}
		sess.imported = nil
	})
}

// carriedRecords is the set of the peer records (PeerRecord) named by
// st's messages and by its client's acknowledged ones (Delivered); nil
// when none names one.
func carriedRecords(st *SessionState) map[PeerRecord]bool {
	var out map[PeerRecord]bool
	if len(st.Delivered) > 0 {
		out = make(map[PeerRecord]bool, len(st.Inflight)+len(st.Queued)+len(st.Delivered))
		for _, r := range st.Delivered {
			out[r] = true
		}
	}
	for _, es := range [][]EntryRecord{st.Inflight, st.Queued} {
		for _, e := range es {
			if e.Msg == nil || e.Msg.Record == (PeerRecord{}) {
				continue
			}
			if out == nil {
				out = make(map[PeerRecord]bool, len(st.Inflight)+len(st.Queued))
			}
			out[e.Msg.Record] = true
		}
	}
	return out
}

func entryDelivery(e EntryRecord) delivery {
	d := delivery{msg: e.Msg, qos: e.QoS, retain: e.Retain}
	if len(e.SubIDs) > 0 {
		d.subID, d.more = e.SubIDs[0], e.SubIDs[1:]
	}
	return d
}

// PersistentSessions lists the sessions of network clients with a
// session expiry, connected or not, sorted by client identifier.
func (s *Server) PersistentSessions() []SessionSummary {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	out := make([]SessionSummary, 0, len(sessions))
	for _, sess := range sessions {
		sess.mu.Lock()
		if sess.inproc == nil && !sess.gone && sess.expiry > 0 {
			out = append(out, SessionSummary{ClientID: sess.id, Expiry: sess.expiry, Connected: sess.conn != nil,
				DisconnectedAt: sess.disconnectedAt, Subscriptions: sess.subscriptionsLocked()})
		}
		sess.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b SessionSummary) int { return cmp.Compare(a.ClientID, b.ClientID) })
	return out
}
