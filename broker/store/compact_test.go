package store_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"gantry/broker"
	"gantry/broker/store"
)

// TestCompact fills the file, deletes most of it, and checks that Compact
// shrinks the file and keeps every live record.
func TestCompact(t *testing.T) {
	const entries, kept = 8000, 100
	path := dbPath(t)
	s := openStore(t, path, store.Options{})
	mustPersist(t, s, putSession(sessionRecord("c1")), putRetained(fullMessage("r", "retained")))
	payload := strings.Repeat("x", 1024)
	for base := 0; base < entries; base += 1000 {
		ops := make([]broker.PersistOp, 0, 1000)
		for i := base; i < base+1000; i++ {
			ops = append(ops, putEntry("c1", entryRecord(uint64(i), plainMessage("t", payload))))
		}
		mustPersist(t, s, ops...)
	}
	s, _ = reload(t, s) // the entries reach the file before the deletes
	var dels []broker.PersistOp
	for i := kept; i < entries; i++ {
		dels = append(dels, delEntry("c1", uint64(i)))
	}
	mustPersist(t, s, dels...)
	s.Close()

	s = openStore(t, path, store.Options{})
	before := fileSize(t, path)
	u, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if !u.Sparse() || u.FileBytes > before {
		t.Fatalf("usage %+v of a %d-byte file, want sparse", u, before)
	}
	if err := s.Compact(); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	after := fileSize(t, path)
	t.Logf("file %d → %d bytes (usage %+v)", before, after, u)
	if after*4 > before {
		t.Fatalf("file %d → %d bytes, want at least 4× smaller", before, after)
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	if u2, err := s.Usage(); err != nil || u2.Sparse() {
		t.Fatalf("usage after Compact %+v, %v: want not sparse", u2, err)
	}
	checkCompacted(t, s, kept)
	mustPersist(t, s, delEntry("c1", 0)) // the store still writes
	_, st := reload(t, s)
	if n := len(st.Sessions[0].Entries); n != kept-1 {
		t.Fatalf("%d entries after a delete, want %d", n, kept-1)
	}
}

func checkCompacted(t *testing.T, s *store.Store, kept int) {
	t.Helper()
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := &broker.PersistedState{
		Sessions: []broker.PersistedSession{{SessionRecord: *sessionRecord("c1")}},
		Retained: []*broker.Message{fullMessage("r", "retained")},
	}
	payload := strings.Repeat("x", 1024)
	for i := range kept {
		want.Sessions[0].Entries = append(want.Sessions[0].Entries, *entryRecord(uint64(i), plainMessage("t", payload)))
	}
	if err := diffState(st, want); err != nil {
		t.Fatal(err)
	}
	if st.LastAlive == 0 {
		t.Fatal("LastAlive lost")
	}
}

// TestCompactFreshStore compacts a small file: nothing to gain, but the
// data must survive and Usage must not call it sparse.
func TestCompactFreshStore(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, store.Options{})
	for i := range 10 {
		mustPersist(t, s, putRetained(plainMessage(fmt.Sprintf("t/%d", i), "v")))
	}
	if u, err := s.Usage(); err != nil || u.Sparse() {
		t.Fatalf("Usage %+v, %v: want not sparse", u, err)
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	_, st := reload(t, s)
	if len(st.Retained) != 10 {
		t.Fatalf("%d retained messages after Compact, want 10", len(st.Retained))
	}
}

func TestCompactAfterClose(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{})
	s.Close()
	if err := s.Compact(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Compact after Close: %v, want ErrClosed", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
