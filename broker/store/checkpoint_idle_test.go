package store_test

// A checkpoint running when the interval timer fired must not leave the
// log's tail waiting for the next write (review of the write-ahead log).

import (
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/store"
)

func TestIdleLogCheckpointedWithinInterval(t *testing.T) {
	m := plainMessage("plant/a", strings.Repeat("p", 200))
	for round := range 30 {
		path := dbPath(t)
		s := openStore(t, path, store.Options{CheckpointBytes: 1 << 30, CheckpointInterval: time.Millisecond, AliveInterval: time.Hour})
		mustPersist(t, s, putSession(sessionRecord("c")))
		var wg sync.WaitGroup
		for seq := uint64(1); seq <= 3000; seq++ {
			wg.Add(1)
			s.Persist([]broker.PersistOp{putEntry("c", entryRecord(seq, m))}, func(err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		// 5,000 checkpoint intervals of idleness (the defect left the
		// tail there for good; the bound only spares a loaded machine).
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && s.Stats().LogBytes > 0 {
			time.Sleep(time.Millisecond)
		}
		if st := s.Stats(); st.LogBytes > 0 {
			t.Fatalf("round %d: %d log bytes still not checkpointed after 5s idle with CheckpointInterval=1ms (%d checkpoints so far)",
				round, st.LogBytes, st.Checkpoints)
		}
		s.Close()
	}
}
