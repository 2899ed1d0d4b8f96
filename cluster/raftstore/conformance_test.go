package raftstore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), FileName), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// op is one call on a LogStore and StableStore.
type op struct {
	name string
	do   func(s store) error
}

type store interface {
	raft.LogStore
	raft.StableStore
}

func entries(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
			Data: fmt.Appendf(nil, "cmd %d@%d", i, term), AppendedAt: time.Unix(1700000000+int64(i), int64(term))})
	}
	return out
}

func storeLogs(from, to, term uint64) op {
	return op{fmt.Sprintf("StoreLogs(%d..%d @%d)", from, to, term), func(s store) error { return s.StoreLogs(entries(from, to, term)) }}
}

func storeLog(i, term uint64) op {
	return op{fmt.Sprintf("StoreLog(%d @%d)", i, term), func(s store) error { return s.StoreLog(entries(i, i, term)[0]) }}
}

func deleteRange(min, max uint64) op {
	return op{fmt.Sprintf("DeleteRange(%d, %d)", min, max), func(s store) error { return s.DeleteRange(min, max) }}
}

func set(k string, v []byte) op {
	return op{fmt.Sprintf("Set(%q, %q)", k, v), func(s store) error { return s.Set([]byte(k), v) }}
}

func setUint64(k string, v uint64) op {
	return op{fmt.Sprintf("SetUint64(%q, %d)", k, v), func(s store) error { return s.SetUint64([]byte(k), v) }}
}

var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand", "other", ""}

// sameState compares everything a caller can observe of two stores:
// both index bounds, every entry around them, and the stable keys.
func sameState(a, b store, hi uint64) error {
	af, aerr := a.FirstIndex()
	bf, berr := b.FirstIndex()
	if af != bf || (aerr == nil) != (berr == nil) {
		return fmt.Errorf("FirstIndex %d, %v; reference %d, %v", af, aerr, bf, berr)
	}
	al, aerr := a.LastIndex()
	bl, berr := b.LastIndex()
	if al != bl || (aerr == nil) != (berr == nil) {
		return fmt.Errorf("LastIndex %d, %v; reference %d, %v", al, aerr, bl, berr)
	}
	for i := uint64(0); i <= hi+1; i++ {
		var x, y raft.Log
		aerr, berr := a.GetLog(i, &x), b.GetLog(i, &y)
		if aerr != berr || (aerr == nil && !sameLog(&x, &y)) {
			return fmt.Errorf("GetLog(%d) = %+v, %v; reference %+v, %v", i, x, aerr, y, berr)
		}
	}
	for _, k := range stableKeys {
		av, aerr := a.Get([]byte(k))
		bv, berr := b.Get([]byte(k))
		if string(av) != string(bv) || (av == nil) != (bv == nil) || fmt.Sprint(aerr) != fmt.Sprint(berr) {
			return fmt.Errorf("Get(%q) = %q, %v; reference %q, %v", k, av, aerr, bv, berr)
		}
		an, aerr := a.GetUint64([]byte(k))
		bn, berr := b.GetUint64([]byte(k))
		if an != bn || fmt.Sprint(aerr) != fmt.Sprint(berr) {
			return fmt.Errorf("GetUint64(%q) = %d, %v; reference %d, %v", k, an, aerr, bn, berr)
		}
	}
	return nil
}

func runConformance(t *testing.T, ops []op, hi uint64) {
	t.Helper()
	s := newStore(t, Options{NoSync: true})
	ref := raft.NewInmemStore()
	if err := sameState(s, ref, hi); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	for i, o := range ops {
		if err, rerr := o.do(s), o.do(ref); err != nil || rerr != nil {
			t.Fatalf("op %d %s: %v; reference %v", i, o.name, err, rerr)
		}
		if err := sameState(s, ref, hi); err != nil {
			t.Fatalf("after op %d %s: %v", i, o.name, err)
		}
	}
}

var mixed = []*raft.Log{
	{Index: 1, Term: 1, Type: raft.LogNoop},
	{Index: 2, Term: 1, Type: raft.LogConfiguration, Data: []byte{}, Extensions: []byte("ext")},
	{Index: 3, Term: 1, Type: raft.LogBarrier, AppendedAt: time.Now()},
}

// TestConformance runs the operation sequences raft performs on both this
// store and raft.InmemStore and wants the same observable state after
// every operation.
func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		ops  []op
	}{
		{"first entry", []op{storeLog(1, 1)}},
		{"append in batches", []op{storeLogs(1, 10, 1), storeLogs(11, 74, 1), storeLog(75, 2)}},
		{"compact a prefix after a snapshot", []op{storeLogs(1, 50, 1), deleteRange(1, 40), storeLogs(51, 60, 2), deleteRange(41, 55)}},
		{"truncate a conflicting suffix, append the leader's", []op{storeLogs(1, 20, 1), deleteRange(15, 20), storeLogs(15, 22, 2)}},
		{"overwrite in place", []op{storeLogs(1, 5, 1), storeLogs(3, 5, 2)}},
		{"delete everything", []op{storeLogs(1, 5, 1), deleteRange(1, 5), storeLogs(6, 8, 2)}},
		{"empty batch", []op{op{"StoreLogs(nil)", func(s store) error { return s.StoreLogs(nil) }}}},
		{"entry fields kept", []op{op{"StoreLogs(mixed)", func(s store) error { return s.StoreLogs(mixed) }}}},
		{"stable values", []op{
			set("LastVoteCand", []byte("node-b")), setUint64("CurrentTerm", 3), setUint64("LastVoteTerm", 3),
			set("LastVoteCand", []byte("node-c")), setUint64("CurrentTerm", 4),
			set("other", []byte{}), set("other", nil), setUint64("other", 0), setUint64("LastVoteCand", 7),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runConformance(t, tc.ops, 110) })
	}
}

// TestConformanceRandom drives both stores through random raft-like
// histories: appends at the end, compaction of a prefix, truncation of a
// suffix and re-append with a higher term, and stable writes.
func TestConformanceRandom(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var ops []op
			first, last, term := uint64(1), uint64(0), uint64(1)
			for range 40 {
				switch rng.IntN(6) {
				case 0, 1, 2:
					n := uint64(1 + rng.IntN(64))
					ops = append(ops, storeLogs(last+1, last+n, term))
					last += n
				case 3:
					if last >= first {
						upTo := first + uint64(rng.IntN(int(last-first+1)))
						ops = append(ops, deleteRange(first, upTo))
						first = upTo + 1
						if first > last {
							last = upTo // empty: the next append continues after the snapshot
						}
					}
				case 4:
					if last >= first {
						from := first + uint64(rng.IntN(int(last-first+1)))
						term++
						ops = append(ops, deleteRange(from, last), storeLogs(from, last, term))
					}
				case 5:
					term++
					ops = append(ops, setUint64("CurrentTerm", term), set("LastVoteCand", fmt.Appendf(nil, "n%d", rng.IntN(3))))
				}
			}
			runConformance(t, ops, last)
		})
	}
}

// TestBoundsFollowStoredKeys pins down where this store differs from
// InmemStore, outside what raft does: FirstIndex and LastIndex are the
// smallest and largest index actually stored, where InmemStore moves
// remembered bounds (past a gap, or past a range deleted beyond either
// end, even to index-1 wrapped around).
func TestBoundsFollowStoredKeys(t *testing.T) {
	cases := []struct {
		name        string
		ops         []op
		first, last uint64
	}{
		{"delete beyond both ends", []op{storeLogs(5, 9, 1), deleteRange(0, 100)}, 0, 0},
		{"delete beyond the end", []op{storeLogs(5, 9, 1), deleteRange(20, 30)}, 5, 9},
		{"delete before the start", []op{storeLogs(5, 9, 1), deleteRange(1, 3)}, 5, 9},
		{"delete in the middle", []op{storeLogs(5, 9, 1), deleteRange(6, 8)}, 5, 9},
		{"min above max", []op{storeLogs(5, 9, 1), deleteRange(8, 6)}, 5, 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Options{NoSync: true})
			for _, o := range tc.ops {
				must(t, o.do(s))
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if first != tc.first || last != tc.last {
				t.Fatalf("first, last = %d, %d; want %d, %d", first, last, tc.first, tc.last)
			}
		})
	}
}

// TestGapsFollowStoredKeys: with a gap in the indexes (logs stored after
// a snapshot install), FirstIndex is the next index actually stored.
func TestGapsFollowStoredKeys(t *testing.T) {
	s := newStore(t, Options{NoSync: true})
	must(t, s.StoreLogs(entries(1, 3, 1)))
	must(t, s.StoreLogs(entries(10, 12, 2))) // after installing a snapshot at 9
	must(t, s.DeleteRange(1, 2))
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 3 || last != 12 {
		t.Fatalf("first, last = %d, %d; want 3, 12", first, last)
	}
	must(t, s.DeleteRange(3, 5))
	if first, _ = s.FirstIndex(); first != 10 {
		t.Fatalf("after deleting 3..5, FirstIndex = %d, want 10 (the next stored)", first)
	}
	var l raft.Log
	must(t, s.GetLog(first, &l))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
