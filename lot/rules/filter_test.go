package rules

import (
	"strings"
	"testing"

	"gantry/broker/topic"
)

func TestCoversAndIntersects(t *testing.T) {
	tests := []struct {
		rule, sub          string
		covers, intersects bool
	}{
		{"#", "a/b", true, true},
		{"#", "$SYS/x", false, false},
		{"$SYS/#", "$SYS/x/+", true, true},
		{"+/x", "$SYS/x", false, false},
		{"a/#", "a", true, true},
		{"a/#", "#", false, true},
		{"a/+", "a/#", false, true},
		{"a/+", "a/b", true, true},
		{"a/b", "a/+", false, true},
		{"a/b", "a/c", false, false},
		{"a/+/c", "a/b/+", false, true},
		{"a", "a/#", false, true},
		{"a/b/c", "a/b", false, false},
		{"+", "", true, true},
		{"a//b", "a/+/b", false, true},
	}
	for _, tc := range tests {
		if got := covers(tc.rule, tc.sub); got != tc.covers {
			t.Errorf("covers(%q, %q) = %v, want %v", tc.rule, tc.sub, got, tc.covers)
		}
		if got := intersects(tc.rule, tc.sub); got != tc.intersects {
			t.Errorf("intersects(%q, %q) = %v, want %v", tc.rule, tc.sub, got, tc.intersects)
		}
		if intersects(tc.rule, tc.sub) != intersects(tc.sub, tc.rule) {
			t.Errorf("intersects(%q, %q) is not symmetric", tc.rule, tc.sub)
		}
	}
}

// TestFilterRelationsAgreeWithMatches checks covers and intersects against
// topic.Matches over every filter and topic of up to three levels built from
// a small alphabet (plus the empty topic), which includes a '$' level, an empty level and a level
// no filter names (so '+' is told from a literal).
func TestFilterRelationsAgreeWithMatches(t *testing.T) {
	filters := build([]string{"a", "$s", "", "+", "#"}, 3, true)
	// The empty topic is not a valid name but filters relate as if it
	// were one ("/#" and "+" share it), which errs on the safe side.
	topics := append(build([]string{"a", "$s", "", "z"}, 4, false), "")
	for _, r := range filters {
		for _, s := range filters {
			cov, inter := true, false
			for _, tp := range topics {
				ms, mr := topic.Matches(s, tp), topic.Matches(r, tp)
				if ms && !mr {
					cov = false
				}
				if ms && mr {
					inter = true
				}
			}
			if got := intersects(r, s); got != inter {
				t.Fatalf("intersects(%q, %q) = %v, brute force %v", r, s, got, inter)
			}
			if got := covers(r, s); got != cov {
				t.Fatalf("covers(%q, %q) = %v, brute force %v", r, s, got, cov)
			}
		}
	}
}

// build returns the valid filters (or topic names) of 1..depth levels.
func build(levels []string, depth int, filters bool) []string {
	var out []string
	var rec func(prefix []string)
	rec = func(prefix []string) {
		if len(prefix) > 0 {
			s := strings.Join(prefix, "/")
			valid := topic.ValidateName(s) == nil
			if filters {
				valid = topic.ValidateFilter(s) == nil
			}
			if valid {
				out = append(out, s)
			}
		}
		if len(prefix) == depth {
			return
		}
		for _, l := range levels {
			rec(append(prefix[:len(prefix):len(prefix)], l))
		}
	}
	rec(nil)
	return out
}

func TestLevelAt(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
		ok   bool
	}{
		{"devices/gw1/t", 2, "gw1", true},
		{"devices/gw1/t", 1, "devices", true},
		{"devices/gw1/t", 3, "t", true},
		{"devices/gw1/t", 4, "", false},
		{"a//b", 2, "", true},
		{"a", 0, "", false},
	}
	for _, tc := range tests {
		got, ok := levelAt(tc.s, tc.n)
		if got != tc.want || ok != tc.ok {
			t.Errorf("levelAt(%q, %d) = %q, %v; want %q, %v", tc.s, tc.n, got, ok, tc.want, tc.ok)
		}
	}
}
