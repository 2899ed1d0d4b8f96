package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/cluster/wire"
)

// receiver turns the frames peers publish into local deliveries.
type receiver struct {
	mu      sync.Mutex // guards senders
	senders map[string]*senderState
	store   *store // nil in memory: what was delivered from each sender

	frames     atomic.Uint64 // frames accepted
	messages   atomic.Uint64 // messages delivered
	duplicates atomic.Uint64 // reliable records already delivered (a resend), dropped
	forged     atomic.Uint64 // frames with a bad or missing signature, and link tokens that fail theirs, dropped
	replayed   atomic.Uint64 // frames older than one already accepted from that sender, and link tokens used already or signed before this start, dropped
	corrupt    atomic.Uint64 // frames that do not decode, dropped
	refused    atomic.Uint64 // internal publishes by another user, refused

	caughtUp      atomic.Uint64 // retained messages a peer sent to catch this node up, stored
	staleRetained atomic.Uint64 // retained messages older than the value held, not stored

	replays     replaySet     // other nodes' records delivered here from a replay
	copied      atomic.Uint64 // records stored as a partition copy
	held        atomic.Int64  // copies whose delivery waits for their origin's decision now
	released    atomic.Uint64 // held copies delivered once their write was acknowledged
	refusedDrop atomic.Uint64 // held copies dropped: their write was refused
	staleCopies atomic.Uint64 // copies refused: written in an epoch that is over
	replayDups  atomic.Uint64 // replay copies of records delivered already, dropped
	afterFail   atomic.Uint64 // frames refused: sent on a connection after a frame that failed
}

// errAfterFailure answers a frame that came on a connection after a frame
// this node failed to write: its sender resends both on a new one.
var errAfterFailure = packet.ImplementationSpecificError

// senderState is what the receiver remembers of one peer. A link's frames
// arrive on one connection's reader; mu orders a reconnected link's
// frames after the old connection's.
type senderState struct {
	mu      sync.Mutex
	boot    uint64    // the sender's incarnation
	lastSeq uint64    // highest reliable record delivered from boot
	lastTS  time.Time // newest envelope timestamp accepted
	// conn is the newest of the sender's link connections (wire.Header.Conn)
	// that a frame of boot came on; written under mu.
	conn atomic.Uint64

	// seenBoot and seen mirror boot and lastSeq for readers that do not
	// hold mu (a replay of this sender's records arriving from another).
	seenBoot, seen atomic.Uint64

	// What the writes of the records taken from boot wBoot did, for the
	// resend after a frame failed: the receiver rewinds lastSeq to that
	// frame, and its sender sends again whatever it has not had
	// confirmed, the frames that were in flight behind it included,
	// which finish in any order. Every record up to floor was written
	// whole (delivered, its copies stored); above it, done holds the
	// records of frames written whole, which a resend drops, and again
	// those of frames whose deliveries succeeded while another of their
	// writes failed (a copy, on a full disk), which a resend writes again
	// but does not deliver a second time (the broker recognises the
	// resend only of a delivery that failed: delivered twice, a QoS 2
	// message reached a subscriber twice). A frame resent after a
	// reconnect whose records are all taken already is answered only
	// once floor covers them: its sender counts the answer as a durable
	// copy.
	wmu         sync.Mutex // guards wBoot, floor, done, again, waits, refuse*; taken after mu
	wBoot       uint64
	floor       uint64
	done, again seqRanges
	ranges      atomic.Int32 // len(done) + len(again): the usual empty case takes no lock
	waits       []dupWait

	// The frames of refuseBoot that came on connections up to refuseTo
	// are refused: they came after a frame that failed (when the failure
	// was known, refuseTo was the newest connection). Taken, they would
	// move lastSeq, just rewound to the failed frame, past it again: a
	// frame sent behind it takes lastSeq+1.. as its own, the failed
	// frame's records included, and once written marks them written, so
	// that the resend drops them (lost). The sender reconnects when a
	// frame fails, and sends again from it on a newer connection.
	refuseBoot, refuseTo uint64

	// held are the copies from this sender not delivered yet, in order:
	// their quorum write is not decided (two-phase delivery); under mu.
	held []heldRec
}

// finishedBefore reports, for record seq of boot taken again after a
// rewind (a resend), whether a frame wrote it whole already (drop it) or
// delivered it while another of its writes failed (write it again, do not
// deliver it). The caller holds mu.
func (s *senderState) finishedBefore(boot, seq uint64) (done, again bool) {
	if s.ranges.Load() == 0 {
		return false, false
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if boot != s.wBoot {
		return false, false
	}
	return seq <= s.floor || s.done.has(seq), s.again.has(seq)
}

// refuseAfterFailure makes the frames of boot on the connections seen so
// far refused (refuseBoot).
func (s *senderState) refuseAfterFailure(boot uint64) {
	conn := s.conn.Load()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if boot > s.refuseBoot {
		s.refuseBoot, s.refuseTo = boot, conn
	} else if boot == s.refuseBoot {
		s.refuseTo = max(s.refuseTo, conn)
	}
}

// refusing reports whether a frame of boot on conn is refused
// (refuseBoot).
func (s *senderState) refusing(boot, conn uint64) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return boot == s.refuseBoot && conn <= s.refuseTo
}

// floorOf is floor when boot is wBoot, else 0.
func (s *senderState) floorOf(boot uint64) uint64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if boot != s.wBoot {
		return 0
	}
	return s.floor
}

// heldRec is a copy whose delivery waits for its origin's decision.
type heldRec struct {
	id     copyID
	part   uint32
	key    uint64   // in the partition's copy log
	enc    []byte   // the message (wire.AppendMessage), this node's own bytes
	groups []string // the shared subscriptions it is delivered to (lost across a restart)
	client string   // a QoS 2 message's publisher and packet id (for the QoS 2 index)
	pid    uint16
}

// addHeld appends hs (in stream order) to s.held, except those held
// already (a frame resent). The caller holds mu.
func (s *senderState) addHeld(hs []heldRec) int {
	n := 0
	for _, h := range hs {
		if k := len(s.held); k == 0 || heldBefore(s.held[k-1].id, h.id) {
			s.held = append(s.held, h) // the usual case: after the last
			n++
			continue
		}
		// A resend below what is held (after a restart): in its place, so
		// that releases stay in stream order.
		i, found := slices.BinarySearchFunc(s.held, h.id, cmpHeld)
		if !found {
			s.held = slices.Insert(s.held, i, h)
			n++
		}
	}
	return n
}

func heldBefore(a, b copyID) bool { return a.boot < b.boot || (a.boot == b.boot && a.seq < b.seq) }

func cmpHeld(x heldRec, id copyID) int {
	switch {
	case x.id == id:
		return 0
	case heldBefore(x.id, id):
		return -1
	}
	return 1
}

// rekeyHeld points held copy id at its copy written again under key: a
// resend wrote it after its first write failed (a refusal deletes the
// copy by this key). The caller holds mu.
func (s *senderState) rekeyHeld(id copyID, key uint64) {
	if i, found := slices.BinarySearchFunc(s.held, id, cmpHeld); found {
		s.held[i].key = key
	}
}

// decide applies a header's decisions to s.held: the records of an older
// boot (undecidable now: delivered) and those up to decided are released,
// the refused ones dropped. The caller holds mu.
func (s *senderState) decide(boot, decided uint64, refused []uint64) (release, drop []heldRec) {
	keep := s.held[:0]
	for _, h := range s.held {
		switch {
		case h.id.boot < boot:
			release = append(release, h)
		case h.id.boot > boot:
			keep = append(keep, h)
		case slices.Contains(refused, h.id.seq):
			drop = append(drop, h)
		case h.id.seq <= decided:
			release = append(release, h)
		default:
			keep = append(keep, h)
		}
	}
	clear(s.held[len(keep):])
	s.held = keep
	return release, drop
}

// mayDecide reports whether a header with these decisions changes s.held.
func (s *senderState) mayDecide(boot, decided uint64, refused []uint64) bool {
	if len(s.held) == 0 {
		return false
	}
	h := s.held[0].id
	return h.boot < boot || (h.boot == boot && h.seq <= decided) || len(refused) > 0
}

// dupWait is a resent frame waiting for the writes of its records.
type dupWait struct {
	boot, upTo uint64
	res        broker.Resolver
}

// finished records the outcome of the writes of one frame's records
// from..upTo of boot (err nil: all succeeded; delivered: its deliveries
// did; held: those it held, in s.held whatever the outcome, so that its
// resend holds none of them again, which it may have released and
// delivered since), answers the resent frames that waited for them, and
// returns floor (ok false for a boot that is over).
func (s *senderState) finished(boot, from, upTo uint64, err error, delivered bool, held seqRanges) (floor uint64, ok bool) {
	s.wmu.Lock()
	if boot > s.wBoot {
		s.wBoot, s.floor, s.done, s.again = boot, 0, nil, nil
	}
	if ok = boot == s.wBoot; ok {
		switch {
		case err == nil:
			s.done.add(from, upTo)
		case delivered:
			s.again.add(from, upTo)
		default:
			for _, r := range held {
				s.again.add(r.from, r.to)
			}
		}
		for len(s.done) > 0 && s.done[0].from <= s.floor+1 {
			s.floor = max(s.floor, s.done[0].to)
			s.done = slices.Delete(s.done, 0, 1)
		}
		s.again.dropTo(s.floor)
		s.ranges.Store(int32(len(s.done) + len(s.again)))
		floor = s.floor
	}
	var ready []dupWait
	keep := s.waits[:0]
	for _, w := range s.waits {
		if err != nil || w.boot < s.wBoot || (w.boot == s.wBoot && w.upTo <= s.floor) {
			ready = append(ready, w)
		} else {
			keep = append(keep, w)
		}
	}
	s.waits = keep
	s.wmu.Unlock()
	for _, w := range ready {
		w.res.Resolve(err)
	}
	return floor, ok
}

// covered reports whether the writes of boot's records up to upTo
// finished; if not, res waits for them.
func (s *senderState) covered(boot, upTo uint64, res broker.Resolver) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if boot < s.wBoot || (boot == s.wBoot && upTo <= s.floor) {
		return true
	}
	s.waits = append(s.waits, dupWait{boot: boot, upTo: upTo, res: res})
	return false
}

// mark publishes boot and lastSeq; the caller holds mu.
func (s *senderState) mark() {
	s.seenBoot.Store(s.boot)
	s.seen.Store(s.lastSeq)
}

// delivered reports whether the receiver delivered id from its origin's
// own stream, or from a replay.
func (r *receiver) delivered(id copyID) bool {
	r.mu.Lock()
	s := r.senders[id.origin]
	r.mu.Unlock()
	if s != nil && s.seenBoot.Load() == id.boot && id.seq <= s.seen.Load() {
		return true
	}
	return r.replays.has(id)
}

// ReceiveStats counts what peers sent this node.
type ReceiveStats struct {
	Frames     uint64 `json:"frames"`
	Messages   uint64 `json:"messages"`
	Duplicates uint64 `json:"duplicatesDropped"`
	Forged     uint64 `json:"forgedDropped"`
	Replayed   uint64 `json:"replayedDropped"`
	Corrupt    uint64 `json:"corruptDropped"`
	Refused    uint64 `json:"unauthorizedRefused"`
	CaughtUp   uint64 `json:"retainedCaughtUp"`
	Stale      uint64 `json:"retainedStale"`
	// AfterFailure: frames refused because they came on a connection
	// behind a frame this node failed to write (the sender resends them).
	AfterFailure uint64 `json:"afterFailureRefused"`
}

func (r *receiver) stats() ReceiveStats {
	return ReceiveStats{Frames: r.frames.Load(), Messages: r.messages.Load(), Duplicates: r.duplicates.Load(),
		Forged: r.forged.Load(), Replayed: r.replayed.Load(), Corrupt: r.corrupt.Load(),
		Refused: r.refused.Load(), CaughtUp: r.caughtUp.Load(), Stale: r.staleRetained.Load(), AfterFailure: r.afterFail.Load()}
}

func (r *receiver) sender(name string) *senderState {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.senders[name]
	if s == nil {
		s = &senderState{}
		r.senders[name] = s
	}
	return s
}

// receive handles a message on an internal topic. Only a frame from the
// cluster user is taken; it is verified, stripped of what was delivered
// already, and delivered locally as OriginPeer. A reliable frame (QoS 1)
// is confirmed only once what it delivered is durable.
func (p *Plane) receive(m *broker.Message, res broker.Resolver) error {
	r := &p.recv
	if m.Origin != broker.OriginClient || m.Username != p.opts.Username || m.Topic != frameTopic {
		r.refused.Add(1)
		return packet.NotAuthorized
	}
	env, err := p.opts.Signer.Verify(m.Payload)
	if err != nil {
		r.forged.Add(1)
		p.warn("forged", "dropped a data-plane frame that fails its signature check", err)
		return packet.NotAuthorized
	}
	h, records, err := wire.ParseHeader(env.Payload)
	if err != nil {
		r.corrupt.Add(1)
		p.warn("corrupt", "dropped a data-plane frame that does not decode", err)
		return packet.PayloadFormatInvalid
	}
	s := r.sender(h.Sender)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.Boot > s.boot {
		s.lastTS = time.Time{} // a new stream: its clock may be behind the old one's
	}
	switch {
	case !env.SentAt.After(s.lastTS) || h.Boot < s.boot:
		r.replayed.Add(1)
		p.warn("replay", "dropped a replayed data-plane frame from "+h.Sender, errors.New("not newer than the last frame accepted"))
		return packet.NotAuthorized
	case h.Boot > s.boot:
		s.boot, s.lastSeq = h.Boot, 0 // a new stream
		s.conn.Store(0)
	}
	if s.refusing(h.Boot, h.Conn) {
		r.afterFail.Add(1)
		return errAfterFailure
	}
	if h.Conn > s.conn.Load() {
		s.conn.Store(h.Conn)
	}
	defer s.mark()
	prevSeq := s.lastSeq // restored when the frame's deliveries fail, so its resend is taken
	var batch, retain []*broker.Message
	var batchSeqs []uint64 // each batch message's number in the sender's stream
	var copies frameCopies
	var holds []holdRef      // copies of this frame whose delivery waits for a decision
	var heldSeqs seqRanges   // their numbers, with those held already (again)
	var replayed []copyID    // replays this frame delivers: forgotten again if its writes fail
	var delivErr atomic.Bool // a delivery of the frame (not its other writes) failed
	var maxSeq uint64
	stale := false
	now := time.Now().UnixNano()
	for len(records) > 0 {
		var rec wire.Record
		if rec, records, err = wire.NextRecord(records); err != nil {
			break
		}
		seq, enc := rec.Seq, rec.Msg
		maxSeq = max(maxSeq, seq)
		again := false // its copy is written again, its delivery not
		if seq != 0 {
			if seq <= s.lastSeq {
				r.duplicates.Add(1)
				continue
			}
			s.lastSeq = seq
			if r.replays.has(copyID{origin: h.Sender, boot: h.Boot, seq: seq}) {
				r.duplicates.Add(1) // delivered already, from another node's replay
				continue
			}
			var done bool
			if done, again = s.finishedBefore(h.Boot, seq); done {
				r.duplicates.Add(1) // written whole by a frame before this resend
				continue
			}
		}
		// A copy that is only stored here (held for its origin's
		// decision, or a copy alone) is peeked at, not decoded: a copy
		// decoded every message it stored (a third of its CPU).
		rp := &rec.Rep
		var v msgView
		var derr error
		if p.copies != nil && rp.Copy && (rp.CopyOnly || (rp.Decide && rp.Origin == "")) {
			v.pk, derr = wire.PeekMessage(enc)
		} else {
			v.d, derr = wire.DecodeMessage(enc)
		}
		if derr != nil {
			err = derr
			break
		}
		d := v.d
		if p.copies != nil && (rp.Copy || rp.Origin != "") {
			id, at := copyID{origin: h.Sender, boot: h.Boot, seq: seq}, now
			if rp.Origin != "" {
				id, at = copyID{origin: rp.Origin, boot: rp.OriginBoot, seq: rp.OriginSeq}, rp.At
			}
			if rp.Copy {
				if p.gate.fenced.Load() || (rp.Epoch < p.gate.epoch(rp.Partition) && !p.gate.replica(rp.Partition, p.opts.NodeName)) {
					// Not counted (the answer says so), but stored and
					// delivered as any copy: the sender may get its
					// majority elsewhere.
					stale = true
					r.staleCopies.Add(1)
					if p.trace != nil {
						p.trace.event(TraceEvent{Event: "staleCopy", Client: v.client(), Topic: v.topic(), Partition: rp.Partition,
							Epoch: rp.Epoch, Origin: id.origin, Seq: id.seq, Reason: fmt.Sprintf("epoch %d here", p.gate.epoch(rp.Partition))})
					}
				}
				cr := copyRec{id: id, at: at, epoch: rp.Epoch, msg: copies.keep(enc, len(records))}
				if rp.PacketID != 0 {
					cr.pid, cr.client, cr.sum = rp.PacketID, v.client(), v.qos2Sum()
				}
				cr.hold = rp.Decide && !rp.CopyOnly && rp.Origin == ""
				ci := copies.add(rp.Partition, cr, len(records))
				if p.trace != nil {
					p.trace.event(TraceEvent{Event: "copy", Client: v.client(), Topic: v.topic(), QoS: v.qos(),
						Partition: rp.Partition, Epoch: rp.Epoch, Origin: id.origin, Seq: id.seq})
				}
				if cr.hold {
					// Delivered once its origin says the write was
					// acknowledged, never if it was refused (nor held
					// again when the first frame held it already).
					holds = append(holds, holdRef{part: rp.Partition, i: ci, groups: rec.Groups, again: again})
					heldSeqs.add(seq, seq)
					continue
				}
			}
			if rp.CopyOnly {
				continue
			}
			if rp.Origin != "" && !p.gate.opts.DeliverReplays {
				if id.origin == p.opts.NodeName || r.delivered(id) {
					r.replayDups.Add(1) // this node's own, or delivered already
					continue
				}
				r.replays.add(id)
				replayed = append(replayed, id)
				p.trace.event(TraceEvent{Event: "replay", Client: d.Msg.ClientID, Topic: d.Msg.Topic, QoS: d.Msg.QoS,
					Origin: id.origin, Seq: id.seq})
			}
		}
		if again {
			r.duplicates.Add(1)
			continue
		}
		if d.Msg.Topic == wire.InterestTopic {
			op, filters, ferr := wire.DecodeFilters(d.Msg.Payload)
			if ferr != nil {
				err = ferr
				break
			}
			p.heard(h.Sender, op, filters)
			continue
		}
		d.Msg.PeerGroups = rec.Groups
		if seq != 0 {
			// Named, so that the broker recognises this record's resend
			// after a failed write (DeliverBatch): it is the sender's or,
			// for a replay, its origin's.
			d.Msg.Record = broker.PeerRecord{Node: h.Sender, Boot: h.Boot, Seq: seq}
			if rp := &rec.Rep; rp.Origin != "" {
				d.Msg.Record = broker.PeerRecord{Node: rp.Origin, Boot: rp.OriginBoot, Seq: rp.OriginSeq}
			}
		}
		switch p.prepare(&d) {
		case toStore:
			retain = append(retain, d.Msg)
		case toDeliver:
			batch = append(batch, d.Msg)
			batchSeqs = append(batchSeqs, seq)
		}
	}
	if err != nil {
		r.corrupt.Add(1)
		p.warn("corrupt", "a data-plane frame from "+h.Sender+" has a corrupt record", err)
	}
	s.lastTS = env.SentAt
	boot, upTo := s.boot, s.lastSeq
	settled := func(err error) {
		floor, current := prevSeq, false
		if upTo != prevSeq {
			floor, current = s.finished(boot, prevSeq+1, upTo, err, !delivErr.Load(), heldSeqs)
		}
		if err != nil || floor < upTo {
			p.traceFrameWrites(h.Sender, boot, prevSeq, upTo, floor, delivErr.Load(), err)
		}
		if err != nil {
			// The frame comes again, on a newer connection: the frames
			// behind it on the connections seen so far are refused,
			// before lastSeq goes back.
			if upTo != prevSeq {
				s.refuseAfterFailure(boot)
			}
			// Its replays are not delivered yet (the broker sends a
			// resend only where the first failed).
			r.replays.remove(replayed)
			// Not under the store's goroutine: receive may hold s.mu while
			// it waits for that goroutine. Never below floor: that much is
			// written whatever the order the frames finished in.
			go func() {
				s.mu.Lock()
				if s.boot == boot && s.lastSeq > prevSeq {
					s.lastSeq = max(prevSeq, s.floorOf(boot))
					s.mark()
				}
				s.mu.Unlock()
			}()
			return
		}
		if r.store != nil && upTo != prevSeq && current {
			// Only once what it delivered is durable: a crash before must
			// not make the resend a duplicate. Up to floor, not upTo: a
			// frame before this one may have failed (its resend must not
			// be dropped after a restart).
			r.store.putReceived(h.Sender, boot, floor)
		}
	}
	r.frames.Add(1)
	r.messages.Add(uint64(len(batch)))
	r.caughtUp.Add(uint64(len(retain)))
	answer := func(err error) error {
		if err == nil && stale {
			return errStaleCopy // the sender counts none of this frame's copies here
		}
		return err
	}
	if len(batch) == 0 && len(retain) == 0 && len(copies.recs) == 0 && !s.mayDecide(h.Boot, h.Decided, h.Refused) {
		if m.QoS == 1 && maxSeq > 0 && upTo == prevSeq && !s.covered(boot, min(maxSeq, upTo), res) {
			return broker.ErrDeferred // its records' first writes have not finished yet
		}
		if upTo != prevSeq {
			s.finished(boot, prevSeq+1, upTo, nil, true, nil) // nothing to write: done
		}
		return answer(nil)
	}
	// The hook holds one count and each store write that has to finish
	// another; whoever drops it to zero answers the frame.
	var left atomic.Int32
	var firstErr atomic.Pointer[error]
	result := func() error {
		if e := firstErr.Load(); e != nil {
			return *e
		}
		return nil
	}
	confirm := func(err error) { settled(err); res.Resolve(answer(err)) }
	if m.QoS == 0 {
		confirm = settled // nobody waits
	}
	done := func(err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
		if left.Add(-1) == 0 {
			confirm(result())
		}
	}
	left.Store(1)
	start := func(f func() bool) {
		left.Add(1)
		if !f() {
			left.Add(-1)
		}
	}
	// The copies first: their keys name the frame's holds.
	var pos []int
	if p.copies != nil && p.copies.store == nil {
		// In memory: written at once, in frame order, without grouping.
		r.copied.Add(uint64(len(copies.recs)))
		p.copies.addMixed(copies.parts, copies.recs)
	} else {
		var groups []partRecs
		groups, pos = copies.byPart()
		for _, g := range groups {
			r.copied.Add(uint64(len(g.recs)))
			start(func() bool { return p.copies.add(g.part, g.recs, done) })
		}
	}
	if len(holds) > 0 {
		hs := make([]heldRec, 0, len(holds))
		for _, hr := range holds {
			c := copies.at(pos, hr.i)
			if hr.again {
				s.rekeyHeld(c.id, c.key)
				continue
			}
			hs = append(hs, heldRec{id: c.id, part: hr.part, key: c.key, enc: c.msg, groups: hr.groups, client: c.client, pid: c.pid})
		}
		r.held.Add(int64(s.addHeld(hs)))
	}
	// Then the decisions: what they release is delivered before the
	// frame's other messages (which come after it in the sender's stream),
	// what they refuse goes.
	release, drop := s.decide(h.Boot, h.Decided, h.Refused)
	settle := func(error) {} // of the released copies, once delivered
	if len(release)+len(drop) > 0 {
		r.held.Add(-int64(len(release) + len(drop)))
		if len(drop) > 0 {
			r.refusedDrop.Add(uint64(len(drop)))
			for _, d := range drop {
				p.trace.event(TraceEvent{Event: "copyRefused", Partition: d.part, Origin: d.id.origin, Seq: d.id.seq,
					Reason: "its origin refused the write"})
			}
			start(func() bool { return p.copies.dropRefused(drop, done) })
		}
		if len(release) > 0 {
			// In the sender's stream order with the frame's other
			// messages: a record released now may come after some of them
			// (its partition's copies changed meanwhile).
			msgs, seqs := p.releasable(release)
			batch, batchSeqs = mergeBySeq(msgs, seqs, batch, batchSeqs)
			settle = p.afterRelease(s, release)
		}
	}
	start(func() bool {
		if len(batch) > 0 && p.opts.Broker.DeliverBatch(batch, func(err error) {
			if err != nil {
				delivErr.Store(true)
			}
			settle(err)
			done(err)
		}) {
			return true
		}
		settle(nil) // delivered, nothing to wait for
		return false
	})
	start(func() bool {
		return len(retain) > 0 && p.opts.Broker.StoreRetainedBatch(retain, func(err error) {
			if err != nil {
				delivErr.Store(true)
			}
			done(err)
		})
	})
	if left.Add(-1) == 0 {
		err := result() // everything is durable already
		settled(err)
		return answer(err)
	}
	if m.QoS == 0 {
		return nil // nobody waits; settled runs when the writes finish
	}
	return broker.ErrDeferred
}

// msgView is a record's message as receive read it: decoded (d), or, for
// a copy only stored, peeked at (pk).
type msgView struct {
	d  wire.Decoded
	pk wire.Peek
}

func (v *msgView) client() string {
	if v.d.Msg != nil {
		return v.d.Msg.ClientID
	}
	return string(v.pk.ClientID)
}

func (v *msgView) topic() string {
	if v.d.Msg != nil {
		return v.d.Msg.Topic
	}
	return string(v.pk.Topic)
}

func (v *msgView) qos() byte {
	if v.d.Msg != nil {
		return v.d.Msg.QoS
	}
	return v.pk.QoS
}

func (v *msgView) qos2Sum() uint64 {
	if v.d.Msg != nil {
		return qos2Sum(v.d.Msg.Topic, v.d.Msg.Payload)
	}
	return qos2Sum(v.pk.Topic, v.pk.Payload)
}

// replayedMax bounds the replay set: the replayed records remembered.
const replayedMax = 200_000

// replaySet remembers the records delivered here from a failover replay
// (another node re-sending a lost node's records), oldest out first, so
// that the same record from its origin's own stream, or from a second
// replay, is dropped.
type replaySet struct {
	mu    sync.Mutex // guards ids and order
	ids   map[copyID]struct{}
	order []copyID
	max   int
	n     atomic.Int32 // len(ids): the common empty case takes no lock
}

func (s *replaySet) init(max int) { s.ids, s.max = map[copyID]struct{}{}, max }

func (s *replaySet) has(id copyID) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	_, ok := s.ids[id]
	s.mu.Unlock()
	return ok
}

// remove forgets ids (their delivery failed). What they held in the
// order goes with the oldest in time: at worst it forgets a later add of
// the same id early, a duplicate, never a loss.
func (s *replaySet) remove(ids []copyID) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	for _, id := range ids {
		delete(s.ids, id)
	}
	s.n.Store(int32(len(s.ids)))
	s.mu.Unlock()
}

func (s *replaySet) add(id copyID) {
	s.mu.Lock()
	if _, ok := s.ids[id]; !ok {
		s.ids[id] = struct{}{}
		s.order = append(s.order, id)
		if len(s.order) > s.max {
			delete(s.ids, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.n.Store(int32(len(s.ids)))
	s.mu.Unlock()
}

// frameCopies are the copies of the frame being received, in frame order
// (add), then grouped by partition for the copy log (byPart). Appending
// to a slice per partition, found in a map, grew some 30 slices of
// records per frame: half of a copy node's CPU under load.
type frameCopies struct {
	recs  []copyRec
	parts []uint32 // recs[i]'s partition
	arena []byte   // the records' messages, copied out of the frame
	// sorted, once grouped by byPart with more than one partition
	sorted []copyRec
}

// estRecords is how many records a frame's bytes left (rest) may hold
// at most in the usual case: a small message's record takes some 50.
func estRecords(rest int) int { return min(rest/32+1, 4096) }

// keep copies a record's message, enc, into the frame's arena (rest: the
// frame's bytes after it, to size the arena).
func (fc *frameCopies) keep(enc []byte, rest int) []byte {
	if len(fc.arena)+len(enc) > cap(fc.arena) {
		fc.arena = make([]byte, 0, max(len(enc)+rest, 4096))
	}
	start := len(fc.arena)
	fc.arena = append(fc.arena, enc...)
	return fc.arena[start:len(fc.arena):len(fc.arena)]
}

// add appends a copy of partition part and returns its index.
func (fc *frameCopies) add(part uint32, cr copyRec, rest int) int {
	if fc.recs == nil {
		n := estRecords(rest) + 1
		fc.recs, fc.parts = make([]copyRec, 0, n), make([]uint32, 0, n)
	}
	fc.recs = append(fc.recs, cr)
	fc.parts = append(fc.parts, part)
	return len(fc.recs) - 1
}

// partRecs are one partition's copies of a frame.
type partRecs struct {
	part uint32
	recs []copyRec
}

// byPart groups the copies by partition, each group in frame order; pos
// maps an index of add to the record's place in the groups (nil: the
// same, one partition).
func (fc *frameCopies) byPart() (groups []partRecs, pos []int) {
	if len(fc.recs) == 0 {
		return nil, nil
	}
	one := true
	for _, p := range fc.parts[1:] {
		if p != fc.parts[0] {
			one = false
			break
		}
	}
	if one {
		return []partRecs{{fc.parts[0], fc.recs}}, nil
	}
	// A counting sort, stable, the partitions in the order they first
	// appear.
	group := map[uint32]int{}
	of := make([]int32, len(fc.parts)) // each record's group
	var counts []int
	for i, p := range fc.parts {
		g, ok := group[p]
		if !ok {
			g = len(groups)
			group[p] = g
			groups = append(groups, partRecs{part: p})
			counts = append(counts, 0)
		}
		of[i] = int32(g)
		counts[g]++
	}
	next := make([]int, len(groups))
	off := 0
	for g, n := range counts {
		next[g] = off
		off += n
	}
	fc.sorted, pos = make([]copyRec, len(fc.recs)), make([]int, len(fc.recs))
	for i := range fc.recs {
		j := next[of[i]]
		next[of[i]]++
		fc.sorted[j], pos[i] = fc.recs[i], j
	}
	off = 0
	for g, n := range counts {
		groups[g].recs = fc.sorted[off : off+n : off+n]
		off += n
	}
	return groups, pos
}

// at is the copy add numbered i, as byPart grouped it (pos).
func (fc *frameCopies) at(pos []int, i int) *copyRec {
	if pos == nil {
		return &fc.recs[i]
	}
	return &fc.sorted[pos[i]]
}

// holdRef is a copy of the frame being received that is held: its place
// in the frame's copies.
type holdRef struct {
	part   uint32
	i      int
	groups []string
	again  bool // held already, by a frame that failed: only its copy is written again
}

// What prepare decided for a message from a peer.
const (
	toDeliver = iota // to the subscribers (and the retained store)
	toStore          // to the retained store only
	toSkip           // nowhere: the retained store holds a newer value
)

// prepare checks a message from a peer against the retained versions
// held here.
func (p *Plane) prepare(d *wire.Decoded) int {
	if d.Msg.Retain && !p.retained.accept(d.Msg.Topic, d.Version) {
		p.recv.staleRetained.Add(1)
		if d.StoreOnly {
			return toSkip // this node holds a newer value
		}
		d.Msg.Retain = false // delivered, not stored over the newer value
	}
	if d.StoreOnly {
		return toStore
	}
	return toDeliver
}

// releasable is the messages of released held copies, with their
// numbers in their sender's stream.
func (p *Plane) releasable(hs []heldRec) ([]*broker.Message, []uint64) {
	batch := make([]*broker.Message, 0, len(hs))
	seqs := make([]uint64, 0, len(hs))
	for _, h := range hs {
		d, err := wire.DecodeMessage(h.enc)
		if err != nil {
			continue
		}
		d.Msg.PeerGroups = h.groups
		d.Msg.Record = broker.PeerRecord{Node: h.id.origin, Boot: h.id.boot, Seq: h.id.seq} // released again after a failed delivery: recognised
		if p.prepare(&d) == toDeliver {
			batch = append(batch, d.Msg)
			seqs = append(seqs, h.id.seq)
		}
	}
	p.recv.released.Add(uint64(len(hs)))
	p.recv.messages.Add(uint64(len(batch)))
	return batch, seqs
}

// mergeBySeq merges two message lists, each in stream order, into one.
func mergeBySeq(a []*broker.Message, as []uint64, b []*broker.Message, bs []uint64) ([]*broker.Message, []uint64) {
	if len(b) == 0 {
		return a, as
	}
	out := make([]*broker.Message, 0, len(a)+len(b))
	outs := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || (i < len(a) && as[i] <= bs[j]) {
			out, outs = append(out, a[i]), append(outs, as[i])
			i++
		} else {
			out, outs = append(out, b[j]), append(outs, bs[j])
			j++
		}
	}
	return out, outs
}

// release delivers held copies whose write was acknowledged (or can no
// longer be decided) and, once that is durable, forgets them in the held
// bucket; done, when it returns true, runs then. A failed delivery holds
// them again, for the next decision.
func (p *Plane) release(s *senderState, hs []heldRec, done func(error)) bool {
	batch, _ := p.releasable(hs)
	after := p.afterRelease(s, hs)
	if len(batch) > 0 && p.opts.Broker.DeliverBatch(batch, func(err error) { after(err); done(err) }) {
		return true
	}
	after(nil)
	return false
}

// afterRelease is what follows the delivery of released copies hs: on
// success they leave the held bucket, on failure they are held again.
func (p *Plane) afterRelease(s *senderState, hs []heldRec) func(error) {
	return func(err error) {
		if err != nil {
			// Not on the broker's goroutine: receive holds s.mu while it
			// may wait for it.
			go func() {
				s.mu.Lock()
				p.recv.held.Add(int64(s.addHeld(hs))) // in order: addHeld inserts in place
				s.mu.Unlock()
			}()
		} else if p.store != nil {
			p.store.dropHeld(hs, false, nil)
		}
	}
}

// holding is the senders with held copies.
func (r *receiver) holding() []string {
	if r.held.Load() == 0 {
		return nil
	}
	r.mu.Lock() // not held with a sender's mu: that one comes first
	senders := make(map[string]*senderState, len(r.senders))
	for name, s := range r.senders {
		senders[name] = s
	}
	r.mu.Unlock()
	var out []string
	for name, s := range senders {
		s.mu.Lock()
		if len(s.held) > 0 {
			out = append(out, name)
		}
		s.mu.Unlock()
	}
	return out
}

// releaseFrom delivers every copy held from origin: it left the partition
// map, so its decisions will not come (what it acknowledged must not be
// lost; what it had not, its publisher sends again).
func (p *Plane) releaseFrom(origin string) {
	r := &p.recv
	r.mu.Lock()
	s := r.senders[origin]
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	hs := s.held
	s.held = nil
	if len(hs) > 0 {
		r.held.Add(-int64(len(hs)))
		p.release(s, hs, func(error) {})
		p.log.Info("a node left the partition map: delivered the copies held for its decision", "node", origin, "records", len(hs))
	}
	s.mu.Unlock()
}

// restoreHeld takes up the copies held when this node stopped.
func (p *Plane) restoreHeld() {
	hs := p.store.loadHeld()
	r := &p.recv
	for _, h := range hs {
		s := r.senders[h.id.origin]
		if s == nil {
			s = &senderState{}
			r.senders[h.id.origin] = s
		}
		s.held = append(s.held, h)
	}
	r.held.Store(int64(len(hs)))
}

// traceFrameWrites logs, at debug level, a frame whose writes failed or
// that finished while one before it had not: which sender, which records
// (from after prevSeq to upTo), whether its deliveries failed, and up to
// where the sender's records are written (floor). A full disk's
// duplicates were traced from these (make chaos with
// COREFLUX_LOG_LEVEL=debug).
func (p *Plane) traceFrameWrites(sender string, boot, prevSeq, upTo, floor uint64, delivFailed bool, err error) {
	if !p.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	p.log.Debug("a data-plane frame's writes finished", "sender", sender, "boot", boot, "from", prevSeq+1, "to", upTo,
		"floor", floor, "deliveryFailed", delivFailed, "err", err)
}
