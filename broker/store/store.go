package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"gantry/broker"
)

// Errors of the store. Each is wrapped with the file, the cause and what
// to do; test for them with errors.Is.
var (
	ErrClosed        = errors.New("store: closed")
	ErrInUse         = errors.New("store: in use by another process")
	ErrUnreadable    = errors.New("store: not a readable database")
	ErrSchemaVersion = errors.New("store: unsupported schema version")
	ErrWriteFailed   = errors.New("store: write failed")
	ErrInvalidOp     = errors.New("store: invalid operation")
)

// multiError carries a sentence written for a person and the errors it
// wraps (a sentinel and the cause), so that errors.Is finds both.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

// Options configures a Store. The zero value of a field means its
// default; DefaultOptions returns them all.
type Options struct {
	// MaxPendingOps bounds the operations queued for the next commit:
	// Persist blocks while its ops would take the queue past it
	// (backpressure). A single call larger than the bound is accepted
	// when the queue is empty.
	MaxPendingOps int
	// AliveInterval is how often an idle writer stamps meta.lastAlive;
	// every commit stamps it too.
	AliveInterval time.Duration
	// LockTimeout bounds the wait for the file lock in Open; a file still
	// locked after it is reported as in use by another process.
	LockTimeout time.Duration
	// CheckpointBytes is how much of the write-ahead log collects before
	// the checkpointer applies it to the store file; at eight times it
	// the writer waits for the checkpoint (backpressure).
	CheckpointBytes int
	// CheckpointInterval bounds how long a logged operation waits for
	// its checkpoint when less than CheckpointBytes collect.
	CheckpointInterval time.Duration
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger

	// maxSize caps the file (bbolt's MaxSize), so that tests can fill a
	// "disk"; 0 means no cap. Set through export_test.go only.
	maxSize int
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		MaxPendingOps:      65536,
		AliveInterval:      5 * time.Second,
		LockTimeout:        2 * time.Second,
		CheckpointBytes:    4 << 20,
		CheckpointInterval: time.Second,
	}
}

// Validate reports a field out of range, naming it and its value.
func (o Options) Validate() error {
	switch {
	case o.MaxPendingOps < 0:
		return fmt.Errorf("store: Options.MaxPendingOps = %d, want >= 0 (0 = default)", o.MaxPendingOps)
	case o.AliveInterval < 0:
		return fmt.Errorf("store: Options.AliveInterval = %v, want >= 0 (0 = default)", o.AliveInterval)
	case o.LockTimeout < 0:
		return fmt.Errorf("store: Options.LockTimeout = %v, want >= 0 (0 = default)", o.LockTimeout)
	case o.CheckpointBytes < 0:
		return fmt.Errorf("store: Options.CheckpointBytes = %d, want >= 0 (0 = default)", o.CheckpointBytes)
	case o.CheckpointInterval < 0:
		return fmt.Errorf("store: Options.CheckpointInterval = %v, want >= 0 (0 = default)", o.CheckpointInterval)
	}
	return nil
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxPendingOps == 0 {
		o.MaxPendingOps = d.MaxPendingOps
	}
	if o.AliveInterval == 0 {
		o.AliveInterval = d.AliveInterval
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = d.LockTimeout
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = d.CheckpointBytes
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = d.CheckpointInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Store is the bbolt-backed broker.Persister. See doc.go for the
// concurrency contract.
type Store struct {
	path string
	opts Options
	log  *slog.Logger

	dbMu  sync.Mutex // guards db and dbErr: held by every transaction and by Compact, which replaces db
	db    *bolt.DB
	dbErr error // why db is nil: ErrClosed, or a failed reopen after Compact

	lastAlive int64 // meta.lastAlive as found by Open; read-only afterwards

	mu     sync.Mutex // guards ops, calls and closed; space waits on it
	ops    []queuedOp // operations queued for the next commit, in submission order
	calls  []call     // Persist calls queued, in submission order
	closed bool
	space  *sync.Cond // broadcast when the writer takes the queue, and on Close

	lg       logState     // writer-owned: the write-ahead log and what is not yet checkpointed
	spareOps [][]queuedOp // writer-owned: op slices of applied batches, for reuse

	ckptReq          chan *checkpoint // capacity 1: the writer hands a checkpoint to the checkpointer; closed when the writer exits
	ckptDone         chan error       // capacity 1: the checkpointer's outcome
	checkpointerDone chan struct{}    // closed when the checkpointer has exited

	wake       chan struct{} // capacity 1: work is queued
	quit       chan struct{} // closed by Close
	writerDone chan struct{} // closed when the writer has exited

	notifyMu     sync.Mutex // guards notices and spareCalls
	notices      []notice   // committed batches whose done callbacks are due
	spareCalls   [][]call   // call slices the notifier is done with, for the writer to reuse
	notifyWake   chan struct{}
	notifyQuit   chan struct{} // closed by the writer when it exits
	notifierDone chan struct{}

	writeFault atomic.Pointer[func() error] // test hook, see export_test.go
	stats      counters
	closeOnce  sync.Once
	closeErr   error
}

var _ broker.Persister = (*Store)(nil)

// Open opens or creates the store file at path (DataDir/gantry.db) and
// starts its writer. A file that is not a readable bbolt database, holds
// something other than a Gantry store, has another schema version or is
// locked by another process is refused with an error saying what to do;
// Open never replaces a file it cannot read.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Store{
		path:         path,
		opts:         opts,
		log:          opts.Logger.With("component", "store"),
		wake:         make(chan struct{}, 1),
		quit:         make(chan struct{}),
		writerDone:   make(chan struct{}),
		notifyWake:   make(chan struct{}, 1),
		notifyQuit:   make(chan struct{}),
		notifierDone: make(chan struct{}),

		ckptReq:          make(chan *checkpoint, 1),
		ckptDone:         make(chan error, 1),
		checkpointerDone: make(chan struct{}),
	}
	s.space = sync.NewCond(&s.mu)
	s.stats.init()
	db, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	s.db = db
	if err := s.initMeta(); err != nil {
		_ = db.Close()
		return nil, err
	}
	next, err := s.replayLog()
	if err == nil {
		s.lg.w.dir = walDir(path)
		err = s.lg.w.create(next)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.lg.timer = time.NewTimer(time.Hour)
	s.lg.timer.Stop()
	go s.runWriter()
	go s.runNotifier()
	go s.runCheckpointer()
	s.log.Info("store opened", "path", path, "last_alive", s.lastAlive)
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
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, MaxSize: opts.maxSize})
	if err == nil {
		return db, nil
	}
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &multiError{
			msg: fmt.Sprintf("store: %s is in use by another process (no lock within %v): "+
				"stop the other gantry process or give this one another DataDir", path, opts.LockTimeout),
			errs: []error{ErrInUse, err},
		}
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return nil, unreadable(path, err)
}

func unreadable(path string, cause error) error {
	return &multiError{
		msg: fmt.Sprintf("store: %s is not a readable database (%v): "+
			"restore it from a backup or move it away to start empty", path, cause),
		errs: []error{ErrUnreadable, cause},
	}
}

// initMeta creates the buckets of a new file, or checks the schema of an
// existing one, and reads meta.lastAlive.
func (s *Store) initMeta() error {
	return s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		if meta == nil {
			return s.create(tx)
		}
		v, ok := getUint64(meta, schemaKey)
		if !ok {
			return unreadable(s.path, errors.New("meta bucket without a schema version"))
		}
		if v == schemaVersionNoLog {
			// Same buckets, no log: from now on a release that does not
			// replay the log must not open it.
			if err := putUint64(meta, schemaKey, SchemaVersion); err != nil {
				return err
			}
			s.log.Info("store: schema migrated", "path", s.path, "from", v, "to", SchemaVersion)
		} else if v != SchemaVersion {
			return &multiError{
				msg: fmt.Sprintf("store: %s has schema version %d, this gantry reads version %d: "+
					"run the gantry release that wrote it, or move the file away to start empty", s.path, v, SchemaVersion),
				errs: []error{ErrSchemaVersion},
			}
		}
		for _, name := range allBuckets {
			if tx.Bucket([]byte(name)) == nil {
				return unreadable(s.path, fmt.Errorf("bucket %q missing", name))
			}
		}
		alive, _ := getUint64(meta, lastAliveKey)
		s.lastAlive = int64(alive)
		return nil
	})
}

// create lays out a new, empty file. A file with buckets but no meta
// bucket is some other bbolt database: refuse it.
func (s *Store) create(tx *bolt.Tx) error {
	var other string
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		other = string(name)
		return errStop
	})
	if other != "" {
		return unreadable(s.path, fmt.Errorf("not a gantry store: it holds bucket %q and no %q bucket", other, bucketMeta))
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucket([]byte(name)); err != nil {
			return fmt.Errorf("store: create bucket %q: %w", name, err)
		}
	}
	return putUint64(tx.Bucket([]byte(bucketMeta)), schemaKey, SchemaVersion)
}

var errStop = errors.New("stop")

// update runs fn in a write transaction under dbMu, turning a bbolt panic
// into an error.
func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil {
		return s.dbErr
	}
	defer recoverUnreadable(s.path, &err)
	return s.db.Update(fn)
}

// view runs fn in a read transaction under dbMu.
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil {
		return s.dbErr
	}
	defer recoverUnreadable(s.path, &err)
	return s.db.View(fn)
}

func recoverUnreadable(path string, err *error) {
	if p := recover(); p != nil {
		*err = unreadable(path, fmt.Errorf("%v", p))
	}
}

// Close waits until every operation queued by Persist is committed and
// its done called, stops the writer and closes the file. Persist after
// Close calls done with ErrClosed. Close is idempotent; it must not be
// called from a done callback.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.space.Broadcast()
		s.mu.Unlock()
		close(s.quit)
		<-s.writerDone
		<-s.notifierDone
		<-s.checkpointerDone
		s.dbMu.Lock()
		defer s.dbMu.Unlock()
		if s.db != nil {
			if err := s.db.Close(); err != nil {
				s.closeErr = fmt.Errorf("store: close %s: %w", s.path, err)
			}
		}
		s.db, s.dbErr = nil, ErrClosed
		s.log.Info("store closed", "path", s.path)
	})
	return s.closeErr
}

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Stats returns the store's counters since Open.
func (s *Store) Stats() Stats {
	st := s.stats.snapshot()
	s.mu.Lock()
	st.Pending = len(s.ops)
	s.mu.Unlock()
	return st
}
