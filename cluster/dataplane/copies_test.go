package dataplane

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"gantry/broker/store/segfile"
)

// TestCopyLogStoredCompactedReloaded: records kept per partition in
// order, compacted beyond the bound (the oldest tenth), and found again
// after a reopen, partitions apart (the last one included).
func TestCopyLogStoredCompactedReloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	l := newCopyLog(100, st)
	parts := []uint32{0, 7, ^uint32(0)}
	for _, p := range parts {
		for i := range 150 {
			done := make(chan error, 1)
			rec := copyRec{id: copyID{origin: "n", boot: 1, seq: uint64(i + 1)}, at: int64(i), epoch: 3, msg: []byte(fmt.Sprint(p, "-", i))}
			if !l.add(p, []copyRec{rec}, func(err error) { done <- err }) {
				t.Fatal("a stored copy log did not wait for the store")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(l *copyLog, when string) {
		t.Helper()
		for _, p := range parts {
			var got []string
			l.records(p, 0, func(_ uint64, r copyRec) bool {
				got = append(got, string(r.msg))
				return true
			})
			// 150 written, bound 100: each time past it the oldest 11 go
			// (at 101, then every 11 more): 95 left, the newest.
			if len(got) != 95 || got[0] != fmt.Sprint(p, "-", 55) || got[len(got)-1] != fmt.Sprint(p, "-", 149) {
				t.Fatalf("%s: partition %d holds %d records, %q … %q", when, p, len(got), got[0], got[len(got)-1])
			}
		}
		if n := l.counts()[7]; n != 95 {
			t.Fatalf("%s: counts says %d for partition 7", when, n)
		}
	}
	check(l, "written")
	st.close()
	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	check(newCopyLog(100, st), "reopened")
}

// TestCopyLogQoS2Remembered: a QoS 2 message is found by client, packet
// identifier and content, not by its identifier alone.
func TestCopyLogQoS2Remembered(t *testing.T) {
	l := newCopyLog(1000, nil)
	sum := qos2Sum("t", []byte("x"))
	l.add(3, []copyRec{{id: copyID{origin: "n", seq: 1}, msg: []byte("m"), pid: 9, client: "c", sum: sum}}, nil)
	if _, ok := l.acceptedQoS2(3, "c", 9, sum); !ok {
		t.Fatal("the QoS 2 message written is not found")
	}
	found := func(p uint32, client string, sum uint64) bool { _, ok := l.acceptedQoS2(p, client, 9, sum); return ok }
	for name, ok := range map[string]bool{
		"other content":   found(3, "c", qos2Sum("t", []byte("y"))),
		"other client":    found(3, "d", sum),
		"other partition": found(4, "c", sum),
	} {
		if ok {
			t.Errorf("%s taken for the message written", name)
		}
	}
}

// TestCopyLogQoS2RememberedAcrossRestart: with a store, the QoS 2
// messages a copy holds are recognised after the node restarts (cleanly,
// or after a crash that left them in the log), with the identity they
// were written under; one refused, or trimmed from the copy, is not.
func TestCopyLogQoS2RememberedAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	l := newCopyLog(20, st)
	sum := func(i int) uint64 { return qos2Sum("t", []byte(fmt.Sprint(i))) }
	for _, p := range []uint32{0, 5} {
		for i := range 30 {
			rec := copyRec{id: copyID{origin: "n", boot: 3, seq: uint64(100*int(p) + i + 1)}, at: int64(i), msg: []byte("m"),
				pid: uint16(i + 1), client: fmt.Sprint("c", p), sum: sum(i), hold: true}
			waitDone(t, func(done func(error)) { l.add(p, []copyRec{rec}, done) })
		}
	}
	// The newest of partition 5 was refused.
	waitDone(t, func(done func(error)) {
		l.dropRefused([]heldRec{{id: copyID{origin: "n", boot: 3, seq: 530}, part: 5, key: 30, pid: 30, client: "c5"}}, done)
	})
	check := func(l *copyLog, when string) {
		t.Helper()
		for _, p := range []uint32{0, 5} {
			client := fmt.Sprint("c", p)
			// 30 written with a bound of 20: those trimmed (below first)
			// are forgotten.
			first := l.parts[p].first
			for i := range 30 {
				seen, ok := l.acceptedQoS2(p, client, uint16(i+1), sum(i))
				want := uint64(i+1) >= first && !(p == 5 && i == 29)
				if ok != want {
					t.Fatalf("%s: partition %d, packet id %d (key %d, first %d): recognised %v, want %v", when, p, i+1, i+1, first, ok, want)
				}
				if ok && seen.id != (copyID{origin: "n", boot: 3, seq: uint64(100*int(p) + i + 1)}) {
					t.Fatalf("%s: packet id %d recognised as %+v", when, i+1, seen.id)
				}
			}
		}
	}
	crashed := snapshot(t, path)
	st.close()
	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	check(newCopyLog(20, st), "restarted")
	cst, err := openStore(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer cst.close()
	check(newCopyLog(20, cst), "after a crash")
}

// TestCopiesOfAnEarlierBuildKept: a store an earlier build wrote (a copy
// per key in bucket "copies", and a version 1 log segment with more of
// them and a trim) opens with every copy it held, now in chunks, and the
// old bucket gone.
func TestCopiesOfAnEarlierBuildKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(seq uint64) copyRec {
		return copyRec{id: copyID{origin: "broker-1", boot: 7, seq: seq}, at: int64(seq), epoch: 2, msg: []byte(fmt.Sprint("m", seq))}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketLegacyCopies)
		for key := uint64(1); key <= 5 && err == nil; key++ {
			r := rec(key)
			err = b.Put(copyKey(3, key), appendCopy(nil, &r))
		}
		return err
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The earlier build's log: copies 6 and 7, and a trim of 1 and 2.
	var f frame
	start := f.begin()
	for key := uint64(6); key <= 7; key++ {
		r := rec(key)
		f.op(opPut, lbCopies, copyKey(3, key), appendCopy(nil, &r))
	}
	f.op(opTrim, lbCopies, binary.BigEndian.AppendUint32(nil, 3), binary.BigEndian.AppendUint64(nil, 2))
	f.end(start)
	dir := segfile.Dir(path)
	seg, err := segfile.Create(dir, 1, binary.BigEndian.AppendUint32([]byte(logMagic), 1))
	if err == nil {
		_, err = seg.WriteAt(f.b, logHeaderSize)
		seg.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if got := st.copyRanges()[3]; got != [2]uint64{3, 7} {
		t.Fatalf("partition 3 holds keys %v, want 3 to 7", got)
	}
	l := newCopyLog(1000, st)
	var got []string
	if err := l.records(3, 0, func(key uint64, r copyRec) bool {
		if want := rec(key); r.id != want.id || r.at != want.at || r.epoch != want.epoch || string(r.msg) != string(want.msg) {
			t.Errorf("copy %d read as %+v, written as %+v", key, r, want)
		}
		got = append(got, fmt.Sprint(key))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[3 4 5 6 7]" {
		t.Fatalf("copies read %v, want 3 to 7", got)
	}
	st.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketLegacyCopies) != nil {
			t.Error("the earlier build's bucket is still there")
		}
		return nil
	})
}

// TestDequeKeepsOrder: the deque (the outbox's records, the in-memory
// copy log) keeps its elements in order across growth and dropping the
// oldest, and reuses its chunks.
func TestDequeKeepsOrder(t *testing.T) {
	var r deque[copyRec]
	first, next := uint64(1), uint64(1)
	for round := range 50 {
		for range 37 + round*7 {
			r.push(copyRec{key: next})
			next++
		}
		drop := r.len() / 3
		r.dropOldest(drop)
		first += uint64(drop)
		if r.len() != int(next-first) {
			t.Fatalf("round %d: %d records, want %d", round, r.len(), next-first)
		}
		for i := range r.len() {
			if got := r.at(i).key; got != first+uint64(i) {
				t.Fatalf("round %d: record %d has key %d, want %d", round, i, got, first+uint64(i))
			}
		}
	}
	if n := len(r.chunks) + len(r.spare); n*dequeChunk > 4*r.len()+2*dequeChunk {
		t.Fatalf("%d chunks for %d records", n, r.len())
	}
}

// TestQoS2SumIsFNV: the QoS 2 index's sum is FNV-1a of topic, a zero byte
// and payload, as stored by earlier builds (the qos2 bucket keeps it).
func TestQoS2SumIsFNV(t *testing.T) {
	for _, c := range []struct{ topic, payload string }{{"", ""}, {"a/b", "payload"}, {"t", "\x00\xff"}} {
		h := fnv.New64a()
		h.Write([]byte(c.topic))
		h.Write([]byte{0})
		h.Write([]byte(c.payload))
		if got, want := qos2Sum(c.topic, []byte(c.payload)), h.Sum64(); got != want {
			t.Errorf("qos2Sum(%q, %q) = %x, want %x", c.topic, c.payload, got, want)
		}
		if got, want := qos2Sum([]byte(c.topic), []byte(c.payload)), h.Sum64(); got != want {
			t.Errorf("qos2Sum of bytes (%q, %q) = %x, want %x", c.topic, c.payload, got, want)
		}
	}
}

// TestFrameCopiesByPart: a frame's copies grouped by partition keep
// their frame order within each partition, and each add index finds its
// record.
func TestFrameCopiesByPart(t *testing.T) {
	var fc frameCopies
	parts := []uint32{3, 1, 3, 3, 7, 1, 3}
	for i, p := range parts {
		if got := fc.add(p, copyRec{key: uint64(i), msg: fc.keep([]byte{byte(i)}, 10)}, 10); got != i {
			t.Fatalf("add %d returned %d", i, got)
		}
	}
	groups, pos := fc.byPart()
	var got []string
	for _, g := range groups {
		var keys []uint64
		for _, r := range g.recs {
			keys = append(keys, r.key)
		}
		got = append(got, fmt.Sprint(g.part, keys))
	}
	if want := "[3 [0 2 3 6] 1 [1 5] 7 [4]]"; fmt.Sprint(got) != want {
		t.Fatalf("groups %v, want %s", got, want)
	}
	for i := range parts {
		if r := fc.at(pos, i); r.key != uint64(i) || r.msg[0] != byte(i) {
			t.Fatalf("at(%d) is record %d (message %v)", i, r.key, r.msg)
		}
	}
	var one frameCopies
	one.add(5, copyRec{key: 9}, 0)
	if groups, pos := one.byPart(); len(groups) != 1 || pos != nil || one.at(pos, 0).key != 9 {
		t.Fatalf("one partition: %v %v", groups, pos)
	}
}
