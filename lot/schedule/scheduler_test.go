package schedule_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/lot/schedule"
	"gantry/lot/schedule/clocktest"
)

// t0 is a Monday.
var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

func newScheduler(t *testing.T) (*schedule.Scheduler, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(t0)
	s, err := schedule.New(&schedule.Options{Clock: clk, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, clk
}

// recorder records the due times of the ticks it receives.
type recorder struct {
	mu    sync.Mutex
	ticks []schedule.Tick
}

func (r *recorder) fn(_ context.Context, t schedule.Tick) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ticks = append(r.ticks, t)
}

func (r *recorder) dues() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range r.ticks {
		out = append(out, t.Due.Format("Mon 15:04:05"))
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("ticks at [%s], want [%s]", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

func TestEvery(t *testing.T) {
	s, clk := newScheduler(t)
	var r recorder
	if err := s.Set("A", schedule.Every(10*time.Second), r.fn); err != nil {
		t.Fatal(err)
	}
	clk.Advance(9 * time.Second)
	expect(t, r.dues())
	clk.Advance(26 * time.Second)
	expect(t, r.dues(), "Mon 08:00:10", "Mon 08:00:20", "Mon 08:00:30")
	st, _ := s.Stats("A")
	if st.Runs != 3 || st.Next != t0.Add(40*time.Second) {
		t.Fatalf("stats %+v", st)
	}
}

func TestRedeployKeepsPhase(t *testing.T) {
	s, clk := newScheduler(t)
	var old, renewed recorder
	every := schedule.Every(10 * time.Second)
	_ = s.Set("A", every, old.fn)
	clk.Advance(7 * time.Second)
	if err := s.Set("A", every, renewed.fn); err != nil { // same schedule, new code
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	expect(t, old.dues())
	expect(t, renewed.dues(), "Mon 08:00:10")

	var other recorder
	_ = s.Set("A", schedule.Every(5*time.Second), other.fn) // new schedule: restarts now
	clk.Advance(5 * time.Second)
	expect(t, other.dues(), "Mon 08:00:15")
}

func TestRemove(t *testing.T) {
	s, clk := newScheduler(t)
	var r recorder
	_ = s.Set("A", schedule.Every(time.Second), r.fn)
	clk.Advance(time.Second)
	if !s.Remove("A") || s.Remove("A") {
		t.Fatal("Remove did not report exactly one removal")
	}
	clk.Advance(time.Hour)
	expect(t, r.dues(), "Mon 08:00:01")
	if clk.Pending() != 0 || len(s.Keys()) != 0 {
		t.Fatalf("%d timers pending, keys %v", clk.Pending(), s.Keys())
	}
	if _, ok := s.Stats("A"); ok {
		t.Fatal("stats of a removed timer")
	}
}

// blocker is a callback that blocks until released.
type blocker struct {
	started chan struct{}
	release chan struct{}
	ctxErr  atomic.Value
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 10), release: make(chan struct{})}
}

func (b *blocker) fn(ctx context.Context, _ schedule.Tick) {
	b.started <- struct{}{}
	<-b.release
	if err := ctx.Err(); err != nil {
		b.ctxErr.Store(err)
	}
}

func TestOverrunSkipsTicks(t *testing.T) {
	s, clk := newScheduler(t)
	b := newBlocker()
	_ = s.Set("A", schedule.Every(10*time.Second), b.fn)
	done := make(chan struct{})
	go func() { clk.Advance(10 * time.Second); close(done) }() // the first run blocks this goroutine
	<-b.started
	clk.Advance(10 * time.Second)
	clk.Advance(10 * time.Second)
	st, _ := s.Stats("A")
	if st.Skipped != 2 || st.Runs != 0 || !st.Running {
		t.Fatalf("while overrunning: %+v", st)
	}
	close(b.release)
	<-done
	clk.Advance(10 * time.Second) // runs again once free
	<-b.started
	st, _ = s.Stats("A")
	if st.Skipped != 2 || st.Runs != 2 || st.Running {
		t.Fatalf("after the overrun: %+v", st)
	}
}

func TestNeverConcurrentAcrossRemoveAndSet(t *testing.T) {
	s, clk := newScheduler(t)
	b := newBlocker()
	_ = s.Set("A", schedule.Every(10*time.Second), b.fn)
	done := make(chan struct{})
	go func() { clk.Advance(10 * time.Second); close(done) }()
	<-b.started
	s.Remove("A")
	var r recorder
	_ = s.Set("A", schedule.Every(10*time.Second), r.fn)
	clk.Advance(10 * time.Second) // the old run of A still goes: skipped
	expect(t, r.dues())
	close(b.release)
	<-done
	if err, _ := b.ctxErr.Load().(error); !errors.Is(err, context.Canceled) {
		t.Fatalf("the removed timer's run saw ctx error %v, want Canceled", err)
	}
	clk.Advance(10 * time.Second)
	expect(t, r.dues(), "Mon 08:00:30")
}

func TestLateRunsAreNotMadeUp(t *testing.T) {
	s, clk := newScheduler(t)
	var r recorder
	_ = s.Set("A", schedule.Every(10*time.Second), r.fn)
	clk.Jump(45 * time.Second) // suspended past four due times
	clk.Advance(0)
	expect(t, r.dues(), "Mon 08:00:10")
	if r.ticks[0].Missed != 3 {
		t.Fatalf("Missed = %d, want 3", r.ticks[0].Missed)
	}
	st, _ := s.Stats("A")
	if st.Next != t0.Add(50*time.Second) || st.Missed != 3 {
		t.Fatalf("stats %+v, want next at +50s and 3 missed", st)
	}
}

func TestWeekly(t *testing.T) {
	s, clk := newScheduler(t)
	var weekday, weekend, monday recorder
	_ = s.Set("wd", schedule.Weekly(schedule.Weekday, schedule.At(7, 30, 0)), weekday.fn)
	_ = s.Set("we", schedule.Weekly(schedule.Weekend, schedule.At(9, 0, 0)), weekend.fn)
	_ = s.Set("mo", schedule.Weekly(schedule.Day(time.Monday), schedule.At(8, 0, 1)), monday.fn)
	clk.Advance(7 * 24 * time.Hour)
	expect(t, weekday.dues(), "Tue 07:30:00", "Wed 07:30:00", "Thu 07:30:00", "Fri 07:30:00", "Mon 07:30:00")
	expect(t, weekend.dues(), "Sat 09:00:00", "Sun 09:00:00")
	expect(t, monday.dues(), "Mon 08:00:01")
}

func TestWallClockJumps(t *testing.T) {
	s, clk := newScheduler(t)
	var r recorder
	_ = s.Set("d", schedule.Daily(schedule.At(12, 0, 0)), r.fn)
	clk.Jump(4*time.Hour + 30*time.Second) // clock set forward past noon
	clk.Advance(time.Minute)               // the capped sleep notices within MaxSleep
	expect(t, r.dues(), "Mon 12:00:00")
	clk.Set(t0.Add(2 * time.Hour)) // clock set back to 10:00: noon again today?
	clk.Advance(4 * time.Hour)
	expect(t, r.dues(), "Mon 12:00:00") // no: the next run is tomorrow's
	clk.Advance(24 * time.Hour)
	expect(t, r.dues(), "Mon 12:00:00", "Tue 12:00:00")
}

func TestOnce(t *testing.T) {
	s, clk := newScheduler(t)
	var r, past recorder
	_ = s.Set("once", schedule.Once(2026, time.March, 3, schedule.At(6, 0, 0)), r.fn)
	_ = s.Set("past", schedule.Once(2026, time.March, 1, schedule.At(6, 0, 0)), past.fn)
	if st, _ := s.Stats("past"); !st.Next.IsZero() {
		t.Fatalf("a past timestamp is due at %v", st.Next)
	}
	clk.Advance(72 * time.Hour)
	expect(t, r.dues(), "Tue 06:00:00")
	expect(t, past.dues())
	// Redeploying the same timestamp does not fire it again.
	_ = s.Set("once", schedule.Once(2026, time.March, 3, schedule.At(6, 0, 0)), r.fn)
	clk.Advance(72 * time.Hour)
	expect(t, r.dues(), "Tue 06:00:00")
}

func TestEveryMonthsClampsToMonthEnd(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC))
	s, _ := schedule.New(&schedule.Options{Clock: clk, Location: time.UTC})
	defer s.Stop()
	var r recorder
	_ = s.Set("m", schedule.EveryMonths(1), r.fn)
	clk.Advance(100 * 24 * time.Hour)
	var got []string
	for _, tk := range r.ticks {
		got = append(got, tk.Due.Format("2006-01-02 15:04"))
	}
	expect(t, got, "2026-02-28 10:00", "2026-03-31 10:00", "2026-04-30 10:00")
}

func TestPanicIsContained(t *testing.T) {
	s, clk := newScheduler(t)
	n := 0
	_ = s.Set("p", schedule.Every(time.Second), func(context.Context, schedule.Tick) {
		n++
		panic("boom")
	})
	clk.Advance(3 * time.Second)
	st, _ := s.Stats("p")
	if n != 3 || st.Panics != 3 || st.Runs != 3 || st.Running {
		t.Fatalf("after panics: n=%d %+v", n, st)
	}
}

func TestSetErrors(t *testing.T) {
	s, _ := newScheduler(t)
	noop := func(context.Context, schedule.Tick) {}
	tests := []struct {
		name string
		spec schedule.Spec
		fn   schedule.Func
		want string
	}{
		{"too short", schedule.Every(time.Millisecond), noop, `timer "k": schedule: interval 1ms is shorter than the minimum 10ms`},
		{"empty", schedule.Spec{}, noop, "empty schedule"},
		{"no days", schedule.Weekly(0, 0), noop, "no day"},
		{"bad date", schedule.Once(2026, time.February, 30, 0), noop, "not a valid date"},
		{"nil fn", schedule.Every(time.Second), nil, "nil callback"},
	}
	for _, tc := range tests {
		if err := s.Set("k", tc.spec, tc.fn); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Set error = %v, want %q", tc.name, err, tc.want)
		}
	}
	s.Stop()
	if err := s.Set("k", schedule.Every(time.Second), noop); !errors.Is(err, schedule.ErrStopped) {
		t.Errorf("Set after Stop = %v", err)
	}
	if _, err := schedule.New(&schedule.Options{MinInterval: -1}); err == nil {
		t.Error("negative MinInterval accepted")
	}
}

// TestRealClockStopLeavesNoGoroutine runs timers on the real clock, stops
// the scheduler while callbacks run and checks that every goroutine ends.
func TestRealClockStopLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := schedule.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	for _, k := range []string{"a", "b", "c"} {
		_ = s.Set(k, schedule.Every(10*time.Millisecond), func(ctx context.Context, _ schedule.Tick) {
			runs.Add(1)
			select { // a callback that takes a while, and honours ctx
			case <-ctx.Done():
			case <-time.After(15 * time.Millisecond):
			}
		})
	}
	eventually(t, 5*time.Second, func() error {
		if runs.Load() < 6 {
			return errors.New("timers have not run yet")
		}
		return nil
	})
	s.Stop()
	n := runs.Load()
	eventually(t, 5*time.Second, func() error {
		if g := runtime.NumGoroutine(); g > before {
			return errors.New("goroutines still running after Stop")
		}
		return nil
	})
	if runs.Load() != n {
		t.Fatal("a callback ran after Stop returned")
	}
}

// eventually polls cond until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}
