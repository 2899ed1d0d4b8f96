package topic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Levels drawn by the random generators: a small alphabet makes matches
// frequent, and "" and "$s" cover empty levels and the '$' rule.
var (
	topicLevels  = []string{"a", "b", "$s", ""}
	filterLevels = []string{"a", "b", "$s", "", "+", "+", "#"}
)

func randomTopic(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	lv := make([]string, n)
	for i := range lv {
		lv[i] = topicLevels[r.IntN(len(topicLevels))]
	}
	return strings.Join(lv, "/")
}

func randomFilter(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	lv := make([]string, n)
	for i := range lv {
		lv[i] = filterLevels[r.IntN(len(filterLevels))]
		if lv[i] == "#" && i != n-1 {
			lv[i] = "+"
		}
	}
	f := strings.Join(lv, "/")
	if r.IntN(5) == 0 {
		f = fmt.Sprintf("$share/g%d/%s", r.IntN(2), f)
	}
	return f
}

// bruteMatch is what Tree.Match must return, by Matches over all entries:
// the sorted plain entries, and the set of shared (group, inner) pairs.
func bruteMatch(entries map[string]Entry[*sess], topic string) (plain, groups []string) {
	seen := map[string]bool{}
	for _, e := range entries {
		if !Matches(e.Filter, topic) {
			continue
		}
		if g, inner, shared := splitShared(e.Filter); shared {
			if !seen[g+" "+inner] {
				seen[g+" "+inner] = true
				groups = append(groups, g+" "+inner)
			}
			continue
		}
		plain = append(plain, fmt.Sprintf("%d %s", e.Client.id, e.Filter))
	}
	sort.Strings(plain)
	sort.Strings(groups)
	return plain, groups
}

// checkTree compares one Tree.Match against bruteMatch.
func checkTree(t *testing.T, tr *Tree[*sess], entries map[string]Entry[*sess], topic string) {
	t.Helper()
	wantPlain, wantGroups := bruteMatch(entries, topic)
	var plain, groups []string
	for _, e := range tr.Match(topic, nil, nil) {
		if e.Group == "" {
			plain = append(plain, fmt.Sprintf("%d %s", e.Client.id, e.Filter))
			continue
		}
		_, inner, _ := splitShared(e.Filter)
		groups = append(groups, e.Group+" "+inner)
	}
	sort.Strings(plain)
	sort.Strings(groups)
	if any := tr.Any(topic); any != (len(wantPlain)+len(wantGroups) > 0) {
		t.Fatalf("Any(%q) = %v, but %d plain entries and %d groups match", topic, any, len(wantPlain), len(wantGroups))
	}
	if !slices.Equal(plain, wantPlain) || !slices.Equal(groups, wantGroups) {
		t.Fatalf("Match(%q):\n plain  %q\n want   %q\n groups %q\n want   %q", topic, plain, wantPlain, groups, wantGroups)
	}
}

func TestTreeAgreesWithMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := newSessions(20)
	var tr Tree[*sess]
	entries := map[string]Entry[*sess]{} // by "client filter"
	for step := range 3000 {
		c, f := s[r.IntN(len(s))], randomFilter(r)
		key := fmt.Sprintf("%d %s", c.id, f)
		if _, ok := entries[key]; ok && r.IntN(2) == 0 {
			delete(entries, key)
			if !tr.Unsubscribe(c, f) {
				t.Fatalf("Unsubscribe(%s) = false for a live entry", key)
			}
		} else {
			e := Entry[*sess]{Client: c, Filter: f, SubID: uint32(step)}
			if existed := tr.Subscribe(e); existed != ok {
				t.Fatalf("Subscribe(%s) existed = %v, want %v", key, existed, ok)
			}
			entries[key] = e
		}
		if tr.Count() != len(entries) {
			t.Fatalf("Count = %d, want %d", tr.Count(), len(entries))
		}
		if step%10 == 0 {
			checkTree(t, &tr, entries, randomTopic(r))
		}
	}
	for key, e := range entries {
		if !tr.Unsubscribe(e.Client, e.Filter) {
			t.Fatalf("final Unsubscribe(%s) = false", key)
		}
	}
	if tr.Count() != 0 || tr.Nodes() != 0 {
		t.Fatalf("Count = %d, Nodes = %d after removing all", tr.Count(), tr.Nodes())
	}
}

func TestIndexAgreesWithMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var x Index[int]
	stored := map[string]bool{}
	for step := range 2000 {
		topic := randomTopic(r)
		if stored[topic] {
			delete(stored, topic)
			x.Delete(topic)
		} else {
			stored[topic] = true
			x.Set(topic, step)
		}
		if x.Len() != len(stored) {
			t.Fatalf("Len = %d, want %d", x.Len(), len(stored))
		}
		f := randomFilter(r)
		var want []string
		for s := range stored {
			if Matches(f, s) {
				want = append(want, s)
			}
		}
		sort.Strings(want)
		if got := visited(&x, f); !slices.Equal(got, want) {
			t.Fatalf("Match(%q) = %q, want %q", f, got, want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	for _, tc := range matchCases {
		f.Add(tc.filter, tc.topic)
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		want := Matches(filter, topic) // must not panic on anything
		var tr Tree[int]
		tr.Subscribe(Entry[int]{Client: 1, Filter: filter})
		tr.Subscribe(Entry[int]{Client: 2, Filter: "a/+/#"}) // neighbours to branch around
		tr.Subscribe(Entry[int]{Client: 3, Filter: "$share/n/b"})
		var x Index[int]
		x.Set("a/b", 2) // a neighbour, first: topic may be "a/b" itself
		x.Set(topic, 1)
		got := 0
		for _, e := range tr.Match(topic, nil, nil) {
			if e.Client == 1 {
				got++
			}
		}
		visits := 0
		x.Match(filter, func(s string, v int) bool {
			if v == 1 {
				visits++
			}
			return true
		})
		tr.Unsubscribe(1, filter)
		if _, _, _, err := ParseShared(filter); err != nil || ValidateName(topic) != nil {
			return // invalid input: only the absence of panics is promised
		}
		if (got == 1) != want || got > 1 {
			t.Fatalf("Tree: filter %q topic %q matched %d times, Matches says %v", filter, topic, got, want)
		}
		if (visits == 1) != want || visits > 1 {
			t.Fatalf("Index: filter %q topic %q visited %d times, Matches says %v", filter, topic, visits, want)
		}
		if tr.Count() != 2 {
			t.Fatalf("Count = %d after unsubscribing %q, want 2", tr.Count(), filter)
		}
	})
}

func TestMatchAllocs(t *testing.T) {
	online := map[*sess]bool{}
	cases := []struct {
		name    string
		subs    int
		filters []string
		accept  func(*sess) bool
	}{
		{"1 exact", 1, []string{"sport/tennis/player1"}, nil},
		{"1 wildcards", 1, []string{"sport/+/player1", "sport/#", "#", "+/+/+"}, nil},
		{"1000 exact", 1000, []string{"sport/tennis/player1"}, nil},
		{"1000 wildcards", 1000, []string{"sport/+/player1", "sport/#", "#", "+/tennis/+"}, nil},
		{"1000 shared", 1000, []string{"$share/g/sport/+/player1", "$share/h/#"}, nil},
		{"1000 shared accept static", 1000, []string{"$share/g/sport/#"}, func(c *sess) bool { return c.id%2 == 0 }},
		{"1000 shared accept closure", 1000, []string{"$share/g/sport/#", "sport/#"}, func(c *sess) bool { return online[c] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tree[*sess]
			s := newSessions(tc.subs)
			for _, c := range s {
				online[c] = c.id%3 != 0
				for _, f := range tc.filters {
					tr.Subscribe(Entry[*sess]{Client: c, Filter: f})
				}
			}
			dst := make([]*Entry[*sess], 0, tc.subs*len(tc.filters))
			n := 0
			allocs := testing.AllocsPerRun(100, func() {
				dst = tr.Match("sport/tennis/player1", dst[:0], tc.accept)
				n = len(dst)
			})
			if allocs != 0 {
				t.Fatalf("Match allocated %.1f times per run", allocs)
			}
			if a := testing.AllocsPerRun(100, func() { tr.Any("sport/tennis/player1") }); a != 0 {
				t.Fatalf("Any allocated %.1f times per run", a)
			}
			if n == 0 {
				t.Fatal("Match found nothing: the case measures nothing")
			}
		})
	}
}

func TestMatchAllocsPerCallClosure(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(1000)
	for _, c := range s {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/g/a/+"})
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "a/#"})
	}
	dst := make([]*Entry[*sess], 0, 1001)
	publisher := 0
	allocs := testing.AllocsPerRun(100, func() {
		me := s[publisher%len(s)] // a closure made per message, capturing the publisher
		dst = tr.Match("a/b", dst[:0], func(c *sess) bool { return c != me })
		publisher++
	})
	if allocs != 0 || len(dst) != 1001 {
		t.Fatalf("Match with a capturing closure: %.1f allocs, %d entries; want 0 and 1001", allocs, len(dst))
	}
}
