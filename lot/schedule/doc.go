// Package schedule runs LoT's timer triggers: ON EVERY n UNIT,
// ON EVERY <day> AT "HH:mm[:ss]" and ON TIMESTAMP (LOT.md §4.2).
//
// A Spec says when a timer fires:
//
//   - Every(d): every d after the timer is set (ParseEvery: MILLISECONDS to
//     WEEKS, fractions allowed), on the monotonic clock, so a wall-clock
//     change does not move it;
//   - EveryMonths(n): every n calendar months after it is set (MONTHS,
//     YEARS), at the same local time, clamped to the month's last day;
//   - Weekly(days, at): on MONDAY..SUNDAY, WEEKDAY (Monday to Friday),
//     WEEKEND or DAY, at a local wall-clock time (ParseWeekly);
//   - Daily(at): ON TIMESTAMP "HH:mm:ss", every day at that local time;
//   - Once(date, at): ON TIMESTAMP "dd-MM-yyyy HH:mm:ss", once; a time
//     already past when the timer is set never fires.
//
// Wall-clock times are in Options.Location, the node's local time by
// default. Across a daylight-saving change a time that does not exist
// (02:30 when clocks go forward) runs at the corresponding later time, and
// a time that exists twice runs once.
//
// # Guarantees
//
// A Scheduler holds one timer per key (an action name):
//
//   - Set with the same key and an equal Spec replaces only the callback:
//     the timer keeps its phase across redeploys. Another Spec restarts it
//     from now.
//   - Remove cancels the timer and the context of a run in progress.
//   - Callbacks of one key never run concurrently, even across Remove and
//     Set: a tick that comes while the previous run is still going is
//     skipped and counted (Stats.Skipped), not queued.
//   - Runs that come late (a suspended process, a clock set forward) are
//     not made up: the timer runs once and counts the due times it passed
//     (Tick.Missed, Stats.Missed).
//   - A panicking callback is logged and counted (Stats.Panics); the timer
//     goes on.
//   - Stop cancels every timer and waits for running callbacks: when it
//     returns no callback runs and no goroutine of the scheduler is left.
//
// The Clock is injected (Options.Clock): RealClock in production,
// clocktest.Clock in tests, where time moves only on Advance. Wall-clock
// schedules sleep at most Options.MaxSleep at a time and then look at the
// clock again, so a clock that is set forward or back is noticed.
//
// # Concurrency
//
// All methods are safe for concurrent use. One mutex guards the timers,
// their counters and the set of running keys; it is never held while a
// callback runs, so a callback may call Set, Remove or Stats (but not
// Stop, which waits for it). Each callback runs on the goroutine of its
// Clock timer (time.AfterFunc's, for RealClock); a sync.WaitGroup counts
// armed timers and running callbacks, and Stop waits on it.
package schedule
