package dataplane

import (
	"errors"
	"fmt"
	"time"

	"gantry/broker"
	"gantry/cluster/wire"
)

// Handing a session over (see sessions.go): the node that holds it lends
// it to the node that takes it, which pulls it in bounded parts, imports
// each in order, and confirms once the last is stored. Until then the
// session stays here, on disk with durability, out of reach: no
// connection attaches to it and nothing is delivered to it (the taker has
// the subscriptions already). Without the confirmation (the taker failed
// to store a part, lost an answer, crashed, went silent for LendWait) it
// comes back here whole and is handed over again (returnSession): its
// messages may arrive twice, never not at all.
//
//	taker                          holder
//	POST export {client}       →   takeover, flushes, lend; part 0 (subscriptions, expiry, first entries)
//	POST export/part {offset}  →   the next part (as long as More)
//	POST export/done {stored}  →   stored: deleted here; not stored: taken back, handed over again
//
// A returning holder (returnSession) lends the same way: it offers the
// session (POST handover {client, lend}) and the new holder pulls it.

// Bounds of the handover.
const (
	partBytes   = 2 << 20          // one part's encoded messages at most (a larger message goes alone)
	partEntries = 1024             // and its entries at most
	lendWait    = 10 * time.Second // a lent session waits this long for its borrower's next request
	returnWait  = 30 * time.Second // a returning holder's offer waits this long for the new holder to pull it whole
	// partRate is the slowest link a part is given time for: at
	// PartBytes, a part's request waits claimWait plus PartBytes at this
	// rate (8 s for 2 MiB), and a lent session as long beyond LendWait
	// after its last answer. With claimWait alone, a part that took longer
	// than 2 s to arrive was given up, the session taken back and lent
	// again, and on a slow link a large session never finished moving.
	partRate = 256 << 10 // bytes/s
)

// transferWait is the time a part is given to travel (see partRate).
func (s *Sessions) transferWait() time.Duration {
	return time.Duration(s.opts.PartBytes) * time.Second / partRate
}

// partWait bounds a request whose answer is a part.
func (s *Sessions) partWait() time.Duration { return claimWait + s.transferWait() }

// lend is a session this node lent and has not settled yet.
type lend struct {
	id     uint64
	client string
	to     string // the borrower
	claim  bool   // lent to a claiming node (else returned to a newer holder)
	ls     *broker.LentSession
	timer  *time.Timer // gives it back after LendWait without a request
	// last is the borrower's last request, or the end of the last
	// answer's write; writing counts the answers being written (a lend
	// does not time out meanwhile). Guarded by Sessions.lmu.
	last    time.Time
	writing int
}

// lendTo lends client's session to node to; nil when this node does not
// hold it (or it is connected here again).
func (s *Sessions) lendTo(client, to string, claim bool) *lend {
	s.takeBack(client, "lent again") // an earlier lend not settled: it goes whole into this one
	ls, ok := s.opts.Broker.LendSession(client)
	if !ok {
		return nil
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.lendSeq++
	l := &lend{id: s.lendSeq, client: client, to: to, claim: claim, ls: ls, last: time.Now()}
	s.lends[client] = l
	l.timer = time.AfterFunc(s.lendWait(), func() { s.lendTimedOut(l) })
	return l
}

// lendWait is how long a lend waits after its borrower's last request or
// its last answer: LendWait, and the time that answer may take to
// arrive (transferWait).
func (s *Sessions) lendWait() time.Duration { return s.opts.LendWait + s.transferWait() }

// answering notes that an answer of l (a part) is being written.
func (s *Sessions) answering(l *lend) {
	s.lmu.Lock()
	l.writing++
	s.lmu.Unlock()
}

// answered notes that the answer of client's lend id is written: the
// lend's wait starts again.
func (s *Sessions) answered(client string, id uint64) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if l := s.lends[client]; l != nil && l.id == id && l.writing > 0 {
		l.writing--
		l.last = time.Now()
	}
}

// active returns the lend of client numbered id to from, and notes the
// request; nil when it is settled (or not from's).
func (s *Sessions) active(client string, id uint64, from string) *lend {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	l := s.lends[client]
	if l == nil || l.id != id || l.to != from {
		return nil
	}
	l.last = time.Now()
	return l
}

// settle removes l from the open lends; false when it was settled already.
func (s *Sessions) settle(l *lend) bool {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.lends[l.client] != l {
		return false
	}
	delete(s.lends, l.client)
	l.timer.Stop()
	return true
}

// lendTimedOut gives l back unless its borrower asked, or an answer was
// written to it, within lendWait, or an answer is being written.
func (s *Sessions) lendTimedOut(l *lend) {
	s.lmu.Lock()
	left := s.lendWait() - time.Since(l.last)
	if l.writing > 0 {
		left = max(left, s.lendWait())
	}
	if s.lends[l.client] == l && left > 0 {
		l.timer.Reset(left)
		s.lmu.Unlock()
		return
	}
	s.lmu.Unlock()
	s.giveBack(l, fmt.Sprintf("%s did not confirm it within %v", l.to, s.lendWait()), true)
}

// giveBack takes l's session back; with again, a session lent to a
// claiming node is handed over to it once more.
func (s *Sessions) giveBack(l *lend, why string, again bool) {
	if !s.settle(l) {
		return
	}
	s.takenBack.Add(1)
	if err := l.ls.Return(); err != nil {
		s.log.Error("a lent session could not be taken back", "client", l.client, "to", l.to, "err", err)
		return
	}
	s.log.Warn("a lent session is back on this node", "client", l.client, "to", l.to, "why", why)
	if again && l.claim {
		go s.returnSession(l.client, l.to, 0)
	}
}

// takeBack takes client's lent session back, if this node lent it.
func (s *Sessions) takeBack(client, why string) {
	s.lmu.Lock()
	l := s.lends[client]
	s.lmu.Unlock()
	if l != nil {
		s.giveBack(l, why, false)
	}
}

// dropLend ends client's lent session here, if this node lent it: the
// session ended (a clean start).
func (s *Sessions) dropLend(client string) {
	s.lmu.Lock()
	l := s.lends[client]
	s.lmu.Unlock()
	if l != nil && s.settle(l) {
		l.ls.Release()
	}
}

// part is l's session from entry off (its in-flight entries, then the
// queued ones), bounded by PartBytes and PartEntries; the first part
// carries the subscriptions, the expiry, the inbound QoS 2 identifiers
// and the records of what the client acknowledged lately.
func (s *Sessions) part(l *lend, off int) sessionReply {
	st := l.ls.State()
	w := &wireState{Client: st.ClientID}
	if off == 0 {
		w.Expiry, w.Subs, w.InboundQoS2 = st.Expiry, st.Subscriptions, st.InboundQoS2
		w.Delivered = toWireRecords(st.Delivered)
	}
	total := len(st.Inflight) + len(st.Queued)
	off = max(off, 0)
	bytes, i := 0, off
	for ; i < total && i-off < s.opts.PartEntries; i++ {
		list, e := &w.Queued, broker.EntryRecord{}
		if i < len(st.Inflight) {
			list, e = &w.Inflight, st.Inflight[i]
		} else {
			e = st.Queued[i-len(st.Inflight)]
		}
		msg := wire.AppendMessage(nil, e.Msg)
		if i > off && bytes+len(msg) > s.opts.PartBytes {
			break
		}
		bytes += len(msg)
		*list = append(*list, toWire(e, msg))
	}
	return sessionReply{Held: true, Lend: l.id, State: w, More: i < total}
}

// serveExport lends the client's session to the claiming node and answers
// its first part. First every peer flushes its stream to this node: a
// record a peer passed over for the claiming node before it knew its new
// subscriptions is then delivered here, and handed over, rather than
// arriving after the export and lost.
func (s *Sessions) serveExport(req *sessionReq) sessionReply {
	if _, held := s.opts.Broker.TakeOver(req.Client); !held {
		return sessionReply{}
	}
	s.flushAll()
	s.awaitOwnWrites()
	l := s.lendTo(req.Client, req.From, true)
	if l == nil {
		return sessionReply{}
	}
	s.answering(l) // until serve wrote it (answered)
	return s.part(l, 0)
}

// servePart answers the next part of a lent session.
func (s *Sessions) servePart(req *sessionReq) sessionReply {
	l := s.active(req.Client, req.Lend, req.From)
	if l == nil {
		return sessionReply{}
	}
	s.answering(l)
	return s.part(l, req.Offset)
}

// serveDone settles a lent session: stored by its borrower, it is deleted
// here; not stored, it is taken back (and handed over again).
func (s *Sessions) serveDone(req *sessionReq) sessionReply {
	l := s.active(req.Client, req.Lend, req.From)
	if l == nil {
		return sessionReply{}
	}
	if !req.Stored {
		s.giveBack(l, req.From+" could not store it", true)
		return sessionReply{Held: true}
	}
	if !s.settle(l) {
		return sessionReply{}
	}
	l.ls.Release()
	s.forget(req.Client)
	st := l.ls.State()
	if l.claim {
		s.exported.Add(1)
	} else {
		s.returned.Add(1)
		s.log.Info("handed a session over to the node that holds it now", "client", l.client, "to", l.to,
			"inflight", len(st.Inflight), "queued", len(st.Queued))
	}
	return sessionReply{Held: true}
}

// pull takes client's session lent by from, whose first part is r: each
// part imported (and stored) in order after the previous one, then the
// confirmation. It reports whether every part was stored here; when not,
// from keeps the session and hands it over again.
func (s *Sessions) pull(from, client string, r sessionReply) bool {
	id := r.Lend
	var after *broker.Message
	off, parts := 0, 0
	for {
		st, err := decodeState(r.State)
		if err == nil {
			after, err = s.opts.Broker.ImportSessionAfter(st, after)
		}
		if err != nil {
			s.log.Error("a session handed over could not be stored here: its holder keeps it and hands it over again",
				"client", client, "holder", from, "err", err)
			s.postWithin(claimWait, from, SessionsDonePath, sessionReq{Client: client, Lend: id}, nil)
			return false
		}
		off += len(st.Inflight) + len(st.Queued)
		parts++
		if !r.More {
			break
		}
		r = sessionReply{}
		err = s.postWithin(s.partWait(), from, SessionsPartPath, sessionReq{Client: client, Lend: id, Offset: off}, &r)
		if err == nil && !r.Held {
			err = errors.New("it no longer lends it")
		}
		if err != nil {
			s.log.Warn("session handover interrupted: the holder keeps the messages and hands them over again", "client", client,
				"holder", from, "taken", off, "err", err)
			return false
		}
	}
	var d sessionReply
	err := s.postWithin(claimWait, from, SessionsDonePath, sessionReq{Client: client, Lend: id, Stored: true}, &d)
	if err == nil && !d.Held {
		err = errors.New("it no longer lends it")
	}
	if err != nil {
		s.log.Warn("a session handed over is stored here, but its holder did not take the confirmation: it hands it over again (its messages come twice)",
			"client", client, "holder", from, "err", err)
	}
	s.imported.Add(1)
	s.log.Debug("session taken over", "client", client, "holder", from, "entries", off, "parts", parts)
	return true
}

// serveHandover takes a session a returning holder kept (it offers it:
// this node pulls it), when this node holds the client's session now;
// otherwise it answers not held, and the sender keeps it.
func (s *Sessions) serveHandover(req *sessionReq) (sessionReply, error) {
	if req.Client == "" || req.Lend == 0 {
		return sessionReply{}, errors.New("dataplane: a session handover names no client or lend")
	}
	if s.sinceOf(req.Client) == 0 && !s.holds(req.Client) {
		return sessionReply{}, nil
	}
	var r sessionReply
	if err := s.postWithin(s.partWait(), req.From, SessionsPartPath, sessionReq{Client: req.Client, Lend: req.Lend}, &r); err != nil || !r.Held {
		return sessionReply{}, nil
	}
	r.Lend = req.Lend
	if !s.pull(req.From, req.Client, r) {
		return sessionReply{}, nil
	}
	s.log.Info("session messages handed over by a returning node", "client", req.Client, "from", req.From)
	return sessionReply{Held: true}, nil
}

// returnSession hands client's session, which node holds now (a newer
// claim made while this node was away, or a handover that was not
// confirmed), over to it; on failure the session stays here and the next
// directory push tries again. newer is node's claim that asked for it (a
// directory push), 0 for a handover that was not confirmed.
func (s *Sessions) returnSession(client, node string, newer int64) {
	if s.outdated(client, newer) {
		return
	}
	l := s.lendTo(client, node, false)
	if l == nil {
		return
	}
	if s.outdated(client, newer) {
		// Claimed here between the check and the lend, before the
		// claim's takeBack could see the lend.
		s.giveBack(l, "the client connected here again", false)
		return
	}
	var r sessionReply
	err := s.postWithin(returnWait, node, SessionsHandoverPath, sessionReq{Client: client, Lend: l.id}, &r)
	if err == nil && r.Held {
		return // it confirmed (serveDone) before it answered
	}
	s.returnFailed.Add(1)
	if err == nil {
		err = errors.New("it does not hold the session")
		s.giveBack(l, "its new holder does not take it", false)
	} // else: it may still be pulling; without its next request the lend ends by itself
	s.p.warn("return-"+client, "a session stays on this node: its new holder did not take it", fmt.Errorf("%s to %s: %w", client, node, err))
}

// outdated reports whether a return of client's session asked for by a
// claim made at newer no longer holds: the client is being claimed here
// (the push that asked for it was made before this claim, which is newer:
// the claim takes the rest), or was claimed here since (a claim that
// ended after the push arrived, before its returns ran: they run one
// after the other, each up to returnWait, and the goroutine may simply
// be scheduled late; lending the session then took it, connected, from
// under its client, and what was delivered to it meanwhile went to
// nobody).
func (s *Sessions) outdated(client string, newer int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claiming[client] > 0 || (newer != 0 && s.since[client] >= newer)
}
