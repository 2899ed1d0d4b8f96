package broker

import (
	"cmp"
	"slices"
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
//     session queued here meanwhile.
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
// awaiting PUBREL.
type SessionState struct {
	ClientID      string
	Expiry        uint32
	Subscriptions []SubscriptionRecord
	Inflight      []EntryRecord // State EntrySent or EntryReleased, PID set
	Queued        []EntryRecord
	InboundQoS2   []uint16
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
	return st
}

// ImportSession adds st to clientID's session on this node, creating it
// offline (its expiry counting from now) when there is none: the
// subscriptions it lacks (put in the tree without retained messages: they
// are resumed, not new), then st's in-flight messages (sent again with
// DUP and their identifiers when the client attaches), st's queued
// messages, and after them what the session had queued here. With
// durability it is stored like any session, and ImportSession returns once
// the store has it (or failed to write it: the error). An in-process
// client's identifier is refused.
func (s *Server) ImportSession(st *SessionState) error {
	stored := make(chan error, 1)
	waits, err := s.importSession(st, func(err error) { stored <- err })
	if err != nil || !waits {
		return err
	}
	return <-stored
}

// importSession is ImportSession without the wait: it reports whether
// done will be called once the store has the session.
func (s *Server) importSession(st *SessionState, done func(error)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[st.ClientID]
	if sess != nil && sess.inproc != nil {
		return false, ErrNotAuthorized
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
	sess.importEntriesLocked(st)
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
	return waits, nil
}

// importEntriesLocked puts st's messages ahead of the session's queue. An
// imported in-flight message whose identifier is taken here, or any when
// a connection is attached already (its resends went out when it
// attached), is queued instead: sent again as a new delivery. With
// durability every entry is stored again, in the new order. The caller
// holds sess.mu.
func (sess *session) importEntriesLocked(st *SessionState) {
	if len(st.Inflight) == 0 && len(st.Queued) == 0 && len(st.InboundQoS2) == 0 {
		return
	}
	mine := sess.queue
	sess.queue = deque{}
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
	}
	for i := mine.head; i < len(mine.items); i++ {
		d := mine.items[i]
		sess.forgetEntryLocked(d.entry)
		d.entry = 0
		sess.persistEntryLocked(&d, nil)
		sess.queue.pushBack(d)
	}
	for _, pid := range st.InboundQoS2 {
		if _, held := sess.qos2In[pid]; held {
			continue
		}
		sess.holdQoS2Locked(pid)
		if sess.durable() {
			sess.srv.persistOps(nil, PersistOp{Kind: PersistInboundQoS2, ClientID: sess.id, PID: pid})
		}
	}
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
