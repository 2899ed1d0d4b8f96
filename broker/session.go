package broker

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
)

// delivery is one message on its way to one session.
type delivery struct {
	msg    *Message
	qos    byte   // effective QoS: min(message, subscription)
	retain bool   // retain flag to send
	subID  uint32 // first subscription identifier, 0 = none
	more   []uint32
	entry  uint64 // number in the durable store, 0 when not stored
}

// outflight is a QoS 1/2 delivery sent and not yet completed.
type outflight struct {
	delivery
	seq      uint64 // send order, for redelivery after reconnect
	released bool   // PUBREC received, PUBREL sent: waiting for PUBCOMP
}

// subscription is what a session remembers of one of its subscriptions.
type subscription struct {
	opts  packet.SubOptions
	subID uint32
	// checked: the authorizer decided SubscribeChecked (or, after a
	// change of the rules, SubscribeRefused): see session.readCheck.
	checked bool
}

// session is the state of one client identifier, connected or not.
//
// Lock order: Server.mu, then session.mu, then conn.outMu.
type session struct {
	id  string
	srv *Server

	mu     sync.Mutex              // guards every field below
	conn   *conn                   // attached connection, nil while offline
	inproc *Client                 // set for in-process clients
	expiry uint32                  // seconds kept after disconnect
	subs   map[string]subscription // by filter as subscribed
	// nsubs counts the session's subscriptions in the tree, read without
	// the lock by the router: raised before a tree insert and lowered
	// after a tree removal, so it is never below the entries a Match can
	// return for the session.
	nsubs atomic.Int32
	// gapped: peerGaps is not empty (written under mu).
	gapped atomic.Bool
	// readCheck, when set, is the identity every message routed to the
	// session is checked against (ReadAuthorizer.CanRead), because one of
	// its subscriptions is checked. Written under mu (access.go), read
	// without a lock by the router.
	readCheck atomic.Pointer[ConnInfo]
	queue     deque                // deliveries waiting for a send slot
	inflight  map[uint16]outflight // by packet identifier
	qos2In    map[uint16]struct{}  // inbound QoS 2 identifiers awaiting PUBREL
	seq       uint64
	nextPID   uint16
	gone      bool // removed from the server; deliveries are ignored
	stored    bool // the persister holds a record of this session
	// congested is closed when a queue that grew past the limit has
	// drained enough; publishers wait on it (backpressure). nil when the
	// session is not congested.
	congested chan struct{}
	// disconnectedAt is when the last connection closed (Unix ns), 0
	// while connected.
	disconnectedAt int64
	entrySeq       uint64 // last entry number given to a stored delivery
	// imported is the records of the messages a session handed over from
	// another node brought (see importEntriesLocked), nil when none.
	imported *importedRecords
	// recent is the records of the peer messages its client acknowledged
	// lately (delivered.go), nil when none.
	recent *recentDeliveries
	// peerGaps are, per peer node, the lowest record of its stream taken
	// back from the queue and not queued again yet (peerorder.go);
	// gapped, read without the lock, says whether there are any.
	peerGaps map[string]peerGap

	expiryTimer *time.Timer
	will        *willSpec // pending will of the last connection
	willTimer   *time.Timer
	info        ConnInfo // last connection's identity, for authorizing its will
}

// newSession returns an empty session. Its maps are made on first use:
// the session of an idle client has nothing in flight, and often no
// subscription (reading, ranging over and deleting from a nil map are
// fine; the writes go through setSub, setInflight and holdQoS2Locked).
func newSession(srv *Server, id string) *session {
	return &session{id: id, srv: srv}
}

// setSub records a subscription. The caller holds s.mu.
func (s *session) setSub(filter string, sub subscription) {
	if s.subs == nil {
		s.subs = make(map[string]subscription)
	}
	s.subs[filter] = sub
}

// setInflight records a message in flight. The caller holds s.mu.
func (s *session) setInflight(pid uint16, f outflight) {
	if s.inflight == nil {
		s.inflight = make(map[uint16]outflight)
	}
	s.inflight[pid] = f
}

// holdQoS2Locked records an inbound QoS 2 identifier. The caller holds
// s.mu.
func (s *session) holdQoS2Locked(pid uint16) {
	if s.qos2In == nil {
		s.qos2In = make(map[uint16]struct{})
	}
	s.qos2In[pid] = struct{}{}
}

// enqueue adds d to the session's queue and wakes its writer. QoS 0
// messages for an offline session are not kept. It reports whether d was
// handed to the persister (the publisher's acknowledgement must then wait
// for the store), and a channel to wait on when the session is congested
// (the publisher should pause until it is closed). With via, the reader of
// that connection wakes the writer later (see conn.deferWake).
func (s *session) enqueue(d delivery, t **storeTicket, via *conn) (persisted bool, wait <-chan struct{}) {
	s.mu.Lock()
	queued, persisted, wait := s.enqueueLocked(d, t)
	c, ic := s.conn, s.inproc
	s.mu.Unlock()
	if !queued {
		return persisted, wait
	}
	if c != nil {
		if via == nil || !via.deferWake(c) {
			c.wakeWriter()
		}
	} else if ic != nil {
		ic.wake()
	}
	return persisted, wait
}

// enqueueLocked adds d to the queue without waking the writer; it reports
// whether d was kept, whether it was handed to the persister (whose
// outcome then goes to *t; t may be nil), and the congestion channel of
// the session if it is congested. The caller holds s.mu.
//
// A full queue (MaxQueuedMessages) keeps what matters: an incoming QoS 0
// message is dropped; a QoS 1/2 message for a connected client is kept
// beyond the limit, up to twice it, and the session is marked congested
// so that publishers pause until its client has caught up (backpressure
// instead of loss); for an offline session, or past twice the limit, the
// oldest message is dropped.
func (s *session) enqueueLocked(d delivery, t **storeTicket) (kept, persisted bool, wait <-chan struct{}) {
	if s.gone || (s.conn == nil && s.inproc == nil && d.qos == 0) {
		return false, false, nil
	}
	if s.imported != nil {
		now := time.Now()
		if s.imported.had(d.msg.Record, now) {
			s.srv.stats.HandoverDuplicates.Add(1)
			return false, false, nil
		}
		s.checkImportedLocked(now)
	}
	limit := s.srv.opts.MaxQueuedMessages
	if n := s.queue.len(); n >= limit {
		switch {
		case d.qos == 0:
			s.srv.stats.Dropped.Add(1)
			return false, false, nil
		case s.conn != nil && n < 2*limit:
			if s.congested == nil {
				s.congested = make(chan struct{})
				s.srv.stats.Congestions.Add(1)
			}
			wait = s.congested
		default:
			s.forgetEntryLocked(s.queue.front().entry)
			s.queue.popFront()
			s.srv.stats.Dropped.Add(1)
		}
	}
	persisted = s.persistEntryLocked(&d, t)
	d.msg.acquire() // the queue's reference: it moves to the inflight entry or the outgoing copy (see take)
	s.queue.pushBack(d)
	return true, persisted, wait
}

// relieveLocked releases the publishers waiting on a congested session
// once its queue is down to three quarters of the limit, or when nobody
// will drain it (offline, gone). The caller holds s.mu.
func (s *session) relieveLocked(force bool) {
	if s.congested != nil && (force || s.queue.len() <= s.srv.opts.MaxQueuedMessages*3/4) {
		close(s.congested)
		s.congested = nil
	}
}

// allocPID returns a free packet identifier. The caller holds s.mu and has
// checked that fewer than 65535 messages are in flight.
func (s *session) allocPID() uint16 {
	for {
		s.nextPID++
		if s.nextPID == 0 {
			s.nextPID = 1
		}
		if _, used := s.inflight[s.nextPID]; !used {
			return s.nextPID
		}
	}
}

// take moves up to max deliveries from the queue into dst, assigning packet
// identifiers and inflight slots to QoS 1/2 ones while window allows.
// Expired messages are dropped. The caller holds s.mu.
func (s *session) take(dst []outgoing, window int, now int64) []outgoing {
	for s.queue.len() > 0 && len(dst) < cap(dst) {
		d := s.queue.front()
		if d.msg.Expired(now) {
			s.forgetEntryLocked(d.entry)
			s.queue.popFront()
			s.srv.stats.Dropped.Add(1)
			continue
		}
		var pid uint16
		if d.qos > 0 {
			if len(s.inflight) >= window {
				break
			}
			pid = s.allocPID()
			s.seq++
			s.setInflight(pid, outflight{delivery: *d, seq: s.seq})
			// Sent with this identifier: after a restart it is sent
			// again as a duplicate with it, not as a new message.
			s.entryStateLocked(d.entry, EntrySent, pid)
			d.msg.acquire() // the outgoing copy's: the queue's went to the inflight entry
		}
		dst = append(dst, outgoing{delivery: *d, pid: pid})
		s.queue.popFront()
	}
	s.relieveLocked(false)
	return dst
}

// pendingResend lists the inflight messages in send order, for
// redelivery on a new connection. The caller holds s.mu.
func (s *session) pendingResend() []outgoing {
	out := make([]outgoing, 0, len(s.inflight))
	for pid, f := range s.inflight {
		f.msg.acquire()
		out = append(out, outgoing{delivery: f.delivery, pid: pid, dup: true, release: f.released, seq: f.seq})
	}
	slices.SortFunc(out, func(a, b outgoing) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// complete removes pid from flight. It reports whether that freed a
// send slot for a delivery waiting in the queue: only then has the writer
// something to do. (Waking it on every acknowledgement started a writer
// goroutine per QoS 1 message that found nothing to send.)
func (s *session) complete(pid uint16) (sendMore bool) {
	sendMore, _ = s.completeAck(pid, 0)
	return sendMore
}

// completeAck is complete for an acknowledgement from the client: ack is
// PUBACK, PUBCOMP or a PUBREC with an error code (0: any). A PUBACK
// answers only a QoS 1 delivery, a PUBREC only a QoS 2 one and a PUBCOMP
// only a released QoS 2 one; the wrong type is a protocol error, and the
// delivery stays in flight.
func (s *session) completeAck(pid uint16, ack packet.Type) (sendMore bool, err error) {
	s.mu.Lock()
	f, ok := s.inflight[pid]
	if ok && (ack == packet.PUBACK && f.qos != 1 || ack == packet.PUBREC && f.qos != 2 ||
		ack == packet.PUBCOMP && (f.qos != 2 || !f.released)) {
		s.mu.Unlock()
		return false, packet.ProtocolError
	}
	if ok {
		delete(s.inflight, pid)
		s.forgetEntryLocked(f.entry)
		s.deliveredLocked(f.msg)
		f.msg.release()
	}
	sendMore = ok && s.queue.len() > 0
	s.mu.Unlock()
	return sendMore, nil
}

// release marks a QoS 2 message as released (PUBREC received). A PUBREC
// for a QoS 1 delivery is a protocol error.
func (s *session) release(pid uint16) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.inflight[pid]
	if ok && f.qos != 2 {
		return false, packet.ProtocolError
	}
	if ok && !f.released {
		f.released = true
		s.inflight[pid] = f
		s.entryStateLocked(f.entry, EntryReleased, pid)
	}
	return ok, nil
}

// holdsQoS2 reports whether the inbound QoS 2 identifier pid awaits its
// PUBREL. The identifiers are session state: a client that reconnects
// to its session and sends the PUBLISH again is acknowledged, not routed
// again.
func (s *session) holdsQoS2(pid uint16) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.qos2In[pid]
	return ok
}

// holdQoS2 records an inbound QoS 2 identifier until its PUBREL. It
// reports whether the identifier was handed to the persister.
func (s *session) holdQoS2(pid uint16) (persisted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdQoS2Locked(pid)
	if s.durable() {
		s.srv.persistOps(nil, PersistOp{Kind: PersistInboundQoS2, ClientID: s.id, PID: pid})
		return true
	}
	return false
}

// releaseQoS2 forgets an inbound QoS 2 identifier. It reports whether it
// was held. When done is not nil and the forgetting must be made durable,
// done is called once it is, and released reports true; otherwise done
// is not called.
func (s *session) releaseQoS2(pid uint16, done func(error)) (held, deferred bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held = s.qos2In[pid]
	delete(s.qos2In, pid)
	if held && s.stored && s.srv.persist != nil {
		s.srv.persistOps(done, PersistOp{Kind: DeleteInboundQoS2, ClientID: s.id, PID: pid})
		return true, done != nil
	}
	return held, false
}

// clearState drops queued and inflight messages (session discarded).
// The caller holds s.mu.
func (s *session) clearState() {
	s.relieveLocked(true)
	s.queue = deque{}
	clear(s.inflight)
	clear(s.qos2In)
	s.recent = nil
}

// outgoing is a delivery chosen for sending.
type outgoing struct {
	delivery
	pid     uint16
	dup     bool
	release bool // send PUBREL instead of the PUBLISH
	seq     uint64
}

// deque is a FIFO of deliveries that reuses its backing array.
type deque struct {
	items []delivery
	head  int
}

func (q *deque) len() int { return len(q.items) - q.head }

func (q *deque) front() *delivery { return &q.items[q.head] }

func (q *deque) pushBack(d delivery) {
	if q.head > 0 && len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
	q.items = append(q.items, d)
}

// removeAt removes the item at index i of q.items (q.head <= i).
func (q *deque) removeAt(i int) {
	if i == q.head {
		q.popFront()
		return
	}
	copy(q.items[i:], q.items[i+1:])
	q.items[len(q.items)-1] = delivery{}
	q.items = q.items[:len(q.items)-1]
}

func (q *deque) popFront() {
	q.items[q.head] = delivery{}
	q.head++
	if q.head == len(q.items) {
		q.items = q.items[:0]
		q.head = 0
	}
}
