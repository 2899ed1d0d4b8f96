package dataplane

import (
	"cmp"
	"slices"
	"time"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/cluster/wire"
)

// Redelivery from the partition copies: when a client's session is taken
// from the directory because its holder is down, what that holder had
// queued for it (and what it would have queued since it went down) is
// still in the partition copies of the QoS 1/2 messages. The claiming
// node queues, from the copies it holds, every record that entered the
// cluster since the session went offline (or, for a session that was
// connected when its holder went down, since this node last heard from
// that holder, less copyRedeliverMargin) and that the session's
// subscriptions match. At least once: some of them the client may have
// had, and the holder hands its own queue over when it returns.

// copyRedeliverMargin is how far before the last sign of life of a holder
// that went down while its client was connected the redelivery starts:
// what the client may not have acknowledged by then.
const copyRedeliverMargin = 10 * time.Second

// clockSkew widens the redelivery window for clocks a little apart: a
// record's time is its origin's clock.
const clockSkew = time.Second

// redeliverFromCopies queues for client, from this node's partition
// copies, the records since the session went offline that its
// subscriptions match, in the order they entered the cluster; it returns
// how many.
func (s *Sessions) redeliverFromCopies(client string, e dirEntry, heard time.Time) int {
	if s.p.copies == nil {
		return 0
	}
	from := e.DisconnectedAt - int64(clockSkew)
	if e.Connected || e.DisconnectedAt == 0 {
		from = heard.Add(-copyRedeliverMargin).UnixNano()
	}
	var subs topic.Tree[int]
	n := 0
	for i, r := range e.Subs {
		if _, _, shared, err := topic.ParseShared(r.Filter); err != nil || shared {
			continue // a group's messages went to one of its members, maybe another
		}
		subs.Subscribe(topic.Entry[int]{Client: i, Filter: r.Filter, Options: r.Options, SubID: r.SubID})
		n++
	}
	if n == 0 {
		return 0
	}
	var recs []copyRec
	seen := map[copyID]bool{}
	for part := range s.p.copies.counts() {
		s.p.copies.records(part, 0, func(_ uint64, r copyRec) bool {
			if r.at >= from && !seen[r.id] {
				seen[r.id] = true
				recs = append(recs, r)
			}
			return true
		})
	}
	// A publisher's records are in one partition, in order, with rising
	// times: a stable sort by time keeps each publisher's order.
	slices.SortStableFunc(recs, func(a, b copyRec) int { return cmp.Compare(a.at, b.at) })
	st := &broker.SessionState{ClientID: client, Expiry: e.Expiry}
	var buf []*topic.Entry[int]
	for _, r := range recs {
		d, err := wire.DecodeMessage(r.msg)
		if err != nil || d.StoreOnly || d.Msg.QoS == 0 {
			continue
		}
		m := d.Msg
		// Named as its copies name it: the holder's queue, handed over
		// when it returns, holds the same message under the same name
		// (its origin's record), and the copy queued here is dropped
		// then if the client has not had it yet.
		m.Record = broker.PeerRecord{Node: r.id.origin, Boot: r.id.boot, Seq: r.id.seq}
		buf = subs.Match(m.Topic, buf[:0], nil)
		var qos byte
		var ids []uint32
		retain := false
		for _, en := range buf {
			if en.Options.NoLocal && m.ClientID == client {
				continue
			}
			qos = max(qos, min(m.QoS, en.Options.QoS))
			if en.SubID != 0 {
				ids = append(ids, en.SubID)
			}
			retain = retain || (m.Retain && en.Options.RetainAsPublished)
		}
		if qos == 0 {
			continue
		}
		st.Queued = append(st.Queued, broker.EntryRecord{Msg: m, QoS: qos, Retain: retain, SubIDs: ids})
	}
	if len(st.Queued) == 0 {
		return 0
	}
	if err := s.opts.Broker.ImportSession(st); err != nil {
		s.log.Warn("redelivery from the partition copies failed", "client", client, "err", err)
		return 0
	}
	return len(st.Queued)
}
