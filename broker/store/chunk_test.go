package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
	"gantry/broker/store"
)

// modelEntry is what a queue entry should load as.
type modelEntry struct {
	state uint8
	pid   uint16
}

// TestChunksAgainstModel runs random entry puts, state changes, deletes
// and session deletes (after which a client's seqs start again at 1, as a
// new session's do) against a model, with checkpoints of random sizes and
// restarts in between, and compares every Load with the model: entries a
// checkpoint wrote as chunks, edited later, and entries still in the log
// load alike.
func TestChunksAgainstModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			testChunksAgainstModel(t, rand.New(rand.NewPCG(seed, seed)))
		})
	}
}

func testChunksAgainstModel(t *testing.T, rng *rand.Rand) {
	path := dbPath(t)
	opts := func() store.Options {
		return store.Options{CheckpointBytes: 1 << (10 + rng.IntN(8)), CheckpointInterval: time.Duration(1+rng.IntN(20)) * time.Millisecond}
	}
	s := openStore(t, path, opts())
	clients := []string{"a", "b", "c"}
	model := map[string]map[uint64]modelEntry{}
	next := map[string]uint64{}
	m := plainMessage("t", "payload")
	for _, id := range clients {
		mustPersist(t, s, putSession(sessionRecord(id)))
		model[id], next[id] = map[uint64]modelEntry{}, 1
	}
	randomEntry := func(id string) (uint64, bool) {
		if len(model[id]) == 0 {
			return 0, false
		}
		keys := make([]uint64, 0, len(model[id]))
		for k := range model[id] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys[rng.IntN(len(keys))], true
	}
	for step := range 6000 {
		id := clients[rng.IntN(len(clients))]
		var ops []broker.PersistOp
		for range 1 + rng.IntN(8) {
			switch r := rng.IntN(100); {
			case r < 55:
				seq := next[id]
				next[id]++
				ops = append(ops, putEntry(id, entryRecord(seq, m)))
				model[id][seq] = modelEntry{}
			case r < 75:
				if seq, ok := randomEntry(id); ok {
					st, pid := uint8(1+rng.IntN(2)), uint16(1+rng.IntN(60000))
					ops = append(ops, entryState(id, seq, st, pid))
					model[id][seq] = modelEntry{st, pid}
				}
			case r < 99:
				if seq, ok := randomEntry(id); ok {
					ops = append(ops, delEntry(id, seq))
					delete(model[id], seq)
				}
			default:
				ops = append(ops, delSession(id), putSession(sessionRecord(id)))
				model[id], next[id] = map[uint64]modelEntry{}, 1
			}
		}
		if len(ops) > 0 {
			if rng.IntN(20) == 0 {
				mustPersist(t, s, ops...)
			} else {
				s.Persist(ops, func(err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
		}
		if step%1500 == 1499 {
			var st *broker.PersistedState
			s, st = reload(t, s)
			checkModel(t, step, st, model)
			s.Close()
			s = openStore(t, path, opts())
		}
	}
	_, st := reload(t, s)
	checkModel(t, -1, st, model)
}

func checkModel(t *testing.T, step int, st *broker.PersistedState, model map[string]map[uint64]modelEntry) {
	t.Helper()
	n := 0
	for _, ps := range st.Sessions {
		want := model[ps.ClientID]
		if len(ps.Entries) != len(want) {
			var extra []string
			for _, e := range ps.Entries {
				if w, ok := want[e.Seq]; !ok || e.State != w.state {
					extra = append(extra, fmt.Sprintf("%d(state %d, in model %v)", e.Seq, e.State, ok))
				}
			}
			t.Fatalf("step %d: client %s: %d entries, want %d; not as the model: %v", step, ps.ClientID, len(ps.Entries), len(want), extra)
		}
		for i, e := range ps.Entries {
			w, ok := want[e.Seq]
			if !ok || e.State != w.state || e.PID != w.pid || (i > 0 && ps.Entries[i-1].Seq >= e.Seq) {
				t.Fatalf("step %d: client %s: entry %d state %d pid %d, want %+v (present %v)", step, ps.ClientID, e.Seq, e.State, e.PID, w, ok)
			}
			if string(e.Msg.Payload) != "payload" {
				t.Fatalf("step %d: entry %d payload %q", step, e.Seq, e.Msg.Payload)
			}
		}
		n += len(ps.Entries)
	}
	if len(st.Sessions) != len(model) {
		t.Fatalf("step %d: %d sessions, want %d", step, len(st.Sessions), len(model))
	}
	t.Logf("step %d: %d entries as the model says", step, n)
}

// A checkpoint writes a run of queued entries as a few values (chunks),
// not one key each; deleting them later rewrites and then removes the
// chunks.
func TestEntriesShareChunks(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, store.Options{})
	mustPersist(t, s, putSession(sessionRecord("c")))
	m := plainMessage("plant/a", "0123456789abcdef")
	const n = 5000
	for seq := uint64(1); seq <= n; seq++ {
		s.Persist([]broker.PersistOp{putEntry("c", entryRecord(seq, m))}, nil)
	}
	s, st := reload(t, s)
	if got := len(st.Sessions[0].Entries); got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
	s.Close()
	if keys := countKeys(t, path, "entries"); keys > n/100 {
		t.Fatalf("%d keys for %d entries, want chunks", keys, n)
	}
	s = openStore(t, path, store.Options{})
	for seq := uint64(1); seq <= n; seq++ {
		if seq%3 != 0 {
			s.Persist([]broker.PersistOp{delEntry("c", seq)}, nil)
		}
	}
	mustPersist(t, s, entryState("c", 3, broker.EntrySent, 3))
	s, st = reload(t, s)
	es := st.Sessions[0].Entries
	if len(es) != n/3 || es[0].Seq != 3 || es[0].State != broker.EntrySent || es[0].PID != 3 || es[1].State != broker.EntryQueued {
		t.Fatalf("%d entries (first %+v), want %d from seq 3 (sent, pid 3)", len(es), es[0], n/3)
	}
	for seq := uint64(3); seq <= n; seq += 3 {
		s.Persist([]broker.PersistOp{delEntry("c", seq)}, nil)
	}
	s.Close()
	if keys := countKeys(t, path, "entries"); keys != 0 {
		t.Fatalf("%d keys left after every entry was deleted", keys)
	}
}

func countKeys(t *testing.T, path, bucket string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	_ = db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte(bucket)).Stats().KeyN
		return nil
	})
	return n
}
