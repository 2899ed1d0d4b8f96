package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// phase is one fault's window of the history: messages first sent in
// [start, end) count toward it.
type phase struct {
	nodes      int
	fault      string
	target     string
	start, end time.Time
	at, healed time.Time // the fault, and its end (restart, SIGCONT, heal)
	err        string    // the fault could not be injected or the cluster did not recover
	known      string    // a violation expected under this fault on today's main
	knownKinds []string  // which checks known covers: "qos2Dup", "order", "refusedIn" (never "lost")
	skipped    string    // why it did not run
}

// row is one line of the table: a phase checked against the history.
type row struct {
	phase
	acked     int           // messages acknowledged with success
	refused   int           // refusals (reason code ≥ 0x80) received
	delivered int           // (subscriber, acknowledged message) pairs received
	lost      int           // (subscriber, acknowledged message) pairs missing: must be 0
	dups      int           // deliveries beyond the first, of any message
	qos2Dup   int           // one PUBLISH at QoS 2 delivered twice on one subscriber connection: must be 0
	qos2Resnt int           // QoS 2 delivered again from the publisher's resend on a new connection
	order     int           // order inversions not across a failover: must be 0
	refusedIn int           // deliveries of a PUBLISH that was refused (≥ 0x80): must be 0
	pubRecov  time.Duration // the longest a publisher went without an acknowledgement across the fault
	caughtUp  time.Duration // fault → every subscriber had every message acknowledged during the fault
	examples  []string      // a few of the violations, for the report
}

func (r *row) violations() int { return r.lost + r.qos2Dup + r.order + r.refusedIn }

// split divides the violations into those the fault's known issue covers
// and the others. A lost message is never known.
func (r *row) split() (bad, known int) {
	kinds := map[string]int{"qos2Dup": r.qos2Dup, "order": r.order, "refusedIn": r.refusedIn}
	bad = r.lost
	for kind, n := range kinds {
		if slices.Contains(r.knownKinds, kind) {
			known += n
		} else {
			bad += n
		}
	}
	return bad, known
}

func (r *row) note(format string, args ...any) {
	if len(r.examples) < 5 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

// check computes one row per phase from h; subs are the subscribers
// (subscribed throughout: persistent sessions, never unsubscribed).
func check(h *history, phases []phase, subs []string) []row {
	h.mu.Lock()
	defer h.mu.Unlock()
	rows := make([]row, len(phases))
	for i, p := range phases {
		rows[i].phase = p
	}
	at := func(t time.Time) *row {
		for i := range rows {
			if !t.Before(rows[i].start) && t.Before(rows[i].end) {
				return &rows[i]
			}
		}
		return nil
	}
	for _, s := range h.sent {
		if r := at(s.first); r != nil {
			for _, n := range s.refusals {
				r.refused += n
			}
			if s.acked {
				r.acked++
			}
		}
	}
	for _, sub := range subs {
		checkSubscriber(h, sub, at)
	}
	for i := range rows {
		rows[i].pubRecov, rows[i].caughtUp = recovery(h, rows[i].phase, subs)
	}
	return rows
}

// checkSubscriber adds one subscriber's losses, duplicates and order
// inversions to the rows.
func checkSubscriber(h *history, sub string, at func(time.Time) *row) {
	seen := map[msgID][]delivery{}
	maxSeen := map[int]delivery{} // publisher → delivery of its highest sequence so far
	for _, d := range h.recv[sub] {
		s := h.sent[d.id]
		if s == nil {
			continue // not sent by this run's publishers (a stale session's queue)
		}
		r := at(s.first)
		if r != nil && d.attempt < len(s.attempts) && s.attempts[d.attempt].refused != 0 {
			r.refusedIn++
			r.note("%s got %v from its attempt %d, which %s refused with 0x%02x", sub, d.id, d.attempt,
				s.attempts[d.attempt].node, s.attempts[d.attempt].refused)
		}
		if prev := seen[d.id]; len(prev) > 0 {
			if r != nil {
				r.dups++
				if s.qos == 2 && !restartedBetween(h.restarts[sub], s.first, d.at) {
					r.qos2Twice(sub, d, prev, s)
				}
			}
			seen[d.id] = append(prev, d)
			continue
		}
		seen[d.id] = []delivery{d}
		top, ok := maxSeen[d.id.pub]
		if ok && d.id.seq < top.id.seq {
			if r != nil && !acrossFailover(h, d.id, top.id.seq) && top.conn == d.conn {
				r.order++
				r.note("%s got %v after %v (publisher on %s throughout, one connection)", sub, d.id, top.id, s.attempts[0].node)
			}
			continue
		}
		maxSeen[d.id.pub] = d
	}
	for id, s := range h.sent {
		r := at(s.first)
		if r == nil {
			continue
		}
		if !s.acked {
			continue
		}
		if len(seen[id]) > 0 {
			r.delivered++
		} else {
			r.lost++
			r.note("%s never got %v (QoS %d, acknowledged by %s at %s)", sub, id, s.qos, s.ackedOn, s.ackedAt.Format("15:04:05.000"))
		}
	}
}

// restartedBetween: the subscriber's node was started again (it failed
// over) between from and to, so a QoS 2 message may reach it twice.
func restartedBetween(restarts []time.Time, from, to time.Time) bool {
	for _, t := range restarts {
		if t.After(from) && t.Before(to) {
			return true
		}
	}
	return false
}

// qos2Twice classifies a QoS 2 message delivered again (d) after prev: the
// same PUBLISH again on one subscriber connection is a broker duplicate;
// another attempt of it (the publisher resent it on a new connection after
// a lost one) is a new message to MQTT; after a reconnect of the
// subscriber, redelivery is allowed.
func (r *row) qos2Twice(sub string, d delivery, prev []delivery, s *sent) {
	for _, p := range prev {
		if p.conn != d.conn {
			continue
		}
		if p.attempt == d.attempt {
			r.qos2Dup++
			r.note("%s got QoS 2 %v attempt %d (sent to %s) twice on one connection", sub, d.id, d.attempt, s.attempts[min(d.attempt, len(s.attempts)-1)].node)
		} else {
			r.qos2Resnt++
		}
		return
	}
}

// acrossFailover: the publisher sent the messages from..to on more than
// one node (it moved after a lost connection or refusals).
func acrossFailover(h *history, from msgID, to int) bool {
	var node string
	for seq := from.seq; seq <= to; seq++ {
		s := h.sent[msgID{from.pub, seq}]
		if s == nil {
			continue
		}
		for _, a := range s.attempts {
			if node == "" {
				node = a.node
			} else if a.node != node {
				return true
			}
		}
	}
	return false
}

// recovery: the longest time any publisher went without an
// acknowledgement across the fault (from its last acknowledgement before
// the fault, or the fault, to its first one after: its outage; -1 when a
// publisher had none after the fault within the phase), and the time from
// the fault until every subscriber held every message acknowledged between
// the fault and the end of the worst outage (its own node's restart
// included).
func recovery(h *history, p phase, subs []string) (pub, caught time.Duration) {
	if p.at.IsZero() {
		return 0, 0
	}
	acks := map[int][]time.Time{}
	for id, s := range h.sent {
		if _, ok := acks[id.pub]; !ok {
			acks[id.pub] = nil
		}
		if s.acked && s.ackedAt.Before(p.end) {
			acks[id.pub] = append(acks[id.pub], s.ackedAt)
		}
	}
	for _, times := range acks {
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		prev, after := p.at, false
		for _, t := range times {
			if !t.After(p.at) {
				prev = t
				continue
			}
			after = true
			pub = max(pub, t.Sub(prev))
			prev = t
		}
		if !after {
			pub = -1
			break
		}
	}
	until := p.healed
	if pub > 0 && p.at.Add(pub).After(until) {
		until = p.at.Add(pub)
	}
	for _, sub := range subs {
		firstAt := map[msgID]time.Time{}
		for _, d := range h.recv[sub] {
			if _, ok := firstAt[d.id]; !ok {
				firstAt[d.id] = d.at
			}
		}
		for id, s := range h.sent {
			if s.acked && !s.ackedAt.Before(p.at) && !s.ackedAt.After(until) {
				if t, ok := firstAt[id]; ok {
					caught = max(caught, t.Sub(p.at))
				}
			}
		}
	}
	return pub, caught
}

// table renders the rows.
func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| nodes | fault | target | acknowledged | refused | delivered | lost | duplicates | QoS 2 twice (resent) | order | refused, delivered | longest publish outage | subscribers caught up |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(&b, "| %d | %s | — | skipped: %s ||||||||||\n", r.nodes, r.fault, r.skipped)
			continue
		}
		target := r.target
		if _, known := r.split(); known > 0 {
			target += " (known issue)"
		}
		if r.err != "" {
			target += " (" + r.err + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %d | %s | %s |\n", r.nodes, r.fault, target,
			r.acked, r.refused, r.delivered, r.lost, r.dups, r.qos2Dup, r.qos2Resnt, r.order, r.refusedIn, dur(r.pubRecov), dur(r.caughtUp))
	}
	return b.String()
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "not within the phase"
	case d == 0:
		return "—"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// examples lists the violations the rows noted.
func examples(rows []row) []string {
	var out []string
	for _, r := range rows {
		for _, e := range r.examples {
			out = append(out, fmt.Sprintf("%d nodes, %s: %s", r.nodes, r.fault, e))
		}
	}
	return slices.Clip(out)
}
