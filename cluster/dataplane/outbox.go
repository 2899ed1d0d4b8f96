package dataplane

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/cluster/wire"
)

// entry is one record for the peers: a message encoded once
// (wire.AppendMessage) and its number in this node's reliable stream, 0
// for best effort.
type entry struct {
	seq    uint64
	msg    []byte
	topic  string // for the peers' interest; "" for control records
	retain bool   // retained messages go to every peer, interested or not
	// groups are, per peer, the shared subscriptions it delivers the
	// message to (Plane.sharedFor); nil for most messages.
	groups map[string][]string
	only   string // for this peer only (a catch-up); "" for every peer
	// rep is the record's part for its partition's copies (quorum.go);
	// nil for records that are not QoS 1/2 publishes of a partition.
	rep *repInfo
	// after is, for a best effort record, the last reliable QoS 0 record
	// (a retained one) appended before it: it is written only once the
	// stream to the peer has passed that one, so the two stay in publish
	// order (a retained QoS 0 message travels reliably, a plain one not).
	after uint64
	// volatile records are not kept across a restart (a new copy's fill,
	// which its owner sends again): the store keeps an empty placeholder.
	volatile bool
}

// ctlEntry is a control record (an interest announcement): sent before
// any message, in a reliable frame; done, when set, runs once the peer
// confirmed it or the link went down.
type ctlEntry struct {
	msg  []byte
	done func()
}

// sentFrame is a reliable frame written on a peer's current connection
// and not yet confirmed: its packet identifier and the last sequence
// number in it.
type sentFrame struct {
	pid     uint16
	lastSeq uint64
	dones   []func() // of the control records it carried
	decided uint64   // the decisions its header carried (header.Decided)
}

// peerStream is what one peer has been sent and has confirmed.
type peerStream struct {
	name    string
	cursor  uint64 // highest reliable record the peer confirmed
	sent    uint64 // highest reliable record written on the current connection
	frames  []sentFrame
	be      []entry // best effort records not written yet
	beBytes int
	ctl     []ctlEntry // control records not written yet
	up      bool       // a connection is established: best effort records are taken

	// Two-phase delivery: held is the highest record this peer holds
	// undelivered until a header's Decided covers it (a copy, Decide),
	// decSent the decisions written on the current connection, decAcked
	// those it confirmed.
	held, decSent, decAcked uint64

	dropped   uint64 // reliable records dropped before the peer confirmed them
	beDropped uint64 // best effort records dropped (link down or too slow)
	saved     uint64 // cursor last handed to the store
	// moved is when the cursor last moved on (or the link came up): a
	// peer that confirmed nothing for stallAfter no longer holds the
	// publishers back (holdLocked).
	moved time.Time
	holds uint64 // times publishers were held back for this peer

	wake chan struct{} // capacity 1: something to send, or confirmed
}

// outbox is this node's reliable stream: every QoS 1/2 message that
// entered the node, numbered, kept until every peer confirmed it (at most
// max records: beyond that the oldest goes, counted for each peer that had
// not confirmed it). With a store it is on disk: the publisher's
// acknowledgement waits for the write, and a restart resumes the stream
// and every peer's cursor. The hook appends from publishers' goroutines,
// links take and confirm.
type outbox struct {
	max   int
	store *store // nil: in memory only

	mu      sync.Mutex // guards every field below and every peerStream
	base    uint64     // records up to base are gone; entries.at(i).seq == base+1+i
	entries deque[entry]
	peers   map[string]*peerStream
	// durable is the last record on disk (with a store). lease is the
	// highest number on disk as reserved: links send up to the higher of
	// the two, so a record travels to the peers while its own write runs
	// (the copies' writes overlap this node's). A restart numbers on above
	// the lease, never reusing a number a peer may hold; leaseAsked is the
	// reservation queued for the next commit.
	durable, lease, leaseAsked uint64
	// absent are the cursors of peers without a link now (stored, from
	// before a restart, or removed from the membership): their records
	// stay until they return or max pushes them out.
	absent map[string]uint64
	// lastQoS0 is the last reliable record nobody waits for (a retained
	// QoS 0 message): best effort records queued after it wait for it.
	lastQoS0 uint64
	// known is len(peers)+len(absent), for the publish hook to skip a
	// one-node cluster without taking mu.
	known atomic.Int32

	// decided: every quorum write up to it is decided (decidedLocked
	// moves it on). refused are the refused ones, ascending, kept until
	// every peer confirmed a header that covered them (decAcked; absentDec
	// for the peers without a link) or beyond maxRefusedKept.
	decided   uint64
	refused   []uint64
	absentDec map[string]uint64

	// room, while set, is closed once the stream has room again: at its
	// bound, publishers wait for it (the broker stops reading them)
	// rather than the oldest record going while a peer that is up and
	// confirming still needs it (holdLocked).
	room chan struct{}
}

// Holding publishers back. At max records the stream keeps the oldest
// record while a peer whose link is up, and that confirmed something
// within stallAfter, still needs it: the publishers appending meanwhile
// are paused (broker.Pauser) until the peer confirmed enough to bring the
// stream to 7/8 of max, for at most holdSlice at a time (the next publish
// then looks again). A slow peer thus slows the publishers down instead of
// losing what they were acknowledged; a peer that is down, or up but
// stuck (its disk full, say: it confirms nothing), loses the oldest
// records beyond max as before (coreflux_replication_forward_dropped_total),
// so that it does not stall the cluster. Beyond hardMax records the oldest
// go whatever the peers: the publishers that append while held (one
// publish each per slice) cannot grow the stream without bound.
const (
	stallAfter = 2 * time.Second
	holdSlice  = time.Second
)

func (o *outbox) hardMax() int { return 2 * o.max }

// owedToMovingLocked reports whether the oldest record is still owed to a
// peer whose link is up and that moved within stallAfter; it counts the
// hold for the first such peer when count is set.
func (o *outbox) owedToMovingLocked(now time.Time, count bool) bool {
	for _, ps := range o.peers {
		if ps.up && ps.cursor <= o.base && now.Sub(ps.moved) < stallAfter {
			if count {
				ps.holds++
			}
			return true
		}
	}
	return false
}

// holdLocked makes the publishers wait for room (o.room), for at most
// holdSlice.
func (o *outbox) holdLocked() {
	if o.room != nil {
		return
	}
	room := make(chan struct{})
	o.room = room
	time.AfterFunc(holdSlice, func() {
		o.mu.Lock()
		o.releaseLocked(room)
		o.mu.Unlock()
	})
}

// releaseLocked lets the publishers waiting for room go on.
func (o *outbox) releaseLocked(room chan struct{}) {
	if room != nil && o.room == room {
		close(room)
		o.room = nil
	}
}

// roomLocked is what a publisher that just appended waits for: nil when
// the stream is not holding publishers back.
func (o *outbox) roomLocked() <-chan struct{} {
	if o.room == nil {
		return nil
	}
	return o.room
}

// maxRefusedKept bounds the refused records remembered for the peers'
// headers: beyond it the oldest are forgotten (a peer away that long may
// deliver one of them).
const maxRefusedKept = 1 << 16

// refusedMark is the stored value of a refused record: passed over after
// a restart and named in the headers again.
var refusedMark = []byte{0xff}

// maxBestEffortBytes bounds the QoS 0 records waiting for one slow link.
const maxBestEffortBytes = 8 << 20

func newOutbox(max int, st *store) *outbox {
	o := &outbox{max: max, store: st, peers: map[string]*peerStream{}, absent: map[string]uint64{}, absentDec: map[string]uint64{}}
	if st != nil {
		var es []entry
		o.base, es = st.loadOutbox()
		o.absent = st.cursors()
		for _, e := range es {
			o.entries.push(e)
			if e.only == refusedOnly {
				o.refused = append(o.refused, e.seq)
			}
		}
	}
	if st != nil {
		if l := st.lease(); l > o.head() {
			// Numbers up to the lease may have reached peers before the
			// crash: skipped, as placeholders for no peer.
			for seq := o.head() + 1; seq <= l; seq++ {
				o.entries.push(entry{seq: seq, only: noPeer})
			}
		}
	}
	o.durable = o.head()
	o.decided = o.head() // what a restart reloads has no write waiting: decided
	o.lease, o.leaseAsked = o.head(), o.head()
	o.countLocked()
	return o
}

// noPeer is the only-field of a placeholder record: passed over by every
// peer; refusedOnly that of a refused record reloaded after a restart.
const (
	noPeer      = "\x00"
	refusedOnly = "\x00refused"
)

// Lease steps: a new reservation of leaseStep numbers is asked for when
// fewer than leaseLow are left.
const (
	leaseStep = 4096
	leaseLow  = 1024
)

func (o *outbox) head() uint64 { return o.base + uint64(o.entries.len()) }

// addPeer starts (or resumes, from a stored cursor) the stream of peer.
// A peer never seen before starts at the head: what was published before
// it joined is not for it.
func (o *outbox) addPeer(name string) (ps *peerStream, catchUp bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ps := o.peers[name]; ps != nil {
		return ps, false
	}
	ps = &peerStream{name: name, wake: make(chan struct{}, 1)}
	ps.cursor = o.head()
	ps.decAcked = o.absentDec[name]
	ps.decSent = ps.decAcked
	delete(o.absentDec, name)
	if c, ok := o.absent[name]; ok {
		ps.cursor = min(c, o.head())
		delete(o.absent, name)
	} else {
		catchUp = true // new here: it has none of what came before
		if o.store != nil {
			// Stored at once: after a restart of this node the peer
			// resumes here even if it never confirmed anything.
			o.store.putCursor(name, ps.cursor)
		}
	}
	if ps.cursor < o.base {
		ps.dropped += o.base - ps.cursor
		ps.cursor = o.base
		catchUp = true // it missed records
	}
	ps.sent, ps.saved = ps.cursor, ps.cursor
	o.peers[name] = ps
	o.countLocked()
	return ps, catchUp
}

// removePeer stops sending to name. Its stored cursor stays: a member that
// comes back resumes.
func (o *outbox) removePeer(name string) {
	o.mu.Lock()
	if ps := o.peers[name]; ps != nil {
		o.absent[name] = ps.cursor
		o.absentDec[name] = ps.decAcked
		delete(o.peers, name)
		o.countLocked()
	}
	o.mu.Unlock()
}

// wanted reports whether any peer, with a link or absent, takes records.
func (o *outbox) wanted() bool { return o.known.Load() > 0 }

// countLocked refreshes known after peers or absent changed.
func (o *outbox) countLocked() { o.known.Store(int32(len(o.peers) + len(o.absent))) }

func signal(ps *peerStream) {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// addBestEffort queues msg for every peer whose link is up and that
// wants topic.
func (o *outbox) addBestEffort(msg []byte, topic string, groups map[string][]string, want func(peer, topic string) bool) {
	o.mu.Lock()
	for name, ps := range o.peers {
		if !want(name, topic) {
			continue
		}
		var g map[string][]string
		if gs := groups[name]; gs != nil {
			g = map[string][]string{name: gs}
		}
		if !ps.up || ps.beBytes+len(msg) > maxBestEffortBytes {
			ps.beDropped++
			continue
		}
		ps.beBytes += len(msg)
		ps.be = append(ps.be, entry{msg: msg, groups: g, after: o.lastQoS0})
		signal(ps)
	}
	o.mu.Unlock()
}

// addReliable appends msg to the stream. With a store, done is called
// once the record is on disk (or failed to get there) and addReliable
// returns true; without one it returns false and never calls done.
func (o *outbox) addReliable(msg []byte, topic string, retain bool, groups map[string][]string, rep *repInfo, done func(error)) bool {
	_, deferred, _ := o.addNumbered(msg, topic, retain, groups, rep, done)
	return deferred
}

// addNumbered is addReliable that also returns the record's number and
// what its publisher is to wait for before it sends more (nil: nothing;
// holdLocked).
func (o *outbox) addNumbered(msg []byte, topic string, retain bool, groups map[string][]string, rep *repInfo, done func(error)) (uint64, bool, <-chan struct{}) {
	o.mu.Lock()
	seq := o.appendLocked(entry{msg: msg, topic: topic, retain: retain, groups: groups, rep: rep}, done)
	if rep == nil && done == nil {
		o.lastQoS0 = seq
	}
	for _, ps := range o.peers {
		signal(ps)
	}
	room := o.roomLocked()
	o.mu.Unlock()
	return seq, o.store != nil, room
}

// addReplicated appends a QoS 1/2 record of a partition and returns its
// number and what its publisher is to wait for (addNumbered); done, when
// set, runs once it is on disk (with a store).
func (o *outbox) addReplicated(msg []byte, topic string, retain bool, groups map[string][]string, rep *repInfo, done func(error)) (uint64, <-chan struct{}) {
	o.mu.Lock()
	seq := o.appendLocked(entry{msg: msg, topic: topic, retain: retain, groups: groups, rep: rep}, done)
	for _, ps := range o.peers {
		signal(ps)
	}
	room := o.roomLocked()
	o.mu.Unlock()
	return seq, room
}

// addReliableFor appends a record for peer only (a catch-up). Nobody
// waits for it.
func (o *outbox) addReliableFor(peer string, msg []byte, topic string, rep *repInfo) {
	o.mu.Lock()
	o.appendLocked(entry{msg: msg, topic: topic, retain: true, only: peer, rep: rep}, nil)
	if ps := o.peers[peer]; ps != nil {
		signal(ps)
	}
	o.mu.Unlock()
}

// appendLocked numbers e, appends it (dropping the oldest beyond max) and
// hands it to the store; done, when set, runs once it is on disk.
func (o *outbox) appendLocked(e entry, done func(error)) uint64 {
	e.seq = o.head() + 1
	if q := e.rep.quorum(); q != nil {
		q.seq.Store(e.seq) // before anyone can refuse it (refuse names it)
		if n, ok := q.res.(numberedResolver); ok {
			n.numbered(e.seq) // the publish learns its record (plane.go, nameLocal)
		}
	}
	o.entries.push(e)
	if o.entries.len() > o.max {
		now := time.Now()
		for o.entries.len() > o.max {
			if o.entries.len() <= o.hardMax() && o.owedToMovingLocked(now, o.room == nil) {
				o.holdLocked()
				break
			}
			o.dropOldestLocked()
		}
	}
	if o.store != nil {
		msg := e.msg
		if e.volatile {
			msg = nil // a placeholder: passed over after a restart
		} else if e.rep != nil && e.rep.origin.origin != "" {
			msg = appendOriginRecord(nil, e.rep, e.msg) // a replay keeps its origin's identity across a restart
		}
		if e.seq+leaseLow > o.leaseAsked {
			o.leaseAsked = e.seq + leaseStep
			o.store.putLease(o.leaseAsked, o.afterLease(o.leaseAsked))
		}
		o.store.put(e.seq, msg, o.afterWrite(e.seq, done)) // queued for the store's next group commit
	} else {
		o.durable = e.seq
	}
	return e.seq
}

// afterWrite returns the store's callback for record seq: on success the
// record may be sent; then done, when set, runs.
func (o *outbox) afterWrite(seq uint64, done func(error)) func(error) {
	return func(err error) {
		if err == nil {
			o.mu.Lock()
			if seq > o.durable {
				o.durable = seq // commits run in order: everything before is on disk too
				for _, ps := range o.peers {
					signal(ps)
				}
			}
			o.mu.Unlock()
		}
		if done != nil {
			done(err)
		}
	}
}

// afterLease returns the store's callback for a reservation up to l.
func (o *outbox) afterLease(l uint64) func(error) {
	return func(err error) {
		if err != nil {
			return // the next record asks again
		}
		o.mu.Lock()
		if l > o.lease {
			o.lease = l
			for _, ps := range o.peers {
				signal(ps)
			}
		}
		o.mu.Unlock()
	}
}

// sendable is the last record links may send.
func (o *outbox) sendableLocked() uint64 { return min(o.head(), max(o.durable, o.lease)) }

// dropOldestLocked drops the oldest record, for every peer that has not
// confirmed it.
func (o *outbox) dropOldestLocked() {
	o.base++
	o.durable = max(o.durable, o.base)
	o.entries.dropOldest(1)
	for _, ps := range o.peers {
		if ps.cursor < o.base {
			ps.cursor = o.base
			ps.dropped++
		}
		ps.sent = max(ps.sent, ps.cursor)
	}
	for name, c := range o.absent {
		if c < o.base {
			o.absent[name] = o.base
		}
	}
	if o.store != nil {
		o.store.trim(o.base)
	}
}

// trimLocked forgets the records every peer confirmed, up to the first
// undecided one: a write refused after its copies confirmed it (its
// origin's own write failed, or the broker's here) must still be there
// for refuse to name it in the copies' next headers, or they would take
// the decided position past it for an acknowledgement and deliver it.
func (o *outbox) trimLocked() {
	low := o.decidedLocked()
	for _, ps := range o.peers {
		low = min(low, ps.cursor)
	}
	for _, c := range o.absent {
		low = min(low, c)
	}
	if low <= o.base {
		return
	}
	n := int(low - o.base)
	o.entries.dropOldest(n)
	o.base = low
	if o.store != nil {
		o.store.trim(o.base)
	}
	if o.room != nil && o.entries.len() <= o.max-o.max/8 {
		o.releaseLocked(o.room)
	}
}

// take moves a frame's worth of records (at least one when any waits)
// from ps: control records first, then best effort ones, then the reliable
// records not written yet that the peer wants (want; retained ones
// always); the others are passed over. add appends one to the frame and
// returns its size. A frame that must be confirmed (it holds reliable or
// control records) gets a packet identifier from nextPID and is recorded
// as in flight, covering the stream up to where take stopped; take
// returns that identifier (0: send the frame unconfirmed) and how many
// records were taken.
func (o *outbox) take(ps *peerStream, maxBytes int, head func(decided uint64, refused []uint64), want func(topic string) bool, add func(seq uint64, msg []byte, groups []string, rep *wire.Rep) int, nextPID func() uint16) (pid uint16, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.peers[ps.name] != ps {
		return 0, 0 // removed: the link is stopping, and the stream's positions no longer move
	}
	decided, refused := o.decisionsLocked(ps)
	head(decided, refused)
	// A frame with nothing else carries the decisions when the peer
	// holds records they release.
	decide := ps.held > ps.decSent && decided > ps.decSent
	var dones []func()
	confirm := false
	size := 0
	for _, c := range ps.ctl {
		size += add(0, c.msg, nil, nil)
		if c.done != nil {
			dones = append(dones, c.done)
		}
		n++
		confirm = true
	}
	clear(ps.ctl)
	ps.ctl = ps.ctl[:0]
	i, full := 0, false
	// Best effort records go first, each once the reliable records queued
	// before it (after) were written; the reliable ones up to there in
	// between.
	for {
		for ; i < len(ps.be) && ps.be[i].after <= ps.sent; i++ {
			if n > 0 && size+len(ps.be[i].msg) > maxBytes {
				full = true
				break
			}
			size += add(0, ps.be[i].msg, ps.be[i].groups[ps.name], nil)
			ps.beBytes -= len(ps.be[i].msg)
			n++
		}
		if full || i == len(ps.be) {
			break
		}
		before := ps.sent
		o.takeReliableLocked(ps, ps.be[i].after, maxBytes, decided, want, add, &size, &n, &confirm)
		if ps.sent == before || ps.sent < ps.be[i].after {
			break // the stream waits (a decision, the frame full): so do the records after
		}
	}
	clear(ps.be[:i])
	ps.be = ps.be[i:]
	if !full && len(ps.be) == 0 {
		o.takeReliableLocked(ps, o.sendableLocked(), maxBytes, decided, want, add, &size, &n, &confirm)
	}
	if decide && n == 0 {
		n, confirm = 1, true // the header alone
	}
	if n > 0 {
		ps.decSent = max(ps.decSent, decided)
	}
	if confirm {
		// Recorded here, under the lock, so that a confirmation read
		// meanwhile never takes these records for passed over.
		pid = nextPID()
		ps.frames = append(ps.frames, sentFrame{pid: pid, lastSeq: ps.sent, dones: dones, decided: decided})
	} else if len(ps.frames) == 0 && ps.cursor < ps.sent {
		// Everything up to sent was passed over: nothing to wait for.
		o.advanceLocked(ps, ps.sent)
	}
	return pid, n
}

// takeReliableLocked adds to the frame the reliable records of ps's
// stream up to upTo (at most what is sendable) that the peer is to get,
// passing over the others, until the frame is full or a record waits.
func (o *outbox) takeReliableLocked(ps *peerStream, upTo uint64, maxBytes int, decided uint64, want func(topic string) bool,
	add func(seq uint64, msg []byte, groups []string, rep *wire.Rep) int, size, n *int, confirm *bool) {
	var wr wire.Rep
	upTo = min(upTo, o.sendableLocked())
	for ps.sent < upTo {
		e := o.entries.at(int(ps.sent - o.base))
		if len(e.msg) > maxBytes {
			ps.sent = e.seq // over this peer's Maximum Packet Size: it would refuse the frame forever
			ps.dropped++
			continue
		}
		rep, copy := e.repFor(ps.name, &wr)
		wanted := e.retain || want(e.topic)
		if (e.only != "" && e.only != ps.name) || (!copy && (e.rep != nil && e.rep.copyOnly || !wanted)) {
			ps.sent = e.seq // not for this peer
			continue
		}
		if copy && !wanted {
			wr.CopyOnly = true // a copy for a peer without a subscriber to it: stored, not delivered
		}
		if q := e.rep.quorum(); q != nil {
			// A peer that is not a copy gets a publish only once its
			// majority stored it, and never one that was refused; a copy
			// gets it at once (its confirmation counts for the majority)
			// and holds it until the decision (Decide).
			// (Up to this header's decisions, which the copies deliver
			// in this frame: the peer's messages stay in stream order.)
			if st := q.state.Load(); st == qRefused {
				ps.sent = e.seq
				continue
			} else if !copy && (st == qPending || st == qMajority || e.seq > decided) {
				break
			}
		}
		if *n > 0 && *size+len(e.msg) > maxBytes {
			break
		}
		if rep != nil && rep.Decide && !rep.CopyOnly {
			ps.held = e.seq
		}
		*size += add(e.seq, e.msg, e.groups[ps.name], rep)
		ps.sent = e.seq
		*confirm = true
		*n++
	}
}

// addControl queues a control record for ps.
func (o *outbox) addControl(ps *peerStream, msg []byte, done func()) {
	o.mu.Lock()
	ps.ctl = append(ps.ctl, ctlEntry{msg: msg, done: done})
	signal(ps)
	o.mu.Unlock()
}

// confirm handles the peer's acknowledgement of pid: every record up to
// that frame's position is confirmed, and the dones of its control records
// run. It reports whether pid was a frame in flight.
func (o *outbox) confirm(name string, ps *peerStream, pid uint16, stale bool) bool {
	o.mu.Lock()
	if o.peers[ps.name] != ps {
		o.mu.Unlock()
		return false // removed: its cursor went to absent when it was
	}
	i := 0
	for i < len(ps.frames) && ps.frames[i].pid != pid {
		i++
	}
	if i == len(ps.frames) {
		o.mu.Unlock()
		return false
	}
	f := ps.frames[i]
	ps.frames = ps.frames[i+1:]
	if f.decided > ps.decAcked {
		ps.decAcked = f.decided
		o.pruneRefusedLocked()
	}
	upTo := f.lastSeq
	if len(ps.frames) == 0 {
		upTo = ps.sent // the rest up to sent was passed over
	}
	var acks []*quorumWrite
	var filled []func()
	if !stale {
		acks, filled = o.copiesConfirmedLocked(name, ps.cursor, f.lastSeq)
	}
	o.advanceLocked(ps, upTo)
	o.mu.Unlock()
	for _, q := range acks {
		q.ack()
	}
	for _, f := range filled {
		f()
	}
	for _, d := range f.dones {
		d()
	}
	return true
}

// copiesConfirmedLocked returns the quorum writes that peer's
// confirmation of the records (from, upTo] counts for: those it stores a
// copy of.
func (o *outbox) copiesConfirmedLocked(peer string, from, upTo uint64) (acks []*quorumWrite, filled []func()) {
	for seq := max(from, o.base) + 1; seq <= upTo && seq <= o.head(); seq++ {
		r := o.entries.at(int(seq - o.base - 1)).rep
		if r == nil || !r.isCopy(peer) {
			continue
		}
		if r.q != nil {
			acks = append(acks, r.q)
		}
		if r.filled != nil {
			filled = append(filled, r.filled)
		}
	}
	return acks, filled
}

// appendIfRoom appends es (a fill's or a replay's records, for nobody to
// wait on) only if the outbox then holds at most limit records, all or
// none: such records must never push out what a peer still needs. It
// reports whether it appended them.
func (o *outbox) appendIfRoom(es []entry, limit int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.entries.len()+len(es) > limit && o.entries.len() > 0 {
		return false
	}
	for _, e := range es {
		o.appendLocked(e, nil)
	}
	for _, ps := range o.peers {
		signal(ps)
	}
	return true
}

// wakeAll signals every peer's stream.
func (o *outbox) wakeAll() {
	o.mu.Lock()
	for _, ps := range o.peers {
		signal(ps)
	}
	o.mu.Unlock()
}

// repFor is e's replication part as peer gets it (in wr), and whether
// peer stores a copy of it.
func (e *entry) repFor(peer string, wr *wire.Rep) (*wire.Rep, bool) {
	r := e.rep
	if r == nil {
		return nil, false
	}
	copy := r.isCopy(peer)
	*wr = wire.Rep{Copy: copy, CopyOnly: r.copyOnly}
	if copy {
		wr.Partition, wr.Epoch, wr.PacketID = r.partition, r.epoch, r.pid
		wr.Decide = r.q != nil && !r.copyOnly
	}
	if r.origin.origin != "" {
		wr.Origin, wr.OriginBoot, wr.OriginSeq, wr.At = r.origin.origin, r.origin.boot, r.origin.seq, r.at
	}
	if !copy && wr.Origin == "" {
		return nil, false
	}
	return wr, copy
}

// advanceLocked moves ps's cursor to upTo, stores it and trims.
func (o *outbox) advanceLocked(ps *peerStream, upTo uint64) {
	if upTo > ps.cursor {
		ps.moved = time.Now() // once per confirmed frame
	}
	ps.cursor = max(ps.cursor, upTo)
	if o.store != nil && ps.cursor != ps.saved {
		ps.saved = ps.cursor
		o.store.putCursor(ps.name, ps.cursor)
	}
	o.trimLocked()
}

// inflight is the number of reliable frames waiting for ps's confirmation.
func (o *outbox) inflight(ps *peerStream) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(ps.frames)
}

// setUp marks ps's link established or down. Going down makes every
// unconfirmed record due again, for the next connection, and drops the
// best effort ones.
func (o *outbox) setUp(ps *peerStream, up bool) {
	o.mu.Lock()
	ps.up = up
	if up {
		ps.moved = time.Now()
		o.mu.Unlock()
		return
	}
	if o.room != nil && !o.owedToMovingLocked(time.Now(), false) {
		o.releaseLocked(o.room) // it was the one holding the publishers back
	}
	var dones []func()
	for _, f := range ps.frames {
		dones = append(dones, f.dones...)
	}
	for _, c := range ps.ctl {
		if c.done != nil {
			dones = append(dones, c.done)
		}
	}
	ps.beDropped += uint64(len(ps.be))
	ps.be, ps.beBytes, ps.frames, ps.ctl, ps.sent = nil, 0, nil, nil, ps.cursor
	ps.decSent = ps.decAcked // the next connection carries them again
	o.mu.Unlock()
	// The peer no longer counts on what this node announced on that
	// connection (it takes everything until the next snapshot): nothing
	// waits for it.
	for _, d := range dones {
		d()
	}
}

// queueStats is a snapshot of one peer's stream.
type queueStats struct {
	Backlog   int    // reliable records not confirmed
	Dropped   uint64 // reliable records dropped beyond the limit
	BeDropped uint64 // best effort records dropped
	Holds     uint64 // times the publishers were held back for the peer
}

func (o *outbox) stats(ps *peerStream) queueStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return queueStats{Backlog: int(o.head() - ps.cursor), Dropped: ps.dropped, BeDropped: ps.beDropped, Holds: ps.holds}
}

// decidedLocked moves decided past every record whose quorum write is
// decided (or that has none) and returns it.
func (o *outbox) decidedLocked() uint64 {
	o.decided = max(o.decided, o.base)
	for o.decided < o.head() {
		if q := o.entries.at(int(o.decided - o.base)).rep.quorum(); q != nil && q.undecided() {
			break
		}
		o.decided++
	}
	return o.decided
}

// decisionsLocked is what ps's next header carries: the decided position
// and the refused records after what ps was sent already (at most
// wire's bound: the position then stops at the last one named).
func (o *outbox) decisionsLocked(ps *peerStream) (uint64, []uint64) {
	decided := o.decidedLocked()
	if len(o.refused) == 0 || o.refused[len(o.refused)-1] <= ps.decSent {
		return decided, nil
	}
	i, _ := slices.BinarySearch(o.refused, ps.decSent+1)
	j, _ := slices.BinarySearch(o.refused, decided+1)
	if j-i > maxHeaderRefused {
		j = i + maxHeaderRefused
		decided = o.refused[j-1]
	}
	return decided, o.refused[i:j:j]
}

// maxHeaderRefused is wire's bound on a header's refused list.
const maxHeaderRefused = 4096

// refuse decides q refused from state from, unless it was decided already, and reports
// whether it did. Under mu, so that a header never covers a refused
// record without naming it.
func (o *outbox) refuse(q *quorumWrite, from int32) bool {
	o.mu.Lock()
	if !q.state.CompareAndSwap(from, qRefused) {
		o.mu.Unlock()
		return false
	}
	seq := q.seq.Load()
	if seq > o.base && seq <= o.head() {
		i, found := slices.BinarySearch(o.refused, seq)
		if !found {
			o.refused = slices.Insert(o.refused, i, seq)
		}
		if len(o.refused) > maxRefusedKept {
			o.refused = slices.Delete(o.refused, 0, len(o.refused)-maxRefusedKept)
		}
		if o.store != nil {
			o.store.putRefused(seq) // after its record, in the same order: a restart names it again
		}
	}
	o.mu.Unlock()
	return true
}

// pruneRefusedLocked forgets the refused records every peer confirmed a
// header for.
func (o *outbox) pruneRefusedLocked() {
	if len(o.refused) == 0 {
		return
	}
	low := o.refused[len(o.refused)-1]
	for _, ps := range o.peers {
		low = min(low, ps.decAcked)
	}
	for _, d := range o.absentDec {
		low = min(low, d)
	}
	for name := range o.absent {
		if _, ok := o.absentDec[name]; !ok {
			return // a peer from before a restart: nothing known
		}
	}
	i, found := slices.BinarySearch(o.refused, low)
	if found {
		i++
	}
	if i > 0 {
		o.refused = slices.Delete(o.refused, 0, i)
	}
}

// originMark starts the stored value of a record another node accepted
// (a replay): its partition and origin identity, then the message.
const originMark = 0xfe

func appendOriginRecord(dst []byte, r *repInfo, msg []byte) []byte {
	dst = append(dst, originMark)
	dst = binary.AppendUvarint(dst, uint64(r.partition))
	dst = binary.AppendUvarint(dst, uint64(len(r.origin.origin)))
	dst = append(dst, r.origin.origin...)
	dst = binary.AppendUvarint(dst, r.origin.boot)
	dst = binary.AppendUvarint(dst, r.origin.seq)
	dst = binary.AppendUvarint(dst, uint64(r.at))
	return append(dst, msg...)
}

// parseOriginRecord reads a value appendOriginRecord wrote; ok is false
// for any other value (a message: wire's flags never set bits 6-7).
func parseOriginRecord(v []byte) (r *repInfo, msg []byte, ok bool) {
	if len(v) == 0 || v[0] != originMark {
		return nil, nil, false
	}
	v = v[1:]
	next := func() uint64 {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			ok = false
			return 0
		}
		v = v[n:]
		return x
	}
	ok = true
	part := next()
	n := next()
	if !ok || n > uint64(len(v)) || part > 1<<32-1 {
		return nil, nil, false
	}
	r = &repInfo{partition: uint32(part)}
	r.origin.origin, v = string(v[:n]), v[n:]
	r.origin.boot, r.origin.seq, r.at = next(), next(), int64(next())
	if !ok || r.origin.origin == "" {
		return nil, nil, false
	}
	return r, v, true
}
