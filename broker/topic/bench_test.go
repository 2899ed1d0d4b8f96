package topic

import (
	"fmt"
	"testing"
)

// benchMatch measures Tree.Match of topic with a reused dst, and fails if
// the match count is not want (so a benchmark cannot silently measure an
// empty walk).
func benchMatch(b *testing.B, tr *Tree[*sess], topic string, want int, accept func(*sess) bool) {
	dst := make([]*Entry[*sess], 0, want+1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dst = tr.Match(topic, dst[:0], accept)
	}
	b.StopTimer()
	if len(dst) != want {
		b.Fatalf("Match(%q) found %d entries, want %d", topic, len(dst), want)
	}
}

// distinctTree holds n subscriptions on distinct filters under one
// prefix, none of which matches "building/lobby/floor/3/temp".
func distinctTree(n int) *Tree[*sess] {
	var tr Tree[*sess]
	for i, c := range newSessions(n) {
		f := fmt.Sprintf("building/b%d/floor/+/temp", i)
		if i%4 == 3 {
			f = fmt.Sprintf("building/b%d/#", i)
		}
		tr.Subscribe(Entry[*sess]{Client: c, Filter: f})
	}
	return &tr
}

// BenchmarkMatchNoneOf1 and BenchmarkMatchNoneOf1000 publish to a topic
// that none of the filters matches: the trie makes them cost the same.
func BenchmarkMatchNoneOf1(b *testing.B) {
	benchMatch(b, distinctTree(1), "building/lobby/floor/3/temp", 0, nil)
}

func BenchmarkMatchNoneOf1000(b *testing.B) {
	benchMatch(b, distinctTree(1000), "building/lobby/floor/3/temp", 0, nil)
}

// BenchmarkMatchOneOf1000 is a hit among 1,000 distinct filters.
func BenchmarkMatchOneOf1000(b *testing.B) {
	benchMatch(b, distinctTree(1000), "building/b500/floor/3/temp", 1, nil)
}

func BenchmarkMatchFanout1000(b *testing.B) {
	var tr Tree[*sess]
	for _, c := range newSessions(1000) {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "sport/tennis/player1"})
	}
	benchMatch(b, &tr, "sport/tennis/player1", 1000, nil)
}

// BenchmarkMatchWildcards has every kind of matching filter at every
// level, among 1,000 unrelated ones.
func BenchmarkMatchWildcards(b *testing.B) {
	tr := distinctTree(1000)
	s := newSessions(8)
	filters := []string{"#", "sport/#", "sport/+/player1", "+/tennis/#", "+/+/+",
		"sport/tennis/+", "sport/tennis/player1/#", "sport/tennis/player1"}
	for i, f := range filters {
		tr.Subscribe(Entry[*sess]{Client: s[i], Filter: f})
	}
	benchMatch(b, tr, "sport/tennis/player1", len(filters), nil)
}

// BenchmarkMatchShared picks one of 1,000 members of each of two groups,
// skipping the members that accept rejects.
func BenchmarkMatchShared(b *testing.B) {
	var tr Tree[*sess]
	for _, c := range newSessions(1000) {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/g/sport/+/player1"})
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/h/sport/#"})
	}
	benchMatch(b, &tr, "sport/tennis/player1", 2, func(c *sess) bool { return c.id%4 != 0 })
}

func BenchmarkSubscribeUnsubscribe(b *testing.B) {
	tr := distinctTree(1000)
	c := &sess{}
	b.ReportAllocs()
	for b.Loop() {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "building/new/floor/+/temp"})
		tr.Unsubscribe(c, "building/new/floor/+/temp")
	}
}

func BenchmarkMatches(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if !Matches("sport/+/player1/#", "sport/tennis/player1/score/wimbledon") {
			b.Fatal("no match")
		}
	}
}

// BenchmarkIndexMatch looks up the retained messages of one filter among
// 10,000 stored topics.
func BenchmarkIndexMatch(b *testing.B) {
	var x Index[int]
	for i := range 10000 {
		x.Set(fmt.Sprintf("building/b%d/floor/%d/temp", i%100, i/100), i)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		x.Match("building/b7/floor/+/temp", func(string, int) bool {
			n++
			return true
		})
		if n != 100 {
			b.Fatalf("visited %d, want 100", n)
		}
	}
}
