package schedule

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

type kind uint8

const (
	kindEvery  kind = iota + 1 // a fixed interval after deployment
	kindMonths                 // a number of calendar months after deployment
	kindWeekly                 // chosen weekdays at a local wall-clock time
	kindOnce                   // one local date and time
)

// Spec is when a timer fires: the decoded trigger of ON EVERY or
// ON TIMESTAMP. Build it with Every, EveryMonths, Weekly, Once or the Parse
// functions. Specs are comparable with ==.
type Spec struct {
	kind   kind
	every  time.Duration
	months int
	days   Weekdays
	tod    TimeOfDay
	date   civilDate // kindOnce
}

type civilDate struct {
	year  int
	month time.Month
	day   int
}

// Every fires every d, starting d after the timer is set (LOT.md §4.2:
// "every n units after the action is (re)deployed").
func Every(d time.Duration) Spec { return Spec{kind: kindEvery, every: d} }

// EveryMonths fires every n calendar months after the timer is set, at the
// same local time of day; a day missing from a month becomes its last day
// (set on January 31st: February 28th, March 31st, ...).
func EveryMonths(n int) Spec { return Spec{kind: kindMonths, months: n} }

// Weekly fires on the given weekdays at the local time of day at.
func Weekly(days Weekdays, at TimeOfDay) Spec { return Spec{kind: kindWeekly, days: days, tod: at} }

// Daily fires every day at the local time of day at (ON TIMESTAMP "HH:mm:ss").
func Daily(at TimeOfDay) Spec { return Weekly(AllDays, at) }

// Once fires once at a local date and time (ON TIMESTAMP "dd-MM-yyyy HH:mm:ss"),
// in the scheduler's location; a time already past never fires.
func Once(year int, month time.Month, day int, at TimeOfDay) Spec {
	return Spec{kind: kindOnce, date: civilDate{year, month, day}, tod: at}
}

// Weekdays is a set of days of the week.
type Weekdays uint8

// Day sets.
const (
	Weekday  Weekdays = 1<<time.Monday | 1<<time.Tuesday | 1<<time.Wednesday | 1<<time.Thursday | 1<<time.Friday
	Weekend  Weekdays = 1<<time.Saturday | 1<<time.Sunday
	AllDays           = Weekday | Weekend
	noneDays Weekdays = 0
)

// Day returns the set holding only d.
func Day(d time.Weekday) Weekdays { return 1 << d }

// Has reports whether d is in the set.
func (w Weekdays) Has(d time.Weekday) bool { return w&(1<<d) != 0 }

func (w Weekdays) String() string {
	switch w {
	case AllDays:
		return "DAY"
	case Weekday:
		return "WEEKDAY"
	case Weekend:
		return "WEEKEND"
	}
	var names []string
	for d := time.Sunday; d <= time.Saturday; d++ {
		if w.Has(d) {
			names = append(names, strings.ToUpper(d.String()))
		}
	}
	return strings.Join(names, ",")
}

// TimeOfDay is a local wall-clock time, in seconds after midnight.
type TimeOfDay int32

// At returns the time of day h:m:s; it does not validate.
func At(h, m, s int) TimeOfDay { return TimeOfDay(h*3600 + m*60 + s) }

func (t TimeOfDay) split() (h, m, s int) {
	return int(t) / 3600, int(t) / 60 % 60, int(t) % 60
}

func (t TimeOfDay) String() string {
	h, m, s := t.split()
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// String describes the spec for logs: "every 10s", "WEEKDAY at 07:30:00".
func (s Spec) String() string {
	switch s.kind {
	case kindEvery:
		return "every " + s.every.String()
	case kindMonths:
		return fmt.Sprintf("every %d month(s)", s.months)
	case kindWeekly:
		return fmt.Sprintf("%s at %s", s.days, s.tod)
	case kindOnce:
		return fmt.Sprintf("once at %04d-%02d-%02d %s", s.date.year, s.date.month, s.date.day, s.tod)
	}
	return "invalid schedule"
}

// validate checks a spec against the scheduler's minimum interval.
func (s Spec) validate(minInterval time.Duration) error {
	switch s.kind {
	case kindEvery:
		if s.every < minInterval {
			return fmt.Errorf("schedule: interval %v is shorter than the minimum %v", s.every, minInterval)
		}
	case kindMonths:
		if s.months < 1 {
			return fmt.Errorf("schedule: every %d months, want 1 or more", s.months)
		}
	case kindWeekly:
		if s.days == noneDays {
			return fmt.Errorf("schedule: no day chosen")
		}
		if s.tod < 0 || s.tod >= 24*3600 {
			return fmt.Errorf("schedule: time of day %d s is not within a day", s.tod)
		}
	case kindOnce:
		if s.tod < 0 || s.tod >= 24*3600 || !validDate(s.date) {
			return fmt.Errorf("schedule: %s is not a valid date and time", s)
		}
	default:
		return fmt.Errorf("schedule: empty schedule")
	}
	return nil
}

func validDate(d civilDate) bool {
	t := time.Date(d.year, d.month, d.day, 0, 0, 0, 0, time.UTC)
	return t.Year() == d.year && t.Month() == d.month && t.Day() == d.day
}

// units maps LoT time units (singular; a trailing S is accepted) to their
// length; MONTH and YEAR are calendar units.
var units = map[string]time.Duration{
	"MILLISECOND": time.Millisecond,
	"SECOND":      time.Second,
	"MINUTE":      time.Minute,
	"HOUR":        time.Hour,
	"DAY":         24 * time.Hour,
	"WEEK":        7 * 24 * time.Hour,
}

// ParseEvery decodes ON EVERY n UNIT. unit is one of MILLISECOND, SECOND,
// MINUTE, HOUR, DAY, WEEK, MONTH, YEAR, singular or plural, in any case.
// n may be fractional for fixed units (0.5 SECONDS), not for MONTH and YEAR.
func ParseEvery(n float64, unit string) (Spec, error) {
	u := strings.TrimSuffix(strings.ToUpper(unit), "S")
	if !(n > 0) || math.IsInf(n, 0) {
		return Spec{}, fmt.Errorf("schedule: ON EVERY %v %s: the number must be positive", n, unit)
	}
	if u == "MONTH" || u == "YEAR" {
		if n != math.Trunc(n) || n > 12_000 {
			return Spec{}, fmt.Errorf("schedule: ON EVERY %v %s: want a whole number of %ss", n, unit, strings.ToLower(u))
		}
		months := int(n)
		if u == "YEAR" {
			months *= 12
		}
		return EveryMonths(months), nil
	}
	d, ok := units[u]
	if !ok {
		return Spec{}, fmt.Errorf("schedule: ON EVERY %v %s: unknown unit %q (want MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS, WEEKS, MONTHS or YEARS)", n, unit, unit)
	}
	total := n * float64(d)
	if total > float64(100*365*24*time.Hour) {
		return Spec{}, fmt.Errorf("schedule: ON EVERY %v %s: more than 100 years", n, unit)
	}
	return Every(time.Duration(math.Round(total))), nil
}

// ParseDays decodes the day word of ON EVERY <day> AT: MONDAY..SUNDAY,
// WEEKDAY (Monday to Friday), WEEKEND (Saturday and Sunday) or DAY (every
// day); any case, a trailing S accepted.
func ParseDays(word string) (Weekdays, error) {
	w := strings.TrimSuffix(strings.ToUpper(word), "S")
	switch w {
	case "WEEKDAY":
		return Weekday, nil
	case "WEEKEND":
		return Weekend, nil
	case "DAY", "EVERYDAY":
		return AllDays, nil
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.ToUpper(d.String()) == w {
			return Day(d), nil
		}
	}
	return 0, fmt.Errorf("schedule: unknown day %q (want MONDAY..SUNDAY, WEEKDAY, WEEKEND or DAY)", word)
}

// ParseTimeOfDay decodes "HH:mm" or "HH:mm:ss" (24-hour clock).
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("schedule: time %q: want HH:mm or HH:mm:ss", s)
	}
	limits := []int{23, 59, 59}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) == 0 || len(p) > 2 || n < 0 || n > limits[i] {
			return 0, fmt.Errorf("schedule: time %q: %q is not within 0..%d", s, p, limits[i])
		}
		v[i] = n
	}
	return At(v[0], v[1], v[2]), nil
}

// ParseWeekly decodes ON EVERY <day> AT "<time>".
func ParseWeekly(day, at string) (Spec, error) {
	days, err := ParseDays(day)
	if err != nil {
		return Spec{}, err
	}
	tod, err := ParseTimeOfDay(at)
	if err != nil {
		return Spec{}, err
	}
	return Weekly(days, tod), nil
}

// ParseTimestamp decodes ON TIMESTAMP "<s>" (LOT.md §4.2): "HH:mm:ss" (or
// "HH:mm") fires every day at that local time; "dd-MM-yyyy HH:mm:ss" fires
// once. "yyyy-MM-dd HH:mm:ss" (or with a T) is accepted too; seconds are
// optional.
func ParseTimestamp(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	datePart, timePart, hasDate := strings.Cut(strings.Replace(s, "T", " ", 1), " ")
	if !hasDate {
		tod, err := ParseTimeOfDay(s)
		if err != nil {
			return Spec{}, fmt.Errorf("schedule: ON TIMESTAMP %q: want \"HH:mm:ss\" or \"dd-MM-yyyy HH:mm:ss\"", s)
		}
		return Daily(tod), nil
	}
	tod, err := ParseTimeOfDay(timePart)
	if err != nil {
		return Spec{}, fmt.Errorf("schedule: ON TIMESTAMP %q: %w", s, err)
	}
	for _, layout := range []string{"02-01-2006", "2006-01-02"} {
		if t, err := time.Parse(layout, datePart); err == nil {
			return Once(t.Year(), t.Month(), t.Day(), tod), nil
		}
	}
	return Spec{}, fmt.Errorf("schedule: ON TIMESTAMP %q: date %q is not dd-MM-yyyy", s, datePart)
}

// next returns the first due time strictly after `after`, for a timer set
// at anchor, with wall-clock times in loc; false when there is none.
func (s Spec) next(anchor, after time.Time, loc *time.Location) (time.Time, bool) {
	switch s.kind {
	case kindEvery:
		n := after.Sub(anchor)/s.every + 1
		if n < 1 {
			n = 1
		}
		return anchor.Add(n * s.every), true
	case kindMonths:
		return s.nextMonths(anchor, after, loc), true
	case kindWeekly:
		return s.nextWeekly(after, loc), true
	case kindOnce:
		t := time.Date(s.date.year, s.date.month, s.date.day, 0, 0, 0, 0, loc).Add(time.Duration(s.tod) * time.Second)
		return t, t.After(after)
	}
	return time.Time{}, false
}

func (s Spec) nextMonths(anchor, after time.Time, loc *time.Location) time.Time {
	a := anchor.In(loc)
	k := (monthIndex(after.In(loc)) - monthIndex(a)) / s.months
	if k < 1 {
		k = 1
	}
	for {
		t := addMonthsClamped(a, k*s.months)
		if t.After(after) {
			return t
		}
		k++
	}
}

func monthIndex(t time.Time) int { return t.Year()*12 + int(t.Month()) - 1 }

// addMonthsClamped adds n months to t, clamping the day to the month's end.
func addMonthsClamped(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(d, last)-1)
}

func (s Spec) nextWeekly(after time.Time, loc *time.Location) time.Time {
	a := after.In(loc)
	h, m, sec := s.tod.split()
	for i := 0; ; i++ {
		t := time.Date(a.Year(), a.Month(), a.Day()+i, h, m, sec, 0, loc)
		if s.days.Has(t.Weekday()) && t.After(after) {
			return t
		}
	}
}
