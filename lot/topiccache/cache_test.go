package topiccache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newCache(t testing.TB, o *Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(c *Cache, topic string) string {
	v, ok := c.Get(topic)
	if !ok {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s", v.Payload, v.Origin)
}

func TestPublishKeepReplace(t *testing.T) {
	c := newCache(t, nil)
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"publish", func() error { return c.Publish("a/b", []byte("1"), t0) }, "1/published"},
		{"publish replaces", func() error { return c.Publish("a/b", []byte("2"), t0) }, "2/published"},
		{"keep replaces", func() error { return c.Keep("a/b", []byte("k"), t0) }, "k/kept"},
		{"publish replaces a kept value", func() error { return c.Publish("a/b", []byte("3"), t0) }, "3/published"},
		{"empty payload is a value", func() error { return c.Publish("a/b", nil, t0) }, "/published"},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := get(c, "a/b"); got != s.want {
			t.Fatalf("%s: Get = %s, want %s", s.name, got, s.want)
		}
	}
	if got := get(c, "a/c"); got != "<none>" {
		t.Fatalf("unknown topic: %s", got)
	}
	if !c.Delete("a/b") || c.Delete("a/b") || c.Len() != 0 {
		t.Fatal("Delete did not remove exactly once")
	}
	if st := c.Stats(); st.Bytes != 0 || st.Topics != 0 {
		t.Fatalf("stats after delete: %+v", st)
	}
}

func TestInvalidTopicAndOptions(t *testing.T) {
	c := newCache(t, nil)
	if err := c.Keep("a/#", []byte("x"), t0); !errors.Is(err, ErrInvalidTopic) || !strings.Contains(err.Error(), `"a/#"`) {
		t.Fatalf("Keep(a/#) = %v", err)
	}
	if _, err := c.Merge("", Value{Origin: Kept}); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("Merge empty topic = %v", err)
	}
	if _, err := c.Merge("a", Value{}); err == nil {
		t.Fatal("Merge without origin accepted")
	}
	bad := []Options{{MaxTopics: -1}, {MaxValueBytes: -1}, {MaxBytes: -1}, {MaxValueBytes: 10, MaxBytes: 5}}
	for _, o := range bad {
		if _, err := New(&o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestTooLarge(t *testing.T) {
	c := newCache(t, &Options{MaxValueBytes: 4})
	if err := c.Publish("t", []byte("old"), t0); err != nil {
		t.Fatal(err)
	}
	err := c.Publish("t", []byte("too big"), t0)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `"t": 7 bytes, more than 4`) {
		t.Fatalf("Publish too large = %v", err)
	}
	if got := get(c, "t"); got != "<none>" {
		t.Fatalf("stale value kept after an oversized publish: %s", got)
	}
	if err := c.Keep("k", []byte("12345"), t0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Keep too large = %v", err)
	}
	if st := c.Stats(); st.RefusedTooLarge != 2 {
		t.Fatalf("RefusedTooLarge = %d, want 2", st.RefusedTooLarge)
	}
}

func TestFullEvictsOldestPublished(t *testing.T) {
	c := newCache(t, &Options{MaxTopics: 3})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Keep("k1", []byte("k"), t0))
	must(c.Publish("p1", []byte("1"), t0))
	must(c.Publish("p2", []byte("2"), t0))
	must(c.Publish("p1", []byte("1b"), t0)) // p1 is now more recent than p2
	must(c.Publish("p3", []byte("3"), t0))
	// Eviction takes the least recently written published value of the
	// shard it visits (TestEvictionWithinAShardIsLRU); with 64 shards and
	// few entries any published value may go, but never the kept one.
	if c.Len() != 3 || get(c, "k1") != "k/kept" || c.Stats().Evicted != 1 {
		t.Fatalf("after eviction: len %d, stats %+v", c.Len(), c.Stats())
	}
	must(c.Keep("k2", []byte("k"), t0))
	must(c.Keep("k3", []byte("k"), t0))
	if st := c.Stats(); st.Kept != 3 || st.Topics != 3 {
		t.Fatalf("kept values did not evict the published ones: %+v", st)
	}
	if err := c.Keep("k4", []byte("k"), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("Keep on a cache full of kept values = %v", err)
	}
	if err := c.Publish("p4", []byte("4"), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("Publish on a cache full of kept values = %v", err)
	}
	must(c.Keep("k1", []byte("updated"), t0)) // updating a held topic always works
	if st := c.Stats(); st.RefusedFull != 2 {
		t.Fatalf("RefusedFull = %d, want 2", st.RefusedFull)
	}
}

func TestEvictionWithinAShardIsLRU(t *testing.T) {
	c := newCache(t, &Options{MaxTopics: 1000})
	// Find three topics of one shard.
	var same []string
	target := c.shard("x0")
	for i := 0; len(same) < 3; i++ {
		if tp := fmt.Sprintf("x%d", i); c.shard(tp) == target {
			same = append(same, tp)
		}
	}
	for _, tp := range same {
		if err := c.Publish(tp, []byte(tp), t0); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Publish(same[0], []byte("again"), t0) // same[1] is now the oldest
	if e := target.pub.front(); e == nil || e.topic != same[1] {
		t.Fatalf("front of the shard's list = %v, want %s", e, same[1])
	}
}

func TestMaxBytes(t *testing.T) {
	c := newCache(t, &Options{MaxBytes: 3 * (EntryOverhead + 12), MaxValueBytes: 10})
	for i := range 10 {
		if err := c.Publish(fmt.Sprintf("t%d", i), []byte("0123456789"), t0); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Bytes > 3*(EntryOverhead+12) || st.Topics != 3 || st.Evicted != 7 {
		t.Fatalf("byte bound not kept: %+v", st)
	}
	// Growing a held value also evicts.
	if err := c.Keep("t9", []byte("0123456789"), t0); err != nil {
		t.Fatal(err)
	}
}

func TestMergeLaterWins(t *testing.T) {
	c := newCache(t, nil)
	later := t0.Add(time.Second)
	steps := []struct {
		name   string
		v      Value
		stored bool
		want   string
	}{
		{"first", Value{Payload: []byte("a"), At: t0, Origin: Kept}, true, "a/kept"},
		{"older loses", Value{Payload: []byte("b"), At: t0.Add(-time.Second), Origin: Kept}, false, "a/kept"},
		{"tie: larger bytes win", Value{Payload: []byte("c"), At: t0, Origin: Kept}, true, "c/kept"},
		{"tie: smaller bytes lose", Value{Payload: []byte("b"), At: t0, Origin: Kept}, false, "c/kept"},
		{"later wins", Value{Payload: []byte("d"), At: later, Origin: Published}, true, "d/published"},
	}
	for _, s := range steps {
		ok, err := c.Merge("m", s.v)
		if err != nil || ok != s.stored {
			t.Fatalf("%s: Merge = %v, %v; want %v", s.name, ok, err, s.stored)
		}
		if got := get(c, "m"); got != s.want {
			t.Fatalf("%s: Get = %s, want %s", s.name, got, s.want)
		}
	}
	// A local write always wins, whatever the clocks say.
	if err := c.Keep("m", []byte("local"), t0); err != nil || get(c, "m") != "local/kept" {
		t.Fatalf("local Keep after a later merge: %v, %s", err, get(c, "m"))
	}
}

func TestRange(t *testing.T) {
	c := newCache(t, nil)
	for i := range 100 {
		_ = c.Publish(fmt.Sprintf("r/%d", i), []byte("v"), t0)
	}
	n := 0
	c.Range(func(string, Value) bool { n++; return true })
	if n != 100 {
		t.Fatalf("Range visited %d, want 100", n)
	}
	n = 0
	c.Range(func(string, Value) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("Range did not stop: %d", n)
	}
}

func TestConcurrent(t *testing.T) {
	c := newCache(t, &Options{MaxTopics: 500})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tp := fmt.Sprintf("w/%d", (i*7+w)%900)
				switch i % 5 {
				case 0:
					_ = c.Keep(tp, []byte("k"), t0)
				case 1:
					c.Delete(tp)
				case 2:
					_, _ = c.Merge(tp, Value{Payload: []byte("m"), At: t0, Origin: Published})
				default:
					_ = c.Publish(tp, []byte("p"), t0)
				}
				c.Get(fmt.Sprintf("w/%d", i%900))
			}
		}()
	}
	wg.Wait()
	st := c.Stats()
	n, kept, size := 0, 0, int64(0)
	c.Range(func(tp string, v Value) bool {
		n++
		if v.Origin == Kept {
			kept++
		}
		size += int64(len(tp)+len(v.Payload)) + EntryOverhead
		return true
	})
	if st.Topics != n || st.Kept != kept || st.Bytes != size {
		t.Fatalf("counters drifted: stats %+v, counted topics %d kept %d bytes %d", st, n, kept, size)
	}
	if n > 500 {
		t.Fatalf("%d topics held, bound 500", n)
	}
}
