package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"gantry/broker/store/segfile"
)

// compactTxMaxSize bounds the bytes copied per transaction by Compact.
const compactTxMaxSize = 64 << 20

// Usage compares the file's size with the bytes its live data occupies.
type Usage struct {
	FileBytes int64 // pages in use up to the high-water mark (bbolt's tx.Size; the file may be larger, grown ahead)
	LiveBytes int64 // pages allocated to the buckets, plus the two meta pages
}

// Sparse reports whether compacting is worth it: at least half the file
// and at least 4 MiB are free pages.
func (u Usage) Sparse() bool {
	free := u.FileBytes - u.LiveBytes
	return free >= 4<<20 && free*2 >= u.FileBytes
}

// Usage measures the file and its live data. It walks every bucket's
// pages: call it at start, not on a hot path.
func (s *Store) Usage() (Usage, error) {
	var u Usage
	err := s.view(func(tx *bolt.Tx) error {
		u.FileBytes = tx.Size()
		u.LiveBytes = 2 * int64(tx.DB().Info().PageSize)
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			st := b.Stats()
			u.LiveBytes += int64(st.BranchAlloc + st.LeafAlloc)
			return nil
		})
	})
	return u, err
}

// Compact rewrites the database into a fresh file (bbolt.Compact) and
// renames it over the old one. bbolt reuses freed pages but never
// shrinks its file; after a burst of queued messages has drained, the
// file can be much larger than its data. Call Compact at start, after
// Open and before Load and Persist, when Usage().Sparse() says so:
//
//	if u, err := st.Usage(); err == nil && u.Sparse() {
//		err = st.Compact()
//	}
//
// On failure before the rename the old file is kept and stays open. Should
// reopening the new file fail, the store stays closed to writes: every
// later Persist fails and the error says why.
func (s *Store) Compact() error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil {
		return s.dbErr
	}
	tmp := s.path + ".compact"
	if err := s.copyTo(tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := s.db.Close(); err != nil {
		_ = os.Remove(tmp)
		s.db = nil
		return s.reopen(fmt.Errorf("store: compact: close %s: %w", s.path, err))
	}
	s.db = nil
	if err := os.Rename(tmp, s.path); err != nil {
		_ = os.Remove(tmp)
		return s.reopen(fmt.Errorf("store: compact: rename %s: %w", tmp, err))
	}
	if err := segfile.SyncDir(filepath.Dir(s.path)); err != nil {
		s.log.Warn("store: compact: syncing the directory failed", "err", err)
	}
	return s.reopen(nil)
}

// copyTo writes a compacted copy of the database to path.
func (s *Store) copyTo(path string) error {
	_ = os.Remove(path) // a leftover of an interrupted Compact
	dst, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: s.opts.LockTimeout})
	if err != nil {
		return fmt.Errorf("store: compact: create %s: %w", path, err)
	}
	if err := bolt.Compact(dst, s.db, compactTxMaxSize); err != nil {
		_ = dst.Close()
		return fmt.Errorf("store: compact %s: %w", s.path, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("store: compact: close %s: %w", path, err)
	}
	return nil
}

// reopen opens s.path again after Compact closed it; cause, if any, is
// the error that interrupted Compact.
func (s *Store) reopen(cause error) error {
	db, err := openDB(s.path, s.opts)
	if err != nil {
		s.log.Error("store: reopening after compaction failed", "path", s.path, "err", err)
		s.dbErr = fmt.Errorf("store: reopening %s after compaction failed: %w", s.path, err)
		return errors.Join(cause, s.dbErr)
	}
	s.db = db
	return cause
}
