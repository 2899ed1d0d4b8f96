package dataplane

import "sync"

// entry is one record waiting for a peer: a message encoded once
// (wire.AppendMessage, shared by every peer's queue) and its number in the
// reliable stream to that peer, 0 for best effort.
type entry struct {
	seq uint64
	msg []byte
}

// sentFrame is a reliable frame written on the current connection and not
// yet confirmed: its packet identifier and the last sequence number in it.
type sentFrame struct {
	pid     uint16
	lastSeq uint64
}

// outQueue holds what one peer has not confirmed yet. The hook adds from
// publishers' goroutines; the link's writer takes and its reader confirms.
// Reliable records stay until the peer confirms the frame that carried
// them (bounded by max: the oldest goes first, counted in dropped); best
// effort records are sent once and only while the link is up.
type outQueue struct {
	max int // reliable records kept

	mu        sync.Mutex // guards every field below
	pending   []entry    // not yet written on the current connection, in order
	unacked   []entry    // reliable, written, not confirmed, in sequence order
	frames    []sentFrame
	reliable  int    // reliable records in pending and unacked
	nextSeq   uint64 // last sequence number given out
	up        bool   // a connection is established: best effort records are taken
	beBytes   int    // bytes of best effort records in pending
	dropped   uint64 // reliable records dropped beyond max
	beDropped uint64 // best effort records dropped (link down or queue full)

	wake chan struct{} // capacity 1: something was added or confirmed
}

// maxBestEffortBytes bounds the QoS 0 records waiting for a slow link.
const maxBestEffortBytes = 8 << 20

func newOutQueue(max int) *outQueue {
	return &outQueue{max: max, wake: make(chan struct{}, 1)}
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// add queues msg, reliably or not.
func (q *outQueue) add(reliable bool, msg []byte) {
	q.mu.Lock()
	if !reliable {
		if !q.up || q.beBytes+len(msg) > maxBestEffortBytes {
			q.beDropped++
			q.mu.Unlock()
			return
		}
		q.beBytes += len(msg)
		q.pending = append(q.pending, entry{msg: msg})
		q.mu.Unlock()
		q.signal()
		return
	}
	q.nextSeq++
	q.pending = append(q.pending, entry{seq: q.nextSeq, msg: msg})
	q.reliable++
	if q.reliable > q.max {
		q.dropOldestLocked()
	}
	q.mu.Unlock()
	q.signal()
}

// dropOldestLocked drops the oldest reliable record.
func (q *outQueue) dropOldestLocked() {
	q.reliable--
	q.dropped++
	if len(q.unacked) > 0 {
		q.unacked = q.unacked[1:]
		return
	}
	for i, e := range q.pending {
		if e.seq != 0 {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
			return
		}
	}
}

// take moves records from pending into a frame of at most maxBytes of
// records (at least one record when any is pending), calling add for each.
// It returns the last reliable sequence number taken, 0 for none.
func (q *outQueue) take(maxBytes int, add func(seq uint64, msg []byte) int) (lastSeq uint64, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	size := 0
	for n < len(q.pending) {
		e := q.pending[n]
		if n > 0 && size+len(e.msg) > maxBytes {
			break
		}
		size += add(e.seq, e.msg)
		if e.seq != 0 {
			q.unacked = append(q.unacked, e)
			lastSeq = e.seq
		} else {
			q.beBytes -= len(e.msg)
		}
		n++
	}
	clear(q.pending[:n])
	q.pending = q.pending[n:]
	return lastSeq, n
}

// sent records a reliable frame written with pid.
func (q *outQueue) sent(pid uint16, lastSeq uint64) {
	q.mu.Lock()
	q.frames = append(q.frames, sentFrame{pid: pid, lastSeq: lastSeq})
	q.mu.Unlock()
}

// confirm handles the peer's acknowledgement of pid: every reliable record
// up to that frame's last one is confirmed. It reports whether pid was
// a frame in flight.
func (q *outQueue) confirm(pid uint16) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := 0
	for i < len(q.frames) && q.frames[i].pid != pid {
		i++
	}
	if i == len(q.frames) {
		return false
	}
	last := q.frames[i].lastSeq
	q.frames = q.frames[i+1:]
	n := 0
	for n < len(q.unacked) && q.unacked[n].seq <= last {
		n++
	}
	clear(q.unacked[:n])
	q.unacked = q.unacked[n:]
	q.reliable -= n
	return true
}

// inflight is the number of reliable frames waiting for confirmation.
func (q *outQueue) inflight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames)
}

// setUp marks the link established (taking best effort records) or down.
// Going down puts every unconfirmed reliable record back at the head of
// pending, to be sent again on the next connection, and drops the best
// effort ones.
func (q *outQueue) setUp(up bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.up = up
	if up {
		return
	}
	kept := make([]entry, 0, len(q.unacked)+len(q.pending))
	kept = append(kept, q.unacked...)
	for _, e := range q.pending {
		if e.seq != 0 {
			kept = append(kept, e)
		} else {
			q.beDropped++
		}
	}
	q.pending, q.unacked, q.frames, q.beBytes = kept, nil, nil, 0
}

// queueStats is a snapshot of the queue's counters.
type queueStats struct {
	Backlog   int    // reliable records not confirmed
	Pending   int    // records not written on the current connection
	Dropped   uint64 // reliable records dropped beyond the limit
	BeDropped uint64 // best effort records dropped
}

func (q *outQueue) stats() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queueStats{Backlog: q.reliable, Pending: len(q.pending), Dropped: q.dropped, BeDropped: q.beDropped}
}
