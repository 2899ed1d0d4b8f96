package broker

import "time"

// What a session's client received lately, for a handover: a message
// published in the moments of a move can reach the client through the old
// node before the takeover (acknowledged there, so no longer in flight or
// queued: the handover does not carry it) and also reach the new node,
// which installed the subscriptions meanwhile, through a peer's stream
// that lagged behind (a copy held for its decision, a slow link). The
// handover names those messages too (SessionState.Delivered), and the
// new node drops its own copy of each, as it does for the messages the
// handover carries. Without that, a session that moved under load got
// one to nine messages twice, without DUP, in about one run in twelve of
// TestSessionMovesOnceEach.

// Bounds of what a session remembers of its acknowledged messages: a copy
// that reaches the new node later than this after the old node delivered
// it still arrives twice.
const (
	deliveredFor = 5 * time.Second
	deliveredMax = 1024
)

// recentDeliveries is the records (Message.Record) of the peer messages a
// session's client acknowledged within deliveredFor, oldest first, at
// most deliveredMax. It is made on first use: a session without
// clustering never has one. The session's mu guards it.
type recentDeliveries struct {
	items []recentDelivery
	head  int
}

type recentDelivery struct {
	rec PeerRecord
	at  int64 // Unix ns
}

// add remembers rec, acknowledged at now, and forgets what is too old.
func (r *recentDeliveries) add(rec PeerRecord, now time.Time) {
	ns := now.UnixNano()
	r.items = append(r.items, recentDelivery{rec: rec, at: ns})
	r.trim(ns)
}

// trim forgets what was acknowledged before deliveredFor ahead of ns, and
// the oldest beyond deliveredMax.
func (r *recentDeliveries) trim(ns int64) {
	from := ns - int64(deliveredFor)
	for r.head < len(r.items) && (r.items[r.head].at < from || len(r.items)-r.head > deliveredMax) {
		r.items[r.head] = recentDelivery{}
		r.head++
	}
	if r.head > len(r.items)/2 {
		n := copy(r.items, r.items[r.head:])
		clear(r.items[n:])
		r.items, r.head = r.items[:n], 0
	}
}

// list is the records acknowledged within deliveredFor of now, oldest
// first; nil when none.
func (r *recentDeliveries) list(now time.Time) []PeerRecord {
	if r == nil {
		return nil
	}
	r.trim(now.UnixNano())
	if r.head == len(r.items) {
		return nil
	}
	out := make([]PeerRecord, 0, len(r.items)-r.head)
	for _, d := range r.items[r.head:] {
		out = append(out, d.rec)
	}
	return out
}

// deliveredLocked notes that the client acknowledged m. The caller holds
// s.mu.
func (s *session) deliveredLocked(m *Message) {
	if m.Record == (PeerRecord{}) {
		return
	}
	if s.recent == nil {
		s.recent = &recentDeliveries{}
	}
	s.recent.add(m.Record, time.Now())
}
