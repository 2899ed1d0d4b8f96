package broker

import (
	"errors"
	"time"
)

// A peer's messages reach an offline session's queue in its stream's
// order, and a delivery whose write failed is taken back (entryWrite) and
// queued again from the peer's resend. A later message of the same stream
// whose write succeeded meanwhile (a full disk fails one write and has
// room for the next once the failed one was cut off) would then stand in
// the queue ahead of the one taken back, and the subscriber would get the
// peer's messages out of order. So a session remembers, per peer node,
// the lowest record it took back (peerGap), and takes back every later
// record of that stream written before that one is queued again: its
// resend (the peer sends again what this node did not confirm, in order)
// queues them behind it.

// errBehindTakenBack fails the write of a peer's message queued behind
// one of the same stream that its session took back: refused like a
// failed write, so that the peer sends it again, in order.
var errBehindTakenBack = errors.New("broker: queued behind a message of the same peer taken back")

// peerGapMax bounds how long a session waits for the resend of a record
// it took back: a peer that never sends it again (it dropped it, beyond
// its queue's bound) would otherwise hold back the rest of its stream
// for the session.
const peerGapMax = 10 * time.Second

// peerGap is the lowest record of a peer's stream a session took back and
// has not queued again since.
type peerGap struct {
	boot, seq uint64
	at        time.Time // when it was (last) taken back
}

// tookBack records that the session took rec's delivery back.
func (sess *session) tookBack(rec PeerRecord) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	g, ok := sess.peerGaps[rec.Node]
	switch {
	case ok && g.boot == rec.Boot:
		g.seq = min(g.seq, rec.Seq)
	case ok && g.boot > rec.Boot:
		return // an older incarnation's: its order is not the newer one's
	default:
		g = peerGap{boot: rec.Boot, seq: rec.Seq}
	}
	g.at = time.Now()
	if sess.peerGaps == nil {
		sess.peerGaps = make(map[string]peerGap)
	}
	sess.peerGaps[rec.Node] = g
	sess.gapped.Store(true)
}

// behindTakenBack reports whether rec, just written for the session,
// stands behind a record of its stream the session took back; a record
// at or before that one (its resend) ends the gap.
func (sess *session) behindTakenBack(rec PeerRecord) bool {
	if rec.Node == "" || !sess.gapped.Load() {
		return false // the usual case: no lock for every write
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	g, ok := sess.peerGaps[rec.Node]
	switch {
	case !ok:
		return false
	case rec.Boot < g.boot:
		return false
	case rec.Boot > g.boot || rec.Seq <= g.seq || time.Since(g.at) > peerGapMax:
		delete(sess.peerGaps, rec.Node)
		sess.gapped.Store(len(sess.peerGaps) > 0)
		return false
	}
	return true
}
