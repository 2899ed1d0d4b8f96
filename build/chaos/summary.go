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
		if t.violations() > 0 && groups[k][0].known != "" {
			name += " (known, expected to fail)"
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
	return dur(s[len(s)/2]) + " / " + dur(worst)
}
