package schedule

import "time"

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
