package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// summary folds the rows of every pass into one line per cluster size and
// fault: counts added up, recovery times as the median and the worst.
func summary(rows []row) string {
	type key struct {
		nodes int
		fault string
	}
	var order []key
	groups := map[key][]row{}
	for _, r := range rows {
		if r.skipped != "" {
			continue
		}
		k := key{r.nodes, r.fault}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| nodes | fault | runs | acknowledged | refused | delivered | lost | duplicates | QoS 2 twice (resent) | order | refused, delivered | longest publish outage (median / worst) | subscribers caught up (median / worst) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		var t row
		var outs, caught []time.Duration
		failed := 0
		for _, r := range groups[k] {
			t.acked += r.acked
			t.refused += r.refused
			t.delivered += r.delivered
			t.lost += r.lost
			t.dups += r.dups
			t.qos2Dup += r.qos2Dup
			t.qos2Resnt += r.qos2Resnt
			t.order += r.order
			t.refusedIn += r.refusedIn
			outs = append(outs, r.pubRecov)
			caught = append(caught, r.caughtUp)
			if r.err != "" {
				failed++
			}
		}
		name := k.fault
		t.knownKinds = groups[k][0].knownKinds
		if _, known := t.split(); known > 0 {
			name += " (known issue)"
		}
		if failed > 0 {
			name += fmt.Sprintf(" (%d did not recover)", failed)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %d | %d | %d | %d | %d (%d) | %d | %d | %s | %s |\n", k.nodes, name, len(groups[k]),
			t.acked, t.refused, t.delivered, t.lost, t.dups, t.qos2Dup, t.qos2Resnt, t.order, t.refusedIn, spread(outs), spread(caught))
	}
	return b.String()
}

// spread is "median / worst" of ds; a -1 (never recovered) is the worst.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	worst := s[len(s)-1]
	if s[0] < 0 {
		worst = s[0]
	}
	return dur(s[(len(s)-1)/2]) + " / " + dur(worst) // the lower median of an even count
}

// lostBreakdown groups the acknowledged messages a subscriber never got
// by subscriber, publisher (with its partition) and the node that
// acknowledged them: the reproduction a report needs.
func lostBreakdown(h *history, subs []string, partitions int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	type key struct {
		sub, on string
		pub     int
	}
	type span struct {
		n          int
		lo, hi     int
		first, end time.Time
	}
	spans := map[key]*span{}
	for _, sub := range subs {
		got := map[msgID]bool{}
		for _, d := range h.recv[sub] {
			got[d.id] = true
		}
		for id, s := range h.sent {
			if !s.acked || got[id] {
				continue
			}
			k := key{sub, s.ackedOn, id.pub}
			sp := spans[k]
			if sp == nil {
				sp = &span{lo: id.seq, hi: id.seq, first: s.ackedAt, end: s.ackedAt}
				spans[k] = sp
			}
			sp.n++
			sp.lo, sp.hi = min(sp.lo, id.seq), max(sp.hi, id.seq)
			if s.ackedAt.Before(sp.first) {
				sp.first = s.ackedAt
			}
			if s.ackedAt.After(sp.end) {
				sp.end = s.ackedAt
			}
		}
	}
	var out []string
	for k, sp := range spans {
		part := ""
		if partitions > 0 {
			part = fmt.Sprintf(" (partition %d)", partitionOf(k.pub, partitions))
		}
		out = append(out, fmt.Sprintf("%s never got %d messages of chaos-pub-%d%s, sequences %d..%d, acknowledged by %s between %s and %s",
			k.sub, sp.n, k.pub, part, sp.lo, sp.hi, k.on, sp.first.Format("15:04:05.000"), sp.end.Format("15:04:05.000")))
	}
	slices.Sort(out)
	return out
}
