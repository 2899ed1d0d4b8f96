package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
)

// TestApplyBatchesAgainstModel applies random entry ops in checkpoints of
// random sizes straight to a bbolt file (no timing involved) and compares
// the entries bucket, read as Load reads it, with a model after each.
func TestApplyBatchesAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testApplyBatches(t, rand.New(rand.NewPCG(seed, 7))) })
	}
}

type modelVal struct {
	state uint8
	pid   uint16
}

func testApplyBatches(t *testing.T, rng *rand.Rand) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	clients := []string{"a", "b"}
	model := map[string]map[uint64]modelVal{"a": {}, "b": {}}
	next := map[string]uint64{"a": 1, "b": 1}
	msg := &broker.Message{Topic: "t", Payload: bytes.Repeat([]byte("p"), 300), QoS: 1, ClientID: "x"}
	var log []string
	var history [][][]queuedOp
	for round := range 60 {
		var ops []queuedOp
		for range 1 + rng.IntN(200) {
			id := clients[rng.IntN(2)]
			keys := slices.Sorted(func(yield func(uint64) bool) {
				for k := range model[id] {
					if !yield(k) {
						return
					}
				}
			})
			var op broker.PersistOp
			switch r := rng.IntN(100); {
			case r < 50 || len(keys) == 0:
				seq := next[id]
				next[id]++
				op = broker.PersistOp{Kind: broker.PersistEntry, ClientID: id, Entry: &broker.EntryRecord{Seq: seq, Msg: msg, QoS: 1}}
				model[id][seq] = modelVal{}
			case r < 70:
				seq := keys[rng.IntN(len(keys))]
				st, pid := uint8(1+rng.IntN(2)), uint16(rng.IntN(1000))
				op = broker.PersistOp{Kind: broker.PersistEntryState, ClientID: id, Seq: seq, State: st, PID: pid}
				model[id][seq] = modelVal{st, pid}
			case r < 98:
				seq := keys[rng.IntN(len(keys))]
				op = broker.PersistOp{Kind: broker.DeleteEntry, ClientID: id, Seq: seq}
				delete(model[id], seq)
			default:
				op = broker.PersistOp{Kind: broker.DeleteSession, ClientID: id}
				model[id], next[id] = map[uint64]modelVal{}, 1
			}
			q, err := encodeOps(nil, []broker.PersistOp{op})
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, q...)
			log = append(log, fmt.Sprintf("r%d %d %s %d", round, op.Kind, id, op.Seq+func() uint64 {
				if op.Entry != nil {
					return op.Entry.Seq
				}
				return 0
			}()))
		}
		// Split the round's ops into a random number of batches.
		var batches [][]queuedOp
		for len(ops) > 0 {
			n := 1 + rng.IntN(len(ops))
			batches = append(batches, ops[:n])
			ops = ops[n:]
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			_, err := applyBatches(tx, batches...)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		history = append(history, batches)
		if rng.IntN(4) == 0 {
			// A crash after this checkpoint, before its segments and
			// some before them were removed: replay them again, one
			// segment (round) per transaction, as Open does.
			for _, bs := range history[rng.IntN(len(history)):] {
				if err := db.Update(func(tx *bolt.Tx) error {
					_, err := applyBatches(tx, bs...)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := map[string]map[uint64]modelVal{"a": {}, "b": {}}
		_ = db.View(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketEntries)).ForEach(func(k, v []byte) error {
				id, seq, _ := splitEntryKey(k)
				if v[0] != formatChunk {
					e, err := DecodeEntry(v)
					if err != nil {
						t.Fatal(err)
					}
					got[id][seq] = modelVal{e.State, e.PID}
					return nil
				}
				es, err := decodeChunk(v, seq)
				if err != nil {
					t.Fatal(err)
				}
				for _, ce := range es {
					e, _ := DecodeEntry(ce.rec)
					if _, dup := got[id][ce.seq]; dup {
						t.Fatalf("round %d: %s/%d twice", round, id, ce.seq)
					}
					got[id][ce.seq] = modelVal{e.State, e.PID}
				}
				return nil
			})
		})
		for _, id := range clients {
			for seq, w := range model[id] {
				if g, ok := got[id][seq]; !ok || g != w {
					t.Fatalf("round %d: %s/%d = %+v (present %v), want %+v", round, id, seq, g, ok, w)
				}
			}
			for seq := range got[id] {
				if _, ok := model[id][seq]; !ok {
					t.Fatalf("round %d: %s/%d present, deleted in the model; ops for it: %v", round, id, seq, grep(log, fmt.Sprintf(" %s %d", id, seq)))
				}
			}
		}
	}
}

func grep(log []string, suffix string) []string {
	var out []string
	for _, l := range log {
		if len(l) >= len(suffix) && l[len(l)-len(suffix):] == suffix {
			out = append(out, l)
		}
	}
	return out
}
