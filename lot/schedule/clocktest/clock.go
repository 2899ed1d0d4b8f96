// Package clocktest provides a manual clock for tests of code that takes a
// schedule.Clock: time moves only when the test calls Advance or Set, and
// the timers due on the way fire in order, so tests are instant and
// deterministic.
//
// Timer callbacks run synchronously on the goroutine that calls Advance or
// Set, one after the other, with Now returning each timer's due time while
// it runs. The clock's lock is not held during a callback, so a callback may
// use the clock (arm another timer), and a test may call Advance from
// several goroutines (for instance while a callback is blocked). All methods
// are safe for concurrent use.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"gantry/lot/schedule"
)

// Clock is a manual schedule.Clock.
type Clock struct {
	mu     sync.Mutex // guards now, timers and seq
	now    time.Time
	timers []*timer // pending, unsorted
	seq    uint64   // creation order, to fire timers due at the same time in order
}

type timer struct {
	c    *Clock
	due  time.Time
	seq  uint64
	f    func()
	done bool // fired or stopped
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms f to run when the clock reaches Now()+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) schedule.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, due: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop implements schedule.Timer.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.c.remove(t)
	return true
}

func (c *Clock) remove(t *timer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock forward by d, firing the timers due on the way.
// When another goroutine moved the clock further meanwhile (Advance calls
// running concurrently), the clock is not moved back.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.forward(target)
}

// Set moves the clock to t. Forward, it fires the timers due up to t in
// order of due time; backward (a clock set back), it fires nothing.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.now = t
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.forward(t)
}

func (c *Clock) forward(t time.Time) {
	for {
		c.mu.Lock()
		next := c.earliest()
		if next == nil || next.due.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next.done = true
		c.remove(next)
		if next.due.After(c.now) {
			c.now = next.due
		}
		c.mu.Unlock()
		next.f()
	}
}

// Jump moves the clock forward by d without firing anything, as when a
// process is suspended or the system clock is set forward: the timers due
// meanwhile fire late, on the next Advance or Set, and see Now past their
// due time.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *Clock) earliest() *timer {
	if len(c.timers) == 0 {
		return nil
	}
	sort.Slice(c.timers, func(i, j int) bool {
		a, b := c.timers[i], c.timers[j]
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		return a.seq < b.seq
	})
	return c.timers[0]
}

// Pending returns the number of armed timers.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns the due time of the earliest armed timer.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.earliest(); t != nil {
		return t.due, true
	}
	return time.Time{}, false
}
