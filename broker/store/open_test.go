package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
	"gantry/broker/store"
)

// TestOpenUnreadable refuses files that are not a Gantry store, leaving
// them untouched.
func TestOpenUnreadable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	tests := []struct {
		name    string
		content func(t *testing.T, path string) []byte
	}{
		{"random 64 KiB", func(*testing.T, string) []byte { return random(64 << 10) }},
		{"random 100 bytes", func(*testing.T, string) []byte { return random(100) }},
		{"text file", func(*testing.T, string) []byte { return []byte("{\"not\": \"a database\"}\n") }},
		{"damaged meta pages", func(t *testing.T, path string) []byte {
			b := validStoreBytes(t, path)
			copy(b[16:64], random(48))           // first meta page
			copy(b[4096+16:4096+64], random(48)) // second meta page
			return b
		}},
		{"damaged data pages", func(t *testing.T, path string) []byte {
			b := validStoreBytes(t, path)
			copy(b[2*4096:], random(len(b)-2*4096)) // freelist, buckets, records
			return b
		}},
		{"foreign bbolt database", func(t *testing.T, path string) []byte {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket([]byte("users"))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, _ := os.ReadFile(path)
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := dbPath(t)
			content := tt.content(t, path)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(path, store.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, store.ErrUnreadable) {
				t.Fatalf("Open: %v, want ErrUnreadable", err)
			}
			for _, want := range []string{"store: " + path + " is not a readable database (", "restore it from a backup or move it away to start empty"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Open: %q, want it to contain %q", err, want)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
				t.Fatal("Open changed the file it refused")
			}
		})
	}
}

// validStoreBytes creates a store at path and returns its bytes.
func validStoreBytes(t *testing.T, path string) []byte {
	t.Helper()
	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPersist(t, s, putRetained(plainMessage("t", "x")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenLocked(t *testing.T) {
	path := dbPath(t)
	openStore(t, path, store.Options{})
	start := time.Now()
	s, err := store.Open(path, store.Options{LockTimeout: 50 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("second Open succeeded")
	}
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), path+" is in use by another process") {
		t.Fatalf("Open: %v, want ErrInUse naming %s", err, path)
	}
	t.Logf("%v after %v", err, time.Since(start))
	if time.Since(start) > waitLimit {
		t.Fatal("Open waited far longer than LockTimeout")
	}
}

func TestOpenSchemaVersion(t *testing.T) {
	path := dbPath(t)
	validStoreBytes(t, path)
	setMeta(t, path, "schema", 3)
	_, err := store.Open(path, store.Options{})
	if !errors.Is(err, store.ErrSchemaVersion) {
		t.Fatalf("Open: %v, want ErrSchemaVersion", err)
	}
	for _, want := range []string{path, "schema version 3", "reads version 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Open: %q, want it to contain %q", err, want)
		}
	}
}

func TestOpenBadOptions(t *testing.T) {
	_, err := store.Open(dbPath(t), store.Options{MaxPendingOps: -1})
	if err == nil || !strings.Contains(err.Error(), "Options.MaxPendingOps = -1") {
		t.Fatalf("Open: %v, want the bad field named", err)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	_, err := store.Open(t.TempDir()+"/no/such/dir/gantry.db", store.Options{})
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "store: open ") {
		t.Fatalf("Open: %v, want a wrapped not-exist error", err)
	}
}

// TestLoadCorruptRecord: a record that does not decode fails Load with an
// error naming it, rather than losing it silently.
func TestLoadCorruptRecord(t *testing.T) {
	tests := []struct {
		bucket, key, want string
	}{
		{"sessions", "c1", `session "c1"`},
		{"retained", "a/b", `retained message "a/b"`},
		{"entries", "c1\x00\x00\x00\x00\x00\x00\x00\x00\x07", `entry 7 of "c1"`},
	}
	for _, tt := range tests {
		t.Run(tt.bucket, func(t *testing.T) {
			path := dbPath(t)
			s := openStore(t, path, store.Options{})
			mustPersist(t, s, putSession(&broker.SessionRecord{ClientID: "c1"}))
			s.Close()
			rawPut(t, path, tt.bucket, tt.key, []byte{1, 0xff})
			s = openStore(t, path, store.Options{})
			_, err := s.Load()
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v, want ErrCorrupt naming %s", err, tt.want)
			}
		})
	}
}

// setMeta writes a big-endian uint64 under key in the meta bucket.
func setMeta(t *testing.T, path, key string, v uint64) {
	t.Helper()
	rawPut(t, path, "meta", key, binary.BigEndian.AppendUint64(nil, v))
}

// rawPut writes a key in a bucket with bbolt directly.
func rawPut(t *testing.T, path, bucket, key string, val []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).Put([]byte(key), val)
	})
	if err != nil {
		t.Fatal(err)
	}
}
