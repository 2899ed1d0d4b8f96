package schedule_test

import (
	"strings"
	"testing"
	"time"

	"gantry/lot/schedule"
)

func TestParseEvery(t *testing.T) {
	tests := []struct {
		n    float64
		unit string
		want string // Spec.String, or the error's text
	}{
		{10, "SECONDS", "every 10s"},
		{1, "second", "every 1s"},
		{0.5, "SECONDS", "every 500ms"},
		{250, "MILLISECONDS", "every 250ms"},
		{2, "MINUTES", "every 2m0s"},
		{1, "HOUR", "every 1h0m0s"},
		{1, "DAYS", "every 24h0m0s"},
		{1, "WEEK", "every 168h0m0s"},
		{3, "MONTHS", "every 3 month(s)"},
		{1, "YEAR", "every 12 month(s)"},
		{1.5, "MONTHS", "want a whole number of months"},
		{0, "SECONDS", "must be positive"},
		{-1, "SECONDS", "must be positive"},
		{1, "FORTNIGHTS", `unknown unit "FORTNIGHTS"`},
		{1e9, "DAYS", "more than 100 years"},
	}
	for _, tc := range tests {
		s, err := schedule.ParseEvery(tc.n, tc.unit)
		got := s.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("ParseEvery(%v, %q) = %q, want %q", tc.n, tc.unit, got, tc.want)
		}
	}
}

func TestParseTimestampAndWeekly(t *testing.T) {
	tests := []struct {
		name string
		got  func() (schedule.Spec, error)
		want string
	}{
		{"daily", func() (schedule.Spec, error) { return schedule.ParseTimestamp("07:30:05") }, "DAY at 07:30:05"},
		{"daily without seconds", func() (schedule.Spec, error) { return schedule.ParseTimestamp("7:30") }, "DAY at 07:30:00"},
		{"once", func() (schedule.Spec, error) { return schedule.ParseTimestamp("24-12-2026 18:00:00") }, "once at 2026-12-24 18:00:00"},
		{"once ISO", func() (schedule.Spec, error) { return schedule.ParseTimestamp("2026-12-24T18:00") }, "once at 2026-12-24 18:00:00"},
		{"bad hour", func() (schedule.Spec, error) { return schedule.ParseTimestamp("24:00:00") }, `want "HH:mm:ss" or "dd-MM-yyyy HH:mm:ss"`},
		{"bad date", func() (schedule.Spec, error) { return schedule.ParseTimestamp("31-02-2026 10:00:00") }, `date "31-02-2026" is not dd-MM-yyyy`},
		{"bad time with date", func() (schedule.Spec, error) { return schedule.ParseTimestamp("01-02-2026 10:61") }, `"61" is not within 0..59`},
		{"monday", func() (schedule.Spec, error) { return schedule.ParseWeekly("MONDAY", "07:30") }, "MONDAY at 07:30:00"},
		{"weekday", func() (schedule.Spec, error) { return schedule.ParseWeekly("weekday", "23:59:59") }, "WEEKDAY at 23:59:59"},
		{"weekends", func() (schedule.Spec, error) { return schedule.ParseWeekly("WEEKENDS", "00:00") }, "WEEKEND at 00:00:00"},
		{"day", func() (schedule.Spec, error) { return schedule.ParseWeekly("DAY", "12:00") }, "DAY at 12:00:00"},
		{"bad day", func() (schedule.Spec, error) { return schedule.ParseWeekly("FUNDAY", "12:00") }, `unknown day "FUNDAY"`},
		{"bad time", func() (schedule.Spec, error) { return schedule.ParseWeekly("MONDAY", "noon") }, `time "noon"`},
	}
	for _, tc := range tests {
		s, err := tc.got()
		got := s.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSpecEquality(t *testing.T) {
	a, _ := schedule.ParseWeekly("MONDAY", "07:30")
	b := schedule.Weekly(schedule.Day(time.Monday), schedule.At(7, 30, 0))
	if a != b {
		t.Fatal("equal specs compare unequal")
	}
	if schedule.Every(time.Second) == schedule.Every(2*time.Second) {
		t.Fatal("different specs compare equal")
	}
}
