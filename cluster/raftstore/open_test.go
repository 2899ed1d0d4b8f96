package raftstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// TestReopenKeepsEverything writes logs and stable values, closes the
// file and opens it again: everything acknowledged is there.
func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{})
	must(t, err)
	logs := entries(1, 300, 1)
	logs[7].Extensions = []byte("ext")
	must(t, s.StoreLogs(logs[:100]))
	for _, l := range logs[100:] {
		must(t, s.StoreLog(l))
	}
	must(t, s.DeleteRange(1, 50))
	must(t, s.SetUint64([]byte("CurrentTerm"), 9))
	must(t, s.Set([]byte("LastVoteCand"), []byte("node-2")))
	must(t, s.Close())

	s, err = Open(path, Options{})
	must(t, err)
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 51 || last != 300 {
		t.Fatalf("first, last = %d, %d; want 51, 300", first, last)
	}
	for _, want := range logs[50:] {
		var got raft.Log
		must(t, s.GetLog(want.Index, &got))
		if !sameLog(&got, want) {
			t.Fatalf("log %d = %+v, want %+v", want.Index, got, *want)
		}
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); term != 9 || err != nil {
		t.Fatalf("CurrentTerm = %d, %v", term, err)
	}
	if cand, err := s.Get([]byte("LastVoteCand")); string(cand) != "node-2" || err != nil {
		t.Fatalf("LastVoteCand = %q, %v", cand, err)
	}
}

func TestFreshStoreReadsAsEmpty(t *testing.T) {
	s := newStore(t, Options{})
	// What raft.NewRaft and HasExistingState read on a node's first start.
	if term, err := s.GetUint64([]byte("CurrentTerm")); term != 0 || err != nil {
		t.Errorf("GetUint64 of a missing key = %d, %v; want 0, nil", term, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); v != nil || err == nil || err.Error() != "not found" || !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("Get of a missing key = %q, %v; want nil and exactly \"not found\"", v, err)
	}
	if i, err := s.LastIndex(); i != 0 || err != nil {
		t.Errorf("LastIndex = %d, %v", i, err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != raft.ErrLogNotFound {
		t.Errorf("GetLog of a missing index = %v, want raft.ErrLogNotFound itself", err)
	}
	has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore())
	if has || err != nil {
		t.Errorf("HasExistingState = %v, %v; want false, nil", has, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    error
		says    string
	}{
		{"locked by another store", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			must(t, err)
			t.Cleanup(func() { s.Close() })
		}, ErrInUse, "locked by another process"},
		{"not a bbolt file", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat("not a database ", 1000)), 0o600))
		}, ErrUnreadable, "not a readable Raft store"},
		{"another bbolt database", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			must(t, err)
			must(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("sessions")); return err }))
			must(t, db.Close())
		}, ErrUnreadable, `holds bucket "sessions"`},
		{"a newer format", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			must(t, err)
			must(t, s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(bucketMeta)).Put(formatKey, binary.BigEndian.AppendUint64(nil, 2))
			}))
			must(t, s.Close())
		}, ErrUnreadable, "format version 2"},
		{"a missing bucket", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			must(t, err)
			must(t, s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketLogs)) }))
			must(t, s.Close())
		}, ErrUnreadable, `bucket "logs" missing`},
		{"truncated file", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			must(t, err)
			must(t, s.StoreLogs(entries(1, 2000, 1)))
			must(t, s.Close())
			fi, err := os.Stat(path)
			must(t, err)
			must(t, os.Truncate(path, fi.Size()/3))
		}, ErrUnreadable, "not a readable Raft store"},
		{"a directory", func(t *testing.T, path string) {
			must(t, os.Mkdir(path, 0o700))
		}, nil, "raftstore: open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			tc.prepare(t, path)
			start := time.Now()
			s, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Open = %v; want %v naming %s and saying %q", err, tc.want, path, tc.says)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("Open took %v", time.Since(start))
			}
			t.Log(err)
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{LockTimeout: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "LockTimeout = -1ns") {
		t.Errorf("Validate = %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), FileName), Options{LockTimeout: -1}); err == nil {
		t.Error("Open accepted a negative LockTimeout")
	}
	if err := DefaultOptions().Validate(); err != nil || DefaultOptions().NoSync {
		t.Errorf("defaults: %v, NoSync %v", err, DefaultOptions().NoSync)
	}
}

// TestCorruptRecords: a damaged record gives an error wrapping
// ErrCorrupt, naming the file and the index, never a panic or a wrong
// entry.
func TestCorruptRecords(t *testing.T) {
	s := newStore(t, Options{})
	must(t, s.StoreLogs(entries(1, 3, 1)))
	must(t, s.SetUint64([]byte("CurrentTerm"), 1))
	must(t, s.db.Update(func(tx *bolt.Tx) error {
		logs := tx.Bucket([]byte(bucketLogs))
		must(t, logs.Put(indexKey(1), []byte{1, 0}))                                       // truncated
		must(t, logs.Put(indexKey(2), appendLog(nil, entries(7, 7, 1)[0])))                // wrong index
		must(t, logs.Put([]byte("odd"), []byte{}))                                         // not an index
		return tx.Bucket([]byte(bucketStableUint64)).Put([]byte("CurrentTerm"), []byte{1}) // not 8 bytes
	}))
	for i := uint64(1); i <= 2; i++ {
		var l raft.Log
		err := s.GetLog(i, &l)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), s.Path()) {
			t.Errorf("GetLog(%d) = %v, want ErrCorrupt naming the file", i, err)
		}
		t.Log(err)
	}
	if _, err := s.LastIndex(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("LastIndex over a bad key = %v", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetUint64 of a bad value = %v", err)
	}
}

func TestClosed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), FileName), Options{})
	must(t, err)
	must(t, s.Close())
	must(t, s.Close()) // a second Close is harmless
	var l raft.Log
	for name, err := range map[string]error{
		"StoreLogs": s.StoreLogs(entries(1, 1, 1)),
		"GetLog":    s.GetLog(1, &l),
		"Set":       s.Set([]byte("k"), []byte("v")),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	// The lock is released: the file opens again.
	s, err = Open(s.Path(), Options{})
	must(t, err)
	must(t, s.Close())
}
