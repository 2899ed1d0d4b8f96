package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker/store/segfile"
	"gantry/cluster/wire"
)

// snapshot copies the store's files at path as a crash would leave them:
// what the log holds, and bbolt as the last checkpoint left it.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), FileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	ns, err := segfile.List(segfile.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(segfile.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		raw, err := os.ReadFile(segfile.Path(segfile.Dir(path), n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segfile.Path(segfile.Dir(dst), n), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// newTestStore opens a store in a fresh directory, closed with the test.
func newTestStore(t *testing.T) (*store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	return st, path
}

// waitDone runs f with a done callback and waits for it.
func waitDone(t *testing.T, f func(done func(error))) {
	t.Helper()
	ch := make(chan error, 1)
	f(func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

// TestStoreLogReplayedAfterCrash: every write acknowledged by the store
// (its done called) is found after a crash that left it in the log only,
// with the deletes and trims among them applied in order; the log is gone
// once replayed, and a torn frame at the end (a write cut short) is
// passed over.
func TestStoreLogReplayedAfterCrash(t *testing.T) {
	st, path := newTestStore(t)
	l := newCopyLog(1000, st)
	for seq := uint64(1); seq <= 40; seq++ {
		waitDone(t, func(done func(error)) { st.put(seq, []byte(fmt.Sprint("m", seq)), done) })
	}
	st.trim(10)
	st.putCursor("peer-a", 33)
	st.putReceived("peer-b", 7, 99)
	st.putRetainedVersion("t/1", wire.Version{Counter: 5, Node: "n1"})
	var held []heldRec
	for i := range 6 {
		rec := copyRec{id: copyID{origin: "o", boot: 2, seq: uint64(i + 1)}, epoch: 1, msg: []byte(fmt.Sprint("c", i)), hold: true}
		waitDone(t, func(done func(error)) { l.add(4, []copyRec{rec}, done) })
		held = append(held, heldRec{id: rec.id, part: 4, key: uint64(i + 1)}) // keys start at 1
	}
	waitDone(t, func(done func(error)) { st.dropHeld(held[:2], false, done) }) // released
	waitDone(t, func(done func(error)) { st.dropHeld(held[2:3], true, done) }) // refused
	if ns, _ := segfile.List(segfile.Dir(path)); len(ns) == 0 {
		t.Fatal("nothing in the log: the test would not prove a replay")
	}

	crashed := snapshot(t, path)
	// A write cut short by the crash, after the last acknowledged one.
	ns, _ := segfile.List(segfile.Dir(crashed))
	f, err := os.OpenFile(segfile.Path(segfile.Dir(crashed), ns[len(ns)-1]), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, opPut, lbOutbox, 8})
	f.Close()

	re, err := openStore(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer re.close()
	if ns, _ := segfile.List(segfile.Dir(crashed)); len(ns) != 0 {
		t.Fatalf("segments %v left after the replay", ns)
	}
	base, entries := re.loadOutbox()
	if base != 10 || len(entries) != 30 || entries[0].seq != 11 || string(entries[29].msg) != "m40" {
		t.Fatalf("outbox after the crash: base %d, %d entries", base, len(entries))
	}
	if c := re.cursors()["peer-a"]; c != 33 {
		t.Fatalf("cursor %d, want 33", c)
	}
	if r := re.received()["peer-b"]; r != [2]uint64{7, 99} {
		t.Fatalf("received %v", r)
	}
	if v := re.retainedVersions()["t/1"]; v != (wire.Version{Counter: 5, Node: "n1"}) {
		t.Fatalf("retained version %v", v)
	}
	hs := re.loadHeld()
	if len(hs) != 3 || hs[0].id.seq != 4 || string(hs[2].enc) != "c5" {
		t.Fatalf("held after the crash: %+v", hs)
	}
	var copies []string
	newCopyLog(1000, re).records(4, 0, func(_ uint64, r copyRec) bool {
		copies = append(copies, string(r.msg))
		return true
	})
	if fmt.Sprint(copies) != "[c0 c1 c3 c4 c5]" {
		t.Fatalf("copies after the crash: %v (the refused c2 must be gone)", copies)
	}
}

// TestStoreLogCheckpoints: past checkpointBytes the log is applied to
// bbolt and its segments deleted while writes go on; a read of the copies
// sees every copy acknowledged before it.
func TestStoreLogCheckpoints(t *testing.T) {
	st, path := newTestStore(t)
	l := newCopyLog(1<<20, st)
	payload := bytes.Repeat([]byte("x"), 4096)
	n := checkpointBytes/len(payload) + 500
	for i := 0; i < n; i += 64 {
		var recs []copyRec
		for j := i; j < min(i+64, n); j++ {
			recs = append(recs, copyRec{id: copyID{origin: "o", boot: 1, seq: uint64(j + 1)}, msg: payload})
		}
		waitDone(t, func(done func(error)) { l.add(1, recs, done) })
	}
	count := 0
	l.records(1, 0, func(uint64, copyRec) bool { count++; return true })
	if count != n {
		t.Fatalf("%d copies read, %d written", count, n)
	}
	// The read settled the log: bbolt has every copy, and the segments
	// of the checkpoints are gone (at most the one being written stays).
	inBolt := 0
	st.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCopies).ForEach(func(k, v []byte) error {
			chunkRecords(k, v, func(uint64, []byte) bool { inBolt++; return true })
			return nil
		})
	})
	if inBolt != n {
		t.Fatalf("bbolt holds %d copies, %d written", inBolt, n)
	}
	if ns, _ := segfile.List(segfile.Dir(path)); len(ns) > 1 {
		t.Fatalf("segments %v left after checkpoints", ns)
	}
}

// TestStoreLogWriteFailureStartsNewSegment: a frame that could not be
// written is cut off and the next write starts a new segment, so that a
// replay finds every write acknowledged after it.
func TestStoreLogWriteFailureStartsNewSegment(t *testing.T) {
	dir := t.TempDir()
	l := segLog{dir: dir}
	var f frame
	frameOf := func(v string) []byte {
		f.b = f.b[:0]
		start := f.begin()
		f.op(opPut, lbOutbox, []byte("k"), []byte(v))
		return append([]byte(nil), f.end(start)...)
	}
	if err := l.append(frameOf("a")); err != nil {
		t.Fatal(err)
	}
	l.failNext.Store(true) // the next write fails, as on a disk gone bad
	if err := l.append(frameOf("lost")); err == nil {
		t.Fatal("a write to a closed segment succeeded")
	}
	if err := l.append(frameOf("b")); err != nil {
		t.Fatal(err)
	}
	l.rotate()
	ns, _ := segfile.List(dir)
	if len(ns) != 2 {
		t.Fatalf("segments %v, want the failed one ended and a new one", ns)
	}
	var got []string
	for _, n := range ns {
		frames, _, _, err := readLogSegment(segfile.Path(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range frames {
			got = append(got, string(fr[len(fr)-1:]))
		}
	}
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("replayed %v", got)
	}
}

// TestStoreLogApplyMatchesInOrder: applying frames the cheap way (what a
// later operation overrides left out, trims first, the rest in key order)
// leaves bbolt exactly as applying every operation in order does, over
// random histories of puts, deletes, trims and raised maxima on keys
// that collide, and of the copies' chunks put, trimmed and dropped from as
// their writer does (each chunk put once, of keys no other chunk has; a
// drop of a record of a chunk put before), starting from a state earlier
// checkpoints left. For the copies "exactly" is per record above each
// partition's highest trim: a chunk across a trim stays whole, so which
// records below it are left depends on the order of the trims and drops
// around it (they are accepted copies older than the bound, which readers
// pass over); a dropped record is never left, anywhere.
func TestStoreLogApplyMatchesInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	key := func() (byte, []byte) {
		b := byte(lbOutbox + rng.IntN(2)*(lbQoS2-lbOutbox))
		var k []byte
		if b == lbQoS2 {
			k = binary.BigEndian.AppendUint32(k, uint32(rng.IntN(3)))
		}
		return b, binary.BigEndian.AppendUint64(k, uint64(rng.IntN(40)))
	}
	// chunkOp is one operation on the copies: a new chunk of partition
	// p (slots of 8 keys, each used once, a few records in each), a drop
	// of one of the records put so far, or a trim.
	var slots [3]uint64
	var written [][]byte         // copy keys of the records put
	var trimmed [3]uint64        // the highest trim of each partition
	dropped := map[string]bool{} // copy keys dropped
	chunkOp := func(round, i int) logOp {
		p := uint32(rng.IntN(3))
		switch r := rng.IntN(10); {
		case r < 5 || len(written) == 0:
			first := slots[p]*8 + uint64(rng.IntN(3))
			slots[p]++
			var recs []keyedCopy
			for key := first; key < (slots[p])*8; key += 1 + uint64(rng.IntN(3)) {
				recs = append(recs, keyedCopy{key: key, r: &copyRec{id: copyID{origin: "o", boot: 1, seq: key}, msg: []byte(fmt.Sprint(round, "-", i))}})
				written = append(written, copyKey(p, key))
			}
			var op logOp
			appendChunks(recs, p, nil, func(k, v []byte) {
				op = logOp{kind: opPut, bucket: lbCopies, key: slices.Clone(k), val: slices.Clone(v)}
			})
			return op
		case r < 8:
			ck := written[rng.IntN(len(written))]
			dropped[string(ck)] = true
			return logOp{kind: opDrop, bucket: lbCopies, key: ck}
		default:
			up := max(slots[p]*8, 12) - uint64(rng.IntN(12))
			trimmed[p] = max(trimmed[p], up)
			return logOp{kind: opTrim, bucket: lbCopies, key: binary.BigEndian.AppendUint32(nil, p), val: binary.BigEndian.AppendUint64(nil, up)}
		}
	}
	inOrder := func(tx *bolt.Tx, ops []logOp) error {
		for _, op := range ops {
			if err := op.apply(tx.Bucket(logBuckets[op.bucket])); err != nil {
				return err
			}
		}
		return nil
	}
	dump := func(db *bolt.DB) string {
		var out []string
		db.View(func(tx *bolt.Tx) error {
			for _, name := range logBuckets {
				if tx.Bucket(name) == nil {
					continue // the legacy copies: none here
				}
				tx.Bucket(name).ForEach(func(k, v []byte) error {
					if bytes.Equal(k, keyBoot) {
						return nil // each store's own
					}
					if bytes.Equal(name, bucketCopies) {
						p := binary.BigEndian.Uint32(k)
						chunkRecords(k, v, func(key uint64, enc []byte) bool {
							if dropped[string(copyKey(p, key))] {
								t.Errorf("dropped copy %d/%d left", p, key)
							}
							if key > trimmed[p] {
								out = append(out, fmt.Sprintf("%s/%d/%d=%x", name, p, key, enc))
							}
							return true
						})
						return nil
					}
					out = append(out, fmt.Sprintf("%s/%x=%x", name, k, v))
					return nil
				})
			}
			return nil
		})
		return strings.Join(out, "\n")
	}
	open := func() *bolt.DB {
		path := filepath.Join(t.TempDir(), FileName)
		st, err := openStore(path) // creates the buckets
		if err != nil {
			t.Fatal(err)
		}
		st.close()
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	for round := range 100 {
		var before, ops []logOp
		slots, written, trimmed = [3]uint64{}, nil, [3]uint64{}
		clear(dropped)
		for i := range 120 {
			b, k := key()
			op := logOp{bucket: b, key: k, val: []byte(fmt.Sprint(round, "-", i))}
			switch r := rng.IntN(13); {
			case r >= 10:
				op = chunkOp(round, i)
			case r < 5:
				op.kind = opPut
			case r < 7:
				op.kind, op.val = opDelete, nil
			case r < 9:
				op.kind, op.key, op.val = opTrim, k[:len(k)-8], binary.BigEndian.AppendUint64(nil, uint64(rng.IntN(40)))
			default:
				op.kind, op.bucket, op.key, op.val = opPutMax, lbMeta, keyBase, binary.BigEndian.AppendUint64(nil, uint64(rng.IntN(100)))
			}
			if i < 40 {
				before = append(before, op) // what earlier checkpoints left
				continue
			}
			ops = append(ops, op)
		}
		// The frames: the operations cut in a few frames.
		var buf frame
		for i := 0; i < len(ops); {
			start := buf.begin()
			for j := 0; j < 1+rng.IntN(10) && i < len(ops); j, i = j+1, i+1 {
				buf.op(ops[i].kind, ops[i].bucket, ops[i].key, ops[i].val)
			}
			buf.end(start)
		}
		want, got := open(), open()
		for _, db := range []*bolt.DB{want, got} {
			if err := db.Update(func(tx *bolt.Tx) error { return inOrder(tx, before) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := want.Update(func(tx *bolt.Tx) error { return inOrder(tx, ops) }); err != nil {
			t.Fatal(err)
		}
		if err := got.Update(func(tx *bolt.Tx) error { return applyFrames(tx, buf.b) }); err != nil {
			t.Fatal(err)
		}
		if w, g := dump(want), dump(got); w != g {
			t.Fatalf("round %d: applied cheaply:\n%s\nin order:\n%s", round, g, w)
		}
	}
}

// BenchmarkStoreLogCheckpoint is one checkpoint of a quorum load's log as
// an origin that is also a copy writes it (encodeGroup, as its writer
// does): per message a stream record (trimmed a few groups later), its own
// copy in one of 16 partitions, and on another node's copies a held copy
// released the group after.
func BenchmarkStoreLogCheckpoint(b *testing.B) {
	const msgs, group, parts = 20000, 64, 16
	enc := &store{}
	msg := bytes.Repeat([]byte("m"), 60)
	for g := 0; g < msgs/group; g++ {
		var records []pendingRecord
		var copies []pendingCopies
		var heldGone [][]byte
		for i := g * group; i < (g+1)*group; i++ {
			seq := uint64(i + 1)
			records = append(records, pendingRecord{seq: seq, msg: msg})
			own := copyRec{id: copyID{origin: "broker-1", boot: 1, seq: seq}, msg: msg}
			held := copyRec{id: copyID{origin: "broker-2", boot: 1, seq: seq}, msg: msg, hold: true}
			// Keys per partition: the group's records of each are
			// consecutive, two per message (its own and the other's).
			key := uint64(g*group/parts*2 + (i-g*group)/parts*2 + 1)
			copies = append(copies, pendingCopies{p: uint32(i % parts), keys: []uint64{key, key + 1}, recs: []copyRec{own, held}})
			if g > 0 {
				heldGone = append(heldGone, heldKey(copyID{origin: "broker-2", boot: 1, seq: seq - group}))
			}
		}
		var trimTo uint64
		if g > 2 {
			trimTo = uint64((g - 2) * group)
		}
		start := enc.frames.begin()
		enc.encodeGroup(records, trimTo, nil, nil, copies, heldGone, nil, 0, nil)
		enc.frames.end(start)
	}
	f := enc.frames
	b.ReportAllocs()
	for i := range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), fmt.Sprint(i, FileName))
		st, err := openStore(path) // the buckets, empty
		if err != nil {
			b.Fatal(err)
		}
		st.close()
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := db.Update(func(tx *bolt.Tx) error { return applyFrames(tx, f.b) }); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/msgs, "ns/msg")
}

// TestStoreLogCheckpointFailure: while bbolt refuses checkpoints (here a
// bucket gone, for a full disk or a map that cannot grow), a read of the
// copies says it cannot be served whole instead of missing acknowledged
// writes, the checkpoint is tried again at most once per ckptRetry, not
// in a loop, and once bbolt takes it again the read is whole.
func TestStoreLogCheckpointFailure(t *testing.T) {
	st, _ := newTestStore(t)
	l := newCopyLog(1<<20, st)
	if err := st.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketQoS2) }); err != nil {
		t.Fatal(err)
	}
	rec := copyRec{id: copyID{origin: "o", boot: 1, seq: 1}, msg: []byte("m"), pid: 7, client: "c", sum: 1}
	waitDone(t, func(done func(error)) { l.add(1, []copyRec{rec}, done) })
	if err := l.records(1, 0, func(uint64, copyRec) bool { return true }); !errors.Is(err, errNotApplied) {
		t.Fatalf("a read while bbolt refuses the checkpoint: %v, want errNotApplied", err)
	}
	start := time.Now()
	for range 3 {
		l.records(1, 0, func(uint64, copyRec) bool { return true })
	}
	if n := st.ckptFailures.Load(); n > 1+uint64(time.Since(start)/ckptRetry)+1 {
		t.Fatalf("%d checkpoint failures within %v: retried in a loop", n, time.Since(start))
	}
	if err := st.db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketQoS2); return err }); err != nil {
		t.Fatal(err)
	}
	n := 0
	deadline := time.Now().Add(10 * ckptRetry)
	for {
		err := l.records(1, 0, func(uint64, copyRec) bool { n++; return true })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read still fails once bbolt takes the checkpoint: %v", err)
		}
		time.Sleep(ckptRetry / 10) // the retry is timed: nothing to wait on
	}
	if n != 1 {
		t.Fatalf("%d copies read once the log was applied, want 1", n)
	}
}
