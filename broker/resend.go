package broker

import (
	"sync"
	"sync/atomic"
)

// PeerRecord names a message by its record in its origin node's
// reliable stream: the node, its boot (incarnation) and the record's
// number. The data plane sets it on what it delivers from a peer
// (OriginPeer), and on what this node publishes to its peers; the zero
// value names nothing. The broker only compares it: it tells a peer's
// resend of a message from a new message with the same content, and a
// message a session handed over from another node carries from the same
// one queued here.
type PeerRecord struct {
	Node      string
	Boot, Seq uint64
}

// peerResendsMax bounds the peer messages remembered for their resend.
// Forgetting one costs at most a duplicate (its resend is routed as a new
// message), never a loss.
const peerResendsMax = 1 << 16

// peerResends remembers the peer messages whose routing here had a failed
// write (DeliverBatch answered an error), each with the sessions that
// took their delivery back (entryWrite): the data plane does not confirm
// such a message, its sender sends it again, and the resend must reach
// only those sessions. The others hold it already: a connected session
// that was sent it before the write failed, a session without a store
// (clean, or no session expiry), one whose own write succeeded, and every
// session of a message that failed only because another message of its
// batch did (the data plane confirms a frame as a whole). Routed to them
// again, a QoS 2 message would reach one subscriber twice on one
// connection, which MQTT forbids.
//
// Routing reads n without the lock: the common case, nothing failed,
// costs an atomic load per peer message.
type peerResends struct {
	n    atomic.Int32 // len(owed)
	mu   sync.Mutex   // guards owed
	owed map[PeerRecord][]*session
}

// note remembers that rec's resend is owed to sessions only (none: to no
// session).
func (r *peerResends) note(rec PeerRecord, sessions []*session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owed == nil {
		r.owed = make(map[PeerRecord][]*session)
	}
	if _, ok := r.owed[rec]; !ok && len(r.owed) >= peerResendsMax {
		for old := range r.owed { // any one: Go's map order is random
			delete(r.owed, old)
			break
		}
	}
	r.owed[rec] = sessions
	r.n.Store(int32(len(r.owed)))
}

// take returns and forgets the sessions rec's resend is owed to; ok is
// false when rec is not remembered (a new message, or forgotten).
func (r *peerResends) take(rec PeerRecord) (sessions []*session, ok bool) {
	if r.n.Load() == 0 || rec == (PeerRecord{}) {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sessions, ok = r.owed[rec]
	if ok {
		delete(r.owed, rec)
		r.n.Store(int32(len(r.owed)))
	}
	return sessions, ok
}

// onlyOwed keeps the targets whose session is in owed.
func onlyOwed(targets []target, owed []*session) []target {
	keep := targets[:0]
	for _, tg := range targets {
		for _, s := range owed {
			if tg.sess == s {
				keep = append(keep, tg)
				break
			}
		}
	}
	clear(targets[len(keep):])
	return keep
}

// routedPeer is a message of a DeliverBatch with its PeerRecord and the
// ticket of its routing (nil when nothing was stored for it).
type routedPeer struct {
	rec PeerRecord
	t   *storeTicket
}

// noteResends remembers, after a DeliverBatch whose writes failed, every
// message of the batch that names its record: its resend goes only to the
// sessions that took it back.
func (s *Server) noteResends(routed []routedPeer) {
	for _, rp := range routed {
		s.resends.note(rp.rec, rp.t.withdrawnSessions())
	}
}
