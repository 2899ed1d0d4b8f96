package store_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
	"gantry/broker/store"
	"gantry/broker/store/segfile"
)

// noCheckpoints keeps everything in the log: nothing writes the store
// file while a test copies it.
var noCheckpoints = store.Options{CheckpointBytes: 1 << 30, CheckpointInterval: time.Hour, AliveInterval: time.Hour}

// crashImage copies the store file and its log as a crash would leave
// them (the store stays open) and returns the copy's path.
func crashImage(t *testing.T, path string) string {
	t.Helper()
	dst := dbPath(t)
	copyFile(t, path, dst)
	segs, err := filepath.Glob(filepath.Join(path+".wal", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst+".wal", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, sg := range segs {
		copyFile(t, sg, filepath.Join(dst+".wal", filepath.Base(sg)))
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func segments(t *testing.T, path string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(path+".wal", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

// logWorkload persists a session with entries, an entry state, a
// deleted entry, inbound QoS 2 ids and retained messages, and returns
// the state it should load as.
func logWorkload(t *testing.T, s *store.Store) *broker.PersistedState {
	t.Helper()
	m := plainMessage("plant/a", "payload")
	mustPersist(t, s, putSession(sessionRecord("c")), putRetained(plainMessage("r1", "x")), putRetained(plainMessage("r2", "y")))
	for seq := uint64(1); seq <= 5; seq++ {
		mustPersist(t, s, putEntry("c", entryRecord(seq, m)))
	}
	mustPersist(t, s, entryState("c", 2, broker.EntrySent, 7), delEntry("c", 3), putQoS2("c", 9), putQoS2("c", 10))
	mustPersist(t, s, delQoS2("c", 10), delRetained("r2"))
	want := &broker.PersistedState{Retained: []*broker.Message{plainMessage("r1", "x")}}
	ps := broker.PersistedSession{SessionRecord: *sessionRecord("c"), InboundQoS2: []uint16{9}}
	for _, seq := range []uint64{1, 2, 4, 5} {
		e := *entryRecord(seq, m)
		if seq == 2 {
			e.State, e.PID = broker.EntrySent, 7
		}
		ps.Entries = append(ps.Entries, e)
	}
	want.Sessions = []broker.PersistedSession{ps}
	return want
}

func loadImage(t *testing.T, path string) (*store.Store, *broker.PersistedState) {
	t.Helper()
	s := openStore(t, path, store.Options{})
	st, err := s.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s, st
}

// Operations whose done came are in the log, not yet in the store file:
// a crash image opens with all of them (the log is replayed), and the
// replayed log is removed.
func TestLogReplaysAfterCrash(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, noCheckpoints)
	want := logWorkload(t, s)
	if st := s.Stats(); st.Checkpoints != 0 || st.LogBytes == 0 {
		t.Fatalf("stats %+v: want the ops in the log only", st)
	}
	img := crashImage(t, path)
	s2, got := loadImage(t, img)
	if err := diffState(got, want); err != nil {
		t.Fatal(err)
	}
	if got.LastAlive == 0 {
		t.Fatal("LastAlive not taken from the log")
	}
	if segs := segments(t, img); len(segs) != 1 {
		t.Fatalf("segments after replay %v, want the new one only", segs)
	}
	s2.Close()
	if segs := segments(t, img); len(segs) != 0 {
		t.Fatalf("segments after Close %v, want none", segs)
	}
}

// A checkpoint whose segments a crash kept is applied again at Open:
// replaying what the store file holds already changes nothing.
func TestLogReplayIsIdempotent(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, noCheckpoints)
	want := logWorkload(t, s)
	img := crashImage(t, path)
	kept := map[string][]byte{}
	for _, sg := range segments(t, img) {
		b, err := os.ReadFile(sg)
		if err != nil {
			t.Fatal(err)
		}
		kept[sg] = b
	}
	s2, _ := loadImage(t, img)
	s2.Close() // applied, segments removed
	for sg, b := range kept {
		if err := os.WriteFile(sg, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, got := loadImage(t, img)
	if err := diffState(got, want); err != nil {
		t.Fatal(err)
	}
}

// A frame cut short by the crash (never acknowledged) ends the log;
// everything before it is replayed.
func TestLogTornTail(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, noCheckpoints)
	want := logWorkload(t, s)
	img := crashImage(t, path)
	segs := segments(t, img)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A frame head announcing 100 bytes, and only 10 of them.
	head := binary.LittleEndian.AppendUint32(nil, 100)
	head = binary.LittleEndian.AppendUint32(head, 12345)
	if _, err := f.Write(append(head, make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, got := loadImage(t, img)
	if err := diffState(got, want); err != nil {
		t.Fatal(err)
	}
}

// framesEnd is where the frames of segment b end: the zeros the writer
// reserved follow (segfile.Reserve).
func framesEnd(t *testing.T, b []byte) int {
	t.Helper()
	pos := 8 // after the header
	for pos < len(b) {
		_, next, err := segfile.CutFrame(b[pos:])
		if errors.Is(err, segfile.ErrEnd) {
			break
		}
		if err != nil {
			t.Fatalf("segment damaged at %d: %v", pos, err)
		}
		pos = len(b) - len(next)
	}
	return pos
}

// A damaged segment that is not the last is no crash's work: Open
// refuses it rather than drop what follows.
func TestLogDamagedSegmentRefused(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, noCheckpoints)
	logWorkload(t, s)
	img := crashImage(t, path)
	segs := segments(t, img)
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[framesEnd(t, b)-3] ^= 0xff // inside the last frame: its checksum fails
	bad := filepath.Join(img+".wal", strings.Repeat("0", 20)+".log")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(img, store.Options{})
	if !errors.Is(err, store.ErrUnreadable) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Open: %v, want ErrUnreadable naming %s", err, bad)
	}
}

// Checkpoints apply the log to the store file while the writer goes on
// logging; what they applied and what is still in the log load alike.
func TestCheckpointsUnderLoad(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, store.Options{CheckpointBytes: 8 << 10, CheckpointInterval: 10 * time.Millisecond})
	mustPersist(t, s, putSession(sessionRecord("c")))
	m := plainMessage("plant/a", strings.Repeat("p", 100))
	const n = 3000
	var wg sync.WaitGroup
	for seq := uint64(1); seq <= n; seq++ {
		wg.Add(1)
		ops := []broker.PersistOp{putEntry("c", entryRecord(seq, m))}
		if seq%2 == 0 {
			ops = append(ops, delEntry("c", seq-1))
		}
		s.Persist(ops, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	eventually(t, waitLimit, func() error {
		if st := s.Stats(); st.Checkpoints == 0 || st.CheckpointOps == 0 {
			return fmt.Errorf("stats %+v: want checkpoints", st)
		}
		return nil
	})
	st := s.Stats()
	t.Logf("%d commits, %d checkpoints of %d ops", st.Commits, st.Checkpoints, st.CheckpointOps)
	_, got := reload(t, s)
	es := got.Sessions[0].Entries
	if len(es) != n/2 || es[0].Seq != 2 || es[len(es)-1].Seq != n {
		t.Fatalf("%d entries (%d..%d), want the %d even ones", len(es), es[0].Seq, es[len(es)-1].Seq, n/2)
	}
}

// A data directory of the release before the log (schema version 1,
// testdata/schema1.db, written by it) opens, loads and is migrated.
func TestOpenSchema1File(t *testing.T) {
	path := dbPath(t)
	copyFile(t, "testdata/schema1.db", path)
	s, got := loadImage(t, path)
	if len(got.Sessions) != 1 || len(got.Retained) != 1 || got.Retained[0].Topic != "plant/state" {
		t.Fatalf("loaded %s", describe(got))
	}
	ps := got.Sessions[0]
	if ps.ClientID != "sub" || len(ps.Entries) != 2 || ps.Entries[1].State != broker.EntrySent || ps.Entries[1].PID != 7 ||
		string(ps.Entries[0].Msg.Payload) != "one" || !slices.Equal(ps.InboundQoS2, []uint16{9}) {
		t.Fatalf("loaded %s", describe(got))
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("schema"))); v != store.SchemaVersion {
			t.Errorf("schema %d after Open, want %d", v, store.SchemaVersion)
		}
		return nil
	})
}

// ---- kill -9 of a real process ----

const killDirEnv = "GANTRY_STORE_KILL_DIR"

// TestKillHelper is the process TestKill9 kills: it persists entries of
// one session, deletes each tenth one after it, and prints "acked N" and
// "deleted N" once their done came, until it is killed. Checkpoints are
// small and frequent, so that kills land in them too.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("run by TestKill9")
	}
	s, err := store.Open(filepath.Join(dir, "gantry.db"), store.Options{CheckpointBytes: 32 << 10, CheckpointInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	st, err := s.Load()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	next := uint64(1)
	for _, ps := range st.Sessions {
		for _, e := range ps.Entries {
			next = max(next, e.Seq+1)
		}
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	s.Persist([]broker.PersistOp{putSession(sessionRecord("c"))}, nil)
	m := plainMessage("plant/a", "kill")
	inflight := make(chan struct{}, 64)
	for seq := next; ; seq++ {
		inflight <- struct{}{}
		ops := []broker.PersistOp{putEntry("c", entryRecord(seq, m))}
		deleted := uint64(0)
		if seq%10 == 0 && seq > 5 {
			deleted = seq - 5
			ops = append(ops, delEntry("c", deleted))
		}
		s.Persist(ops, func(err error) {
			<-inflight
			if err != nil {
				say("error %v", err)
				return
			}
			say("acked %d", seq)
			if deleted != 0 {
				say("deleted %d", deleted)
			}
		})
	}
}

// TestKill9 kills a process that persists under load with SIGKILL at
// random points, in the log's writes and in its checkpoints, and opens
// its store after each kill: every entry whose done came is there, every
// entry whose delete's done came is not.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dir := t.TempDir()
	acked, deleted := map[uint64]bool{}, map[uint64]bool{}
	const rounds = 6
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.v=false")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// Kill once the process has acknowledged a random number of
		// entries: a point in its load, not a time.
		target := 2000 + rand.IntN(8000)
		got := 0
		for line := range lines {
			kind, num, _ := strings.Cut(line, " ")
			n, err := strconv.ParseUint(num, 10, 64)
			switch {
			case kind == "acked" && err == nil:
				acked[n] = true
				got++
			case kind == "deleted" && err == nil:
				deleted[n] = true
			default:
				t.Fatalf("helper: %s", line)
			}
			if got == target {
				_ = cmd.Process.Kill()
				break
			}
		}
		for line := range lines { // what it printed before the kill counts too
			kind, num, _ := strings.Cut(line, " ")
			if n, err := strconv.ParseUint(num, 10, 64); err == nil && kind == "acked" {
				acked[n] = true
			} else if err == nil && kind == "deleted" {
				deleted[n] = true
			}
		}
		_ = cmd.Wait()
		checkKilled(t, round, dir, acked, deleted)
	}
	t.Logf("%d kills: %d entries acknowledged, %d deletes acknowledged, none lost", rounds, len(acked), len(deleted))
}

// checkKilled opens the killed process's store and checks it.
func checkKilled(t *testing.T, round int, dir string, acked, deleted map[uint64]bool) {
	t.Helper()
	segs := segments(t, filepath.Join(dir, "gantry.db"))
	s, err := store.Open(filepath.Join(dir, "gantry.db"), store.Options{})
	if err != nil {
		t.Fatalf("kill %d: Open: %v", round+1, err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil {
		t.Fatalf("kill %d: Load: %v", round+1, err)
	}
	have := map[uint64]bool{}
	for _, ps := range st.Sessions {
		for _, e := range ps.Entries {
			have[e.Seq] = true
		}
	}
	top := uint64(0)
	for seq := range acked {
		top = max(top, seq)
	}
	for seq := range acked {
		// Entry seq-5 is deleted with entry seq (seq%10 == 0); that
		// delete may be durable without its done having come, for any
		// call within the helper's 64 in flight.
		maybeDeleted := seq%10 == 5 && seq+5 <= top+64
		if !have[seq] && !deleted[seq] && !maybeDeleted {
			t.Fatalf("kill %d: entry %d acknowledged, lost (log segments at the kill: %d)", round+1, seq, len(segs))
		}
	}
	for seq := range deleted {
		if have[seq] {
			t.Fatalf("kill %d: entry %d's delete acknowledged, entry still there", round+1, seq)
		}
	}
}
