package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the conventional name of the store in the cluster data
// directory.
const FileName = "raft.db"

// FormatVersion is the layout version written in the meta bucket.
const FormatVersion = 1

// Buckets, one per record kind.
const (
	bucketMeta         = "meta"          // "format" → big-endian uint64 FormatVersion
	bucketLogs         = "logs"          // big-endian uint64 index → log record
	bucketStable       = "stable"        // key → value (Set, Get)
	bucketStableUint64 = "stable_uint64" // key → big-endian uint64 (SetUint64, GetUint64)
)

var allBuckets = []string{bucketMeta, bucketLogs, bucketStable, bucketStableUint64}

var formatKey = []byte("format")

// Errors of the store. Test for them with errors.Is.
var (
	// ErrKeyNotFound is what Get returns for a missing key. Its text is
	// exactly "not found", without the package prefix: hashicorp/raft
	// recognises a missing key by that text (api.go, raft.go), as with
	// its InmemStore and raft-boltdb.
	ErrKeyNotFound = errors.New("not found")
	ErrCorrupt     = errors.New("raftstore: corrupt record")
	ErrInUse       = errors.New("raftstore: file in use by another process")
	ErrUnreadable  = errors.New("raftstore: not a readable Raft store")
	ErrClosed      = errors.New("raftstore: closed")
)

// Options configures a Store. The zero value of a field means its
// default; DefaultOptions returns them all.
type Options struct {
	// NoSync skips the fsync after each commit. Raft assumes that what
	// StoreLogs and Set acknowledge survives a crash, so leave it false
	// except in tests and benchmarks.
	NoSync bool
	// LockTimeout bounds the wait for the file lock in Open; a file still
	// locked after it is reported as in use by another process.
	LockTimeout time.Duration
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{LockTimeout: 2 * time.Second}
}

// Validate reports a field out of range, naming it and its value.
func (o Options) Validate() error {
	if o.LockTimeout < 0 {
		return fmt.Errorf("raftstore: Options.LockTimeout = %v, want >= 0 (0 = default)", o.LockTimeout)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultOptions().LockTimeout
	}
	return o
}

// Store is a raft.LogStore and raft.StableStore in one bbolt file. See
// doc.go for the layout and the concurrency contract.
type Store struct {
	path string
	db   *bolt.DB // safe for concurrent use; closed by Close
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// multiError carries a sentence written for a person and the errors it
// wraps (a sentinel and the cause), so that errors.Is finds both.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

// Open opens or creates the store file at path (normally
// DataDir/raft.db). A file locked by another process, a file that is not
// a bbolt database, holds something other than a Raft store or has
// another format version is refused with an error that names the file
// and says what to do; Open never replaces a file it cannot read.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	db, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, db: db}
	if err := s.init(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// openDB opens the bbolt file, turning its errors into ones that say what
// to do. bbolt may panic on some damaged files; that is reported too.
func openDB(path string, opts Options) (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, unreadable(path, fmt.Errorf("%v", p))
		}
	}()
	if err := checkLength(path); err != nil {
		return nil, unreadable(path, err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync})
	if err == nil {
		return db, nil
	}
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &multiError{
			msg: fmt.Sprintf("raftstore: %s is locked by another process (still locked after %v): "+
				"stop the other gantry node using this cluster DataDir, or give each node its own DataDir", path, opts.LockTimeout),
			errs: []error{ErrInUse, err},
		}
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("raftstore: open %s: %w", path, err)
	}
	return nil, unreadable(path, err)
}

// checkLength refuses a file shorter than its newest meta page says it
// is (a truncated copy): bbolt maps it and faults (SIGSEGV, which recover
// cannot catch) reading a page beyond the end.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bolt.Open reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	// Each meta page: a 16-byte page header, then magic, version,
	// page size (uint32 each), flags, root bucket (16), freelist, the
	// high water mark (pages in use) and the transaction id (uint64 each),
	// in the machine's byte order (little endian on every target).
	var best struct{ txid, pgid, psize uint64 }
	found := false
	for _, off := range []int64{0, -1} {
		buf := make([]byte, 80)
		if off < 0 {
			if !found {
				break
			}
			off = int64(best.psize)
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			continue
		}
		le := binary.LittleEndian
		if le.Uint32(buf[16:]) != 0xED0CDAED {
			continue
		}
		psize, pgid, txid := uint64(le.Uint32(buf[24:])), le.Uint64(buf[56:]), le.Uint64(buf[64:])
		if psize == 0 {
			continue
		}
		if !found || txid > best.txid {
			best.txid, best.pgid, best.psize = txid, pgid, psize
		}
		found = true
	}
	if found && uint64(fi.Size()) < best.pgid*best.psize {
		return fmt.Errorf("file truncated: %d bytes, its header says %d pages of %d", fi.Size(), best.pgid, best.psize)
	}
	return nil
}

func unreadable(path string, cause error) error {
	return &multiError{
		msg: fmt.Sprintf("raftstore: %s is not a readable Raft store (%v): "+
			"move it away and restart this node; it then rejoins the cluster with an empty log "+
			"and catches up from the leader (do this on one node at a time, while the others have a leader)", path, cause),
		errs: []error{ErrUnreadable, cause},
	}
}

// init creates the buckets of a new file, or checks the format of an
// existing one.
func (s *Store) init() error {
	return s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		if meta == nil {
			return s.create(tx)
		}
		v := meta.Get(formatKey)
		if len(v) != 8 {
			return unreadable(s.path, errors.New("meta bucket without a format version"))
		}
		if f := binary.BigEndian.Uint64(v); f != FormatVersion {
			return &multiError{
				msg: fmt.Sprintf("raftstore: %s has format version %d, this gantry reads version %d: "+
					"run the gantry release that wrote it", s.path, f, FormatVersion),
				errs: []error{ErrUnreadable},
			}
		}
		for _, name := range allBuckets {
			if tx.Bucket([]byte(name)) == nil {
				return unreadable(s.path, fmt.Errorf("bucket %q missing", name))
			}
		}
		return nil
	})
}

// create lays out a new, empty file. A file with buckets but no meta
// bucket is some other bbolt database: refuse it.
func (s *Store) create(tx *bolt.Tx) error {
	var other string
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if other == "" {
			other = string(name)
		}
		return nil
	})
	if other != "" {
		return unreadable(s.path, fmt.Errorf("not a Raft store: it holds bucket %q and no %q bucket", other, bucketMeta))
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucket([]byte(name)); err != nil {
			return fmt.Errorf("raftstore: create bucket %q: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bucketMeta)).Put(formatKey, binary.BigEndian.AppendUint64(nil, FormatVersion))
}

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close closes the file and releases its lock; closing again does
// nothing. Calls after Close return an error wrapping ErrClosed.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("raftstore: close %s: %w", s.path, err)
	}
	return nil
}

// update runs fn in a write transaction (one commit, fsynced unless
// NoSync), turning a bbolt panic or a closed database into an error.
func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	defer s.recoverUnreadable(&err)
	return s.wrap(s.db.Update(fn))
}

// view runs fn in a read transaction.
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	defer s.recoverUnreadable(&err)
	return s.wrap(s.db.View(fn))
}

func (s *Store) wrap(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s", ErrClosed, s.path)
	}
	return err
}

func (s *Store) recoverUnreadable(err *error) {
	if p := recover(); p != nil {
		*err = unreadable(s.path, fmt.Errorf("%v", p))
	}
}

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), i) }

// FirstIndex returns the lowest index stored, 0 when there is none.
func (s *Store) FirstIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) ([]byte, []byte) { return c.First() })
}

// LastIndex returns the highest index stored, 0 when there is none.
func (s *Store) LastIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) ([]byte, []byte) { return c.Last() })
}

func (s *Store) edgeIndex(seek func(*bolt.Cursor) ([]byte, []byte)) (uint64, error) {
	var idx uint64
	err := s.view(func(tx *bolt.Tx) error {
		k, _ := seek(tx.Bucket([]byte(bucketLogs)).Cursor())
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("%w: log key of %d bytes (%s)", ErrCorrupt, len(k), s.path)
		}
		idx = binary.BigEndian.Uint64(k)
		return nil
	})
	return idx, err
}

// GetLog reads the entry at index into log. A missing entry gives
// raft.ErrLogNotFound itself (raft compares with ==); a record that does
// not decode, or holds another index, an error wrapping ErrCorrupt.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	return s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte(bucketLogs)).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, log); err != nil {
			return fmt.Errorf("%w (%s, log %d)", err, s.path, index)
		}
		if log.Index != index {
			return fmt.Errorf("%w: log %d holds index %d (%s)", ErrCorrupt, index, log.Index, s.path)
		}
		return nil
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores the entries in one transaction: all or none are
// durable when it returns. An entry replaces any stored at its index.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	size := 0
	for _, l := range logs {
		size += logSize(l)
	}
	// One buffer for the batch: bbolt keeps the slices until the commit.
	buf := make([]byte, 0, size+8*len(logs))
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketLogs))
		for _, l := range logs {
			start := len(buf)
			buf = binary.BigEndian.AppendUint64(buf, l.Index)
			key := buf[start:len(buf):len(buf)]
			start = len(buf)
			buf = appendLog(buf, l)
			if err := b.Put(key, buf[start:len(buf):len(buf)]); err != nil {
				return fmt.Errorf("raftstore: %s: store log %d: %w", s.path, l.Index, err)
			}
		}
		return nil
	})
}

// DeleteRange deletes the entries from min to max, both included.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return s.update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketLogs)).Cursor()
		first := indexKey(min)
		for k, _ := c.Seek(first); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Seek(first) {
			if err := c.Delete(); err != nil {
				return fmt.Errorf("raftstore: %s: delete logs %d..%d: %w", s.path, min, max, err)
			}
		}
		return nil
	})
}

// Set stores val under key. As with raft.InmemStore, a nil val makes
// the key read as missing.
func (s *Store) Set(key []byte, val []byte) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketStable))
		if val == nil {
			return b.Delete(key)
		}
		return b.Put(key, val)
	})
}

// Get returns a copy of the value stored under key, or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte(bucketStable)).Get(key)
		if v == nil {
			return ErrKeyNotFound
		}
		val = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	return val, err
}

// SetUint64 stores val under key, in a namespace of its own: Get does
// not see it, as with raft.InmemStore.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketStableUint64)).Put(key, binary.BigEndian.AppendUint64(nil, val))
	})
}

// GetUint64 returns the value stored under key by SetUint64, 0 when there
// is none (as raft.InmemStore; raft reads a fresh node's term this way).
func (s *Store) GetUint64(key []byte) (uint64, error) {
	var val uint64
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte(bucketStableUint64)).Get(key)
		switch len(v) {
		case 0:
			return nil
		case 8:
			val = binary.BigEndian.Uint64(v)
			return nil
		}
		return fmt.Errorf("%w: uint64 %q of %d bytes (%s)", ErrCorrupt, key, len(v), s.path)
	})
	return val, err
}
