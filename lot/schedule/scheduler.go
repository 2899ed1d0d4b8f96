package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Clock is the time source of a Scheduler. Tests use clocktest.Clock, which
// moves only when told to.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started and reports whether it
	// did so.
	Stop() bool
}

// RealClock is the system clock.
var RealClock Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ErrStopped is returned by Set after Stop.
var ErrStopped = errors.New("schedule: scheduler stopped")

// Options configure a Scheduler. The zero value of a field means its default.
type Options struct {
	// Clock is the time source (default RealClock).
	Clock Clock
	// Location is the zone of wall-clock schedules (Weekly, Daily, Once,
	// EveryMonths); default time.Local, the node's local time.
	Location *time.Location
	// MinInterval is the shortest Every interval accepted (default 10 ms).
	MinInterval time.Duration
	// MaxSleep bounds one wait of a wall-clock schedule, which then checks
	// the clock again: a clock set forward or back (NTP, a manual change)
	// moves the next run by at most this much (default 1 minute).
	MaxSleep time.Duration
	// Logger receives panics of callbacks; nil discards.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Clock == nil {
		out.Clock = RealClock
	}
	if out.Location == nil {
		out.Location = time.Local
	}
	if out.MinInterval == 0 {
		out.MinInterval = 10 * time.Millisecond
	}
	if out.MaxSleep == 0 {
		out.MaxSleep = time.Minute
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.MinInterval < 0 {
		return fmt.Errorf("schedule: Options.MinInterval = %v, want 0 (default) or more", o.MinInterval)
	}
	if o.MaxSleep < 0 {
		return fmt.Errorf("schedule: Options.MaxSleep = %v, want 0 (default) or more", o.MaxSleep)
	}
	return nil
}

// Func is a timer callback. ctx is cancelled when the timer is removed or
// the scheduler stops.
type Func func(ctx context.Context, t Tick)

// Tick describes one run.
type Tick struct {
	Key string
	Due time.Time // when the run was due
	// Missed is the number of due times skipped because the run came late
	// (the process was suspended, the clock jumped): they are not made up.
	Missed int
}

// Stats are the counters of one timer.
type Stats struct {
	Spec    Spec
	Next    time.Time // zero when the timer will not fire again
	Runs    int64     // callbacks completed
	Skipped int64     // due times skipped because the previous run was still going
	Missed  int64     // due times passed while late (see Tick.Missed)
	Panics  int64     // callbacks that panicked
	Running bool
}

// Scheduler runs callbacks at the times of their Spec, one timer per key
// (an action name). See the package documentation for its guarantees.
type Scheduler struct {
	opts Options
	wg   sync.WaitGroup // armed timers and running callbacks

	mu      sync.Mutex // guards everything below and every entry's fields
	entries map[string]*entry
	running map[string]bool // keys whose callback is running, across Remove and Set
	stopped bool
}

type entry struct {
	key    string
	spec   Spec
	fn     Func
	anchor time.Time // when the spec was set: the phase of Every and EveryMonths
	due    time.Time // next due time; zero when none
	timer  Timer
	seq    uint64 // identifies the armed timer; a fire with another seq is stale
	ctx    context.Context
	cancel context.CancelFunc
	stats  Stats
}

// New returns a running scheduler; opts may be nil for the defaults.
func New(opts *Options) (*Scheduler, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{opts: o, entries: map[string]*entry{}, running: map[string]bool{}}, nil
}

// Set installs or replaces the timer of key. When key already has a timer
// with an equal spec, only fn is replaced and the timer keeps its phase
// (a redeployed action keeps ticking on the same beat); otherwise the timer
// restarts from now. A run in progress is not interrupted.
func (s *Scheduler) Set(key string, spec Spec, fn Func) error {
	if err := spec.validate(s.opts.MinInterval); err != nil {
		return fmt.Errorf("timer %q: %w", key, err)
	}
	if fn == nil {
		return fmt.Errorf("schedule: timer %q: nil callback", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	e := s.entries[key]
	if e != nil && e.spec == spec {
		e.fn = fn
		return nil
	}
	if e == nil {
		e = &entry{key: key}
		e.ctx, e.cancel = context.WithCancel(context.Background())
		s.entries[key] = e
	}
	s.disarm(e)
	now := s.opts.Clock.Now()
	e.spec, e.fn, e.anchor = spec, fn, now
	e.stats = Stats{}
	e.due = time.Time{}
	if due, ok := spec.next(now, now, s.opts.Location); ok {
		e.due = due
		s.arm(e, now)
	}
	return nil
}

// Remove cancels the timer of key and reports whether there was one. A run
// in progress sees its context cancelled and is not waited for.
func (s *Scheduler) Remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return false
	}
	delete(s.entries, key)
	s.disarm(e)
	e.cancel()
	return true
}

// Stop cancels every timer and waits for running callbacks to return. Set
// fails afterwards; Stop may be called more than once.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.stopped = true
	for k, e := range s.entries {
		s.disarm(e)
		e.cancel()
		delete(s.entries, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Stats returns the counters of key's timer.
func (s *Scheduler) Stats(key string) (Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return Stats{}, false
	}
	st := e.stats
	st.Spec, st.Next, st.Running = e.spec, e.due, s.running[key]
	return st, true
}

// Keys returns the keys with a timer, in no particular order.
func (s *Scheduler) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.entries))
	for k := range s.entries {
		out = append(out, k)
	}
	return out
}

// arm starts e's timer towards e.due; s.mu is held.
func (s *Scheduler) arm(e *entry, now time.Time) {
	d := e.due.Sub(now)
	if e.spec.kind != kindEvery && d > s.opts.MaxSleep {
		d = s.opts.MaxSleep
	}
	e.seq++
	seq := e.seq
	s.wg.Add(1)
	e.timer = s.opts.Clock.AfterFunc(max(d, 0), func() { s.fire(e, seq) })
}

// disarm stops e's timer; s.mu is held. A timer whose call has already
// started is left to notice, by its seq, that it is stale.
func (s *Scheduler) disarm(e *entry) {
	e.seq++
	if e.timer != nil && e.timer.Stop() {
		s.wg.Done()
	}
	e.timer = nil
}

// fire is a timer's call: it re-arms the timer for the next due time, then
// runs the callback unless the previous run is still going.
func (s *Scheduler) fire(e *entry, seq uint64) {
	defer s.wg.Done()
	s.mu.Lock()
	if s.stopped || e.seq != seq || s.entries[e.key] != e {
		s.mu.Unlock()
		return
	}
	now := s.opts.Clock.Now()
	if now.Before(e.due) { // woke early: a capped sleep, or the clock moved back
		s.arm(e, now)
		s.mu.Unlock()
		return
	}
	tick := Tick{Key: e.key, Due: e.due, Missed: s.missed(e, now)}
	e.stats.Missed += int64(tick.Missed)
	e.timer = nil
	if due, ok := e.spec.next(e.anchor, now, s.opts.Location); ok {
		e.due = due
		s.arm(e, now)
	} else {
		e.due = time.Time{}
	}
	if s.running[e.key] {
		e.stats.Skipped++
		s.mu.Unlock()
		return
	}
	s.running[e.key] = true
	fn, ctx := e.fn, e.ctx
	s.mu.Unlock()

	panicked := s.run(fn, ctx, tick)

	s.mu.Lock()
	delete(s.running, e.key)
	e.stats.Runs++
	if panicked {
		e.stats.Panics++
	}
	s.mu.Unlock()
}

// missed counts the due times after e.due up to now; s.mu is held.
func (s *Scheduler) missed(e *entry, now time.Time) int {
	if e.spec.kind == kindEvery {
		return int(now.Sub(e.due) / e.spec.every)
	}
	n := 0
	for t, ok := e.spec.next(e.anchor, e.due, s.opts.Location); ok && !t.After(now) && n < 1<<20; n++ {
		t, ok = e.spec.next(e.anchor, t, s.opts.Location)
	}
	return n
}

// run calls fn, turning a panic into a log line.
func (s *Scheduler) run(fn Func, ctx context.Context, t Tick) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			s.opts.Logger.Error("timer callback panicked", "component", "lot/schedule", "key", t.Key, "panic", r)
		}
	}()
	fn(ctx, t)
	return false
}
