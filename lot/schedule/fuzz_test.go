package schedule_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"gantry/lot/schedule"
	"gantry/lot/schedule/clocktest"
)

// FuzzParse feeds the trigger parsers arbitrary text: they must not panic,
// and whatever they accept must schedule: Set succeeds and, for wall-clock
// specs, the next run is within a week. The committed corpus is under
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"07:30", "23:59:59", "24-12-2026 18:00:00", "2026-12-24T18:00", "MONDAY", "weekends", "1.5 MONTHS"} {
		f.Add(s, 10.0)
	}
	f.Fuzz(func(t *testing.T, text string, n float64) {
		word, rest, _ := strings.Cut(text, " ")
		var specs []schedule.Spec
		if s, err := schedule.ParseTimestamp(text); err == nil {
			specs = append(specs, s)
		}
		if s, err := schedule.ParseWeekly(word, rest); err == nil {
			specs = append(specs, s)
		}
		if s, err := schedule.ParseEvery(n, word); err == nil {
			if !(n > 0) || math.IsInf(n, 0) {
				t.Fatalf("ParseEvery(%v, %q) accepted a non-positive number", n, word)
			}
			if s.String() != "every 0s" { // sub-nanosecond intervals round to 0 and Set refuses them
				specs = append(specs, s)
			}
		}
		for _, s := range specs {
			checkSchedules(t, s)
		}
	})
}

func checkSchedules(t *testing.T, s schedule.Spec) {
	t.Helper()
	clk := clocktest.New(t0)
	sch, err := schedule.New(&schedule.Options{Clock: clk, Location: time.UTC, MinInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sch.Stop()
	if err := sch.Set("k", s, func(context.Context, schedule.Tick) {}); err != nil {
		t.Fatalf("Set(%v) after a successful parse: %v", s, err)
	}
	st, _ := sch.Stats("k")
	if strings.Contains(s.String(), " at ") && !strings.HasPrefix(s.String(), "once") && st.Next.Sub(t0) > 8*24*time.Hour {
		t.Fatalf("%v: next run %v, more than a week away", s, st.Next)
	}
}
