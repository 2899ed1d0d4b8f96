package topic

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
)

// visited collects the topics Index.Match visits for filter, sorted.
func visited(x *Index[int], filter string) []string {
	var got []string
	x.Match(filter, func(topic string, _ int) bool {
		got = append(got, topic)
		return true
	})
	sort.Strings(got)
	return got
}

func TestIndexMatchCases(t *testing.T) {
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			var x Index[int]
			x.Set(tc.topic, 1)
			got := visited(&x, tc.filter)
			if (len(got) == 1) != tc.want || len(got) > 1 {
				t.Fatalf("Match(%q) over {%q} visited %q, want match %v", tc.filter, tc.topic, got, tc.want)
			}
		})
	}
}

func TestIndexMatchMany(t *testing.T) {
	topics := []string{"sport", "sport/", "sport/tennis", "sport/tennis/player1", "sport/tennis/player1/ranking",
		"sport/tennis/player2", "/finance", "finance", "$SYS", "$SYS/uptime", "$SYS/a/b", "a//b", "a/x/b", "/", "a/$b"}
	var x Index[int]
	for i, topic := range topics {
		x.Set(topic, i)
	}
	filters := []string{"sport/tennis/player1/#", "sport/#", "sport/+", "sport/tennis/+", "#", "+/+",
		"+", "/+", "$SYS/#", "$SYS/+", "a//b", "a/+/b", "sport/", "+/tennis/#", "a/+", "$share/g/sport/+", "nope/#"}
	for _, f := range filters {
		var want []string
		for _, topic := range topics {
			if Matches(f, topic) {
				want = append(want, topic)
			}
		}
		sort.Strings(want)
		if got := visited(&x, f); !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %q, want %q", f, got, want)
		}
	}
}

func TestIndexSetGetDelete(t *testing.T) {
	var x Index[string]
	if _, ok := x.Get("a"); ok || x.Len() != 0 {
		t.Fatal("empty index has a")
	}
	x.Set("a/b", "one")
	x.Set("a/b", "two")
	x.Set("a", "parent")
	if v, ok := x.Get("a/b"); !ok || v != "two" || x.Len() != 2 {
		t.Fatalf("Get(a/b) = %q %v, Len = %d; want two true 2", v, ok, x.Len())
	}
	if _, ok := x.Get("a/b/c"); ok {
		t.Fatal("Get of an absent child found something")
	}
	if _, ok := x.Get("a/"); ok {
		t.Fatal("Get(a/) found something")
	}
	if x.Delete("a/c") || x.Delete("a/b/c") {
		t.Fatal("Delete of an absent topic reported true")
	}
	if !x.Delete("a") || x.Delete("a") {
		t.Fatal("Delete(a): want true then false")
	}
	if v, ok := x.Get("a/b"); !ok || v != "two" {
		t.Fatal("deleting the parent lost the child")
	}
	if !x.Delete("a/b") || x.Len() != 0 {
		t.Fatalf("Delete(a/b) then Len = %d, want 0", x.Len())
	}
}

func TestIndexPrune(t *testing.T) {
	var x Index[int]
	topics := []string{"a/b/c/d", "a/b", "a//", "/", "$SYS/x", "z/y/x/w/v/u"}
	for round := range 3 {
		for i, topic := range topics {
			x.Set(topic, i)
		}
		for _, topic := range topics {
			if !x.Delete(topic) {
				t.Fatalf("round %d: Delete(%q) = false", round, topic)
			}
		}
		if x.Len() != 0 || x.root.children != nil {
			t.Fatalf("round %d: Len = %d, root children %v; want an empty root", round, x.Len(), x.root.children)
		}
	}
	x.Set("a/b/c", 1)
	x.Set("a/x", 2)
	x.Delete("a/b/c")
	a := x.root.children["a"]
	if a == nil || len(a.children) != 1 || a.children["x"] == nil {
		t.Fatalf("pruning a/b/c should leave a/x alone: %+v", a)
	}
}

func TestIndexMatchStops(t *testing.T) {
	var x Index[int]
	for i := range 50 {
		x.Set(fmt.Sprintf("s/%d", i), i)
		x.Set(fmt.Sprintf("s/%d/deep", i), i)
	}
	for _, f := range []string{"#", "s/#", "s/+", "s/+/deep", "+/+/+"} {
		n := 0
		x.Match(f, func(string, int) bool {
			n++
			return n < 3
		})
		if n != 3 {
			t.Errorf("Match(%q) went on to %d calls after fn returned false", f, n)
		}
	}
	n := 0
	x.Range(func(string, int) bool {
		n++
		return false
	})
	if n != 1 {
		t.Errorf("Range made %d calls, want 1", n)
	}
}

func TestIndexRangeIncludesDollar(t *testing.T) {
	var x Index[int]
	for i, topic := range []string{"$SYS/a", "a", "a/b", "/"} {
		x.Set(topic, i)
	}
	var got []string
	x.Range(func(topic string, v int) bool {
		got = append(got, fmt.Sprintf("%s=%d", topic, v))
		return true
	})
	sort.Strings(got)
	want := []string{"$SYS/a=0", "/=3", "a/b=2", "a=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("Range = %q, want %q", got, want)
	}
}

func TestIndexConcurrent(t *testing.T) {
	var x Index[int]
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				topic := fmt.Sprintf("r/%d/%d", w, i%20)
				x.Set(topic, i)
				if i%2 == 0 {
					x.Delete(topic)
				}
			}
		})
		wg.Go(func() {
			for range 500 {
				x.Match("r/+/#", func(string, int) bool { return true })
				_, _ = x.Get("r/1/1")
				_ = x.Len()
			}
		})
	}
	wg.Wait()
	var left []string
	x.Range(func(topic string, _ int) bool {
		left = append(left, topic) // fn must not call into the Index: collect, then delete
		return true
	})
	for _, topic := range left {
		x.Delete(topic)
	}
	if x.Len() != 0 {
		t.Fatalf("Len = %d after deleting all", x.Len())
	}
}
