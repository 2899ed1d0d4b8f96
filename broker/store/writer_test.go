package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"gantry/broker"
	"gantry/broker/store"
)

// TestConcurrentPersistBatches has many goroutines persist at once and
// proves group commit: far fewer transactions than calls, every done
// called exactly once, every op on disk.
func TestConcurrentPersistBatches(t *testing.T) {
	const goroutines, perGoroutine = 64, 200
	s := openStore(t, dbPath(t), store.Options{})
	var calls [goroutines][perGoroutine]atomic.Int32
	var failed atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			id := fmt.Sprintf("client-%d", g)
			s.Persist([]broker.PersistOp{putSession(&broker.SessionRecord{ClientID: id})}, nil)
			for i := range perGoroutine {
				e := entryRecord(uint64(i), plainMessage("t", "payload"))
				s.Persist([]broker.PersistOp{putEntry(id, e)}, func(err error) {
					if err != nil {
						failed.Add(1)
					}
					calls[g][i].Add(1)
				})
			}
		})
	}
	wg.Wait()
	_, got := reload(t, s) // Close waits for every done
	for g := range calls {
		for i := range calls[g] {
			if n := calls[g][i].Load(); n != 1 {
				t.Fatalf("done of goroutine %d call %d called %d times", g, i, n)
			}
		}
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d calls failed", n)
	}
	st := s.Stats()
	t.Logf("%d ops in %d commits, p99 %v", st.Ops, st.Commits, st.P99())
	if st.Ops != goroutines*(perGoroutine+1) || st.Commits >= 1000 {
		t.Fatalf("%d ops in %d commits, want %d ops in < 1000 commits", st.Ops, st.Commits, goroutines*(perGoroutine+1))
	}
	if len(got.Sessions) != goroutines {
		t.Fatalf("%d sessions, want %d", len(got.Sessions), goroutines)
	}
	for _, ps := range got.Sessions {
		if len(ps.Entries) != perGoroutine {
			t.Fatalf("session %q: %d entries, want %d", ps.ClientID, len(ps.Entries), perGoroutine)
		}
		for i, e := range ps.Entries {
			if e.Seq != uint64(i) {
				t.Fatalf("session %q: entry %d has seq %d", ps.ClientID, i, e.Seq)
			}
		}
	}
}

// TestWriteFailure injects a failed transaction: its calls get the error,
// nothing of it reaches the disk, and the next batch succeeds.
func TestWriteFailure(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{})
	mustPersist(t, s, putRetained(plainMessage("before", "")))
	diskFull := errors.New("no space left on device")
	var faults atomic.Int32
	store.SetWriteFault(s, func() error {
		if faults.Add(1) == 1 {
			return diskFull
		}
		return nil
	})
	err := persist(t, s, putRetained(plainMessage("lost", "")), delRetained("before"))
	if !errors.Is(err, store.ErrWriteFailed) || !errors.Is(err, diskFull) {
		t.Fatalf("done(%v), want ErrWriteFailed wrapping the cause", err)
	}
	if !strings.HasPrefix(err.Error(), "store: write failed: ") {
		t.Fatalf("error %q, want prefix %q", err, "store: write failed: ")
	}
	mustPersist(t, s, putRetained(plainMessage("after", "")))
	st := s.Stats()
	if st.FailedWrites != 1 || st.FailedOps != 2 || st.Commits != 2 {
		t.Fatalf("stats %+v, want 1 failed write, 2 failed ops, 2 commits", st)
	}
	_, got := reload(t, s)
	var topics []string
	for _, m := range got.Retained {
		topics = append(topics, m.Topic)
	}
	if strings.Join(topics, ",") != "after,before" {
		t.Fatalf("retained %q, want [after before]", topics)
	}
}

// TestDiskFull fills a size-capped file: bbolt itself fails the
// transaction, which rolls back, and smaller writes go on succeeding.
func TestDiskFull(t *testing.T) {
	s := openStore(t, dbPath(t), store.WithMaxSize(store.Options{}, 1<<20))
	mustPersist(t, s, putSession(&broker.SessionRecord{ClientID: "c"}))
	var big []broker.PersistOp
	for i := range 2048 { // 2 MiB of payload
		big = append(big, putEntry("c", entryRecord(uint64(i), plainMessage("t", strings.Repeat("x", 1024)))))
	}
	err := persist(t, s, big...)
	if !errors.Is(err, store.ErrWriteFailed) || !errors.Is(err, berrors.ErrMaxSizeReached) {
		t.Fatalf("done(%v), want ErrWriteFailed wrapping bbolt's ErrMaxSizeReached", err)
	}
	mustPersist(t, s, putEntry("c", entryRecord(5000, plainMessage("t", "small"))))
	_, got := reload(t, s)
	if n := len(got.Sessions[0].Entries); n != 1 || got.Sessions[0].Entries[0].Seq != 5000 {
		t.Fatalf("entries %+v, want only seq 5000", got.Sessions[0].Entries)
	}
}

// TestBackpressure blocks the writer inside a transaction and checks that
// Persist blocks once the queue is over MaxPendingOps, and resumes when
// the writer takes the queue.
func TestBackpressure(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{MaxPendingOps: 4})
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	store.SetWriteFault(s, func() error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	done := make(chan error, 3)
	report := func(err error) { done <- err }
	s.Persist([]broker.PersistOp{putQoS2("c", 1)}, report)
	wait(t, entered) // the writer holds the first call in its transaction
	s.Persist([]broker.PersistOp{putQoS2("c", 2), putQoS2("c", 3), putQoS2("c", 4), putQoS2("c", 5)}, report)
	returned := make(chan struct{})
	go func() {
		s.Persist([]broker.PersistOp{putQoS2("c", 6)}, report)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("Persist returned with 4 ops queued and MaxPendingOps 4")
	case <-time.After(50 * time.Millisecond):
	}
	if p := s.Stats().Pending; p != 4 {
		t.Fatalf("Pending %d, want 4", p)
	}
	close(release)
	wait(t, returned)
	for range 3 {
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoneMayPersist calls Persist from done callbacks under backpressure:
// the writer must not deadlock on its own callbacks.
func TestDoneMayPersist(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{MaxPendingOps: 1})
	const depth = 200
	finished := make(chan struct{})
	var next func(i int) func(error)
	next = func(i int) func(error) {
		return func(err error) {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			if i == depth {
				close(finished)
				return
			}
			s.Persist([]broker.PersistOp{putQoS2("c", uint16(i)), putQoS2("d", uint16(i))}, next(i+1))
		}
	}
	for range 8 { // keep the queue full meanwhile
		go s.Persist([]broker.PersistOp{putQoS2("e", 1), putQoS2("e", 2)}, nil)
	}
	s.Persist([]broker.PersistOp{putQoS2("c", 0)}, next(1))
	wait(t, finished)
}

// TestBarrier: Persist with no ops is a barrier: its done comes after
// every earlier call's.
func TestBarrier(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{})
	var order []int
	var mu sync.Mutex
	record := func(i int) func(error) {
		return func(error) { mu.Lock(); order = append(order, i); mu.Unlock() }
	}
	for i := range 10 {
		s.Persist([]broker.PersistOp{putQoS2("c", uint16(i))}, record(i))
	}
	ch := make(chan error, 1)
	s.Persist(nil, func(err error) { ch <- err })
	if err := wait(t, ch); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 10 {
		t.Fatalf("barrier done before %d of 10 earlier calls", 10-len(order))
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("done order %v, want submission order", order)
		}
	}
}

func TestStatsQuantile(t *testing.T) {
	bounds := store.LatencyBounds()
	counts := make([]uint64, len(bounds)+1)
	counts[0], counts[3], counts[len(bounds)] = 98, 1, 1
	st := store.Stats{LatencyCounts: counts}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, bounds[0]},
		{0.98, bounds[0]},
		{0.99, bounds[3]},
		{1, 2 * bounds[len(bounds)-1]},
	}
	for _, tt := range tests {
		if got := st.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := (store.Stats{}).P99(); got != 0 {
		t.Errorf("P99 of no commits = %v, want 0", got)
	}
}

// BenchmarkPersistGroupCommit persists one queued entry per Persist call
// from parallel goroutines, with fsync. "pipelined" goroutines do not wait
// for done (a publisher with many messages in flight: throughput is the
// writer's); "wait" goroutines wait for each done (one message in flight
// per client, 32×GOMAXPROCS clients: throughput is bound by how many
// calls each fsync carries).
func BenchmarkPersistGroupCommit(b *testing.B) {
	for _, size := range []int{16, 1024} {
		for _, waitEach := range []bool{false, true} {
			mode := "pipelined"
			if waitEach {
				mode = "wait"
			}
			b.Run(fmt.Sprintf("payload=%dB/%s", size, mode), func(b *testing.B) {
				benchPersist(b, size, waitEach)
			})
		}
	}
}

func benchPersist(b *testing.B, size int, waitEach bool) {
	s, err := store.Open(filepath.Join(b.TempDir(), "gantry.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msg := &broker.Message{Topic: "plant/line1/press/temperature", Payload: bytes.Repeat([]byte("x"), size), QoS: 1, ClientID: "publisher"}
	var pending sync.WaitGroup
	var clients atomic.Uint64
	if waitEach {
		b.SetParallelism(32)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("client-%d", clients.Add(1))
		done := make(chan error, 1)
		notify := func(err error) { done <- err }
		release := func(error) { pending.Done() }
		for seq := uint64(1); pb.Next(); seq++ {
			e := &broker.EntryRecord{Seq: seq, Msg: msg, QoS: 1}
			ops := []broker.PersistOp{{Kind: broker.PersistEntry, ClientID: id, Entry: e}}
			if waitEach {
				s.Persist(ops, notify)
				if err := <-done; err != nil {
					b.Error(err)
				}
				continue
			}
			pending.Add(1)
			s.Persist(ops, release)
		}
	})
	pending.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(st.Ops)/float64(max(st.Commits, 1)), "ops/commit")
	b.ReportMetric(float64(st.P99().Microseconds()), "p99-commit-µs")
}

// A queue growing in group commits fills the entries' pages: appended
// entries split full pages off, not half-full ones (bbolt's default),
// so the live data is about the records' size, not twice it. Measured:
// 167 B per 16-byte message at the default, 84 B with the setting, 47 B
// with entries in chunks (written by the checkpoint at Close here).
func TestQueuedEntriesFillPages(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "gantry.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := &broker.Message{Topic: "bench/p17/t", Payload: make([]byte, 16), QoS: 1, ClientID: "p17"}
	const batches, perBatch = 40, 500
	seq := uint64(0)
	before, _ := s.Usage()
	for range batches {
		done := make(chan error, 1)
		for range perBatch {
			seq++
			e := &broker.EntryRecord{Seq: seq, Msg: msg, QoS: 1}
			s.Persist([]broker.PersistOp{{Kind: broker.PersistEntry, ClientID: "durable-sub", Entry: e}}, nil)
		}
		s.Persist(nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s, _ = reload(t, s) // Close checkpoints the log into the file
	u, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	perEntry := (u.LiveBytes - before.LiveBytes) / int64(seq)
	t.Logf("%d entries: %d live bytes each", seq, perEntry)
	if perEntry > 120 {
		t.Fatalf("%d live bytes per queued 16-byte message, want under 120 (pages filled)", perEntry)
	}
}
