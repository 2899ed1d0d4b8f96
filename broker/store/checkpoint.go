package store

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"gantry/broker/store/segfile"
)

// logState is the writer's side of the write-ahead log. Only the writer
// goroutine touches it (Open sets it up before the writer starts).
type logState struct {
	w       wal
	pend    [][]queuedOp // batches logged since the last checkpoint handed off
	bytes   int64        // log bytes not yet checkpointed: pend's and the flight's
	flight  *checkpoint  // the checkpoint being applied, nil if none
	lastErr error        // the last checkpoint's failure; nil after a success
	timer   *time.Timer  // CheckpointInterval after pend's first batch
	timerOn bool
}

// checkpoint is a run of logged batches for the checkpointer to apply
// to bbolt in one transaction.
type checkpoint struct {
	batches [][]queuedOp
	upTo    uint64 // once applied, segments up to this number are redundant
	bytes   int64  // log bytes it makes redundant
}

// maxLogBytes bounds the log not yet checkpointed: past it the writer
// waits for a checkpoint before it logs the next batch.
func (s *Store) maxLogBytes() int64 { return 8 * int64(s.opts.CheckpointBytes) }

// logBatch makes ops durable as one frame of the write-ahead log and
// keeps them for the next checkpoint.
func (s *Store) logBatch(ops []queuedOp) error {
	start := time.Now()
	err := s.makeRoom()
	var n int
	if err == nil {
		n, err = s.appendFrame(ops, start.UnixNano())
	}
	written := 0
	for i := range ops {
		written += len(ops[i].key) + len(ops[i].val)
	}
	s.stats.commit(len(ops), written, time.Since(start), err)
	if err != nil {
		s.log.Error("store: write failed", "path", s.path, "ops", len(ops), "err", err)
		return &multiError{msg: "store: write failed: " + err.Error(), errs: []error{ErrWriteFailed, err}}
	}
	s.lg.pend = append(s.lg.pend, ops)
	s.lg.bytes += int64(n)
	s.stats.setLogBytes(s.lg.bytes)
	if s.lg.flight == nil && s.lg.bytes >= int64(s.opts.CheckpointBytes) {
		s.startCheckpoint(true)
	} else if !s.lg.timerOn {
		s.lg.timer.Reset(s.opts.CheckpointInterval)
		s.lg.timerOn = true
	}
	return nil
}

// appendFrame writes ops as one frame, after the test hooks.
func (s *Store) appendFrame(ops []queuedOp, stamp int64) (int, error) {
	if f := s.writeFault.Load(); f != nil {
		if err := (*f)(); err != nil {
			return 0, err
		}
	}
	w := &s.lg.w
	w.buf = appendFrame(w.buf[:0], ops, stamp)
	if s.opts.maxSize > 0 {
		if err := s.checkSizeCap(int64(len(w.buf))); err != nil {
			return 0, err
		}
	}
	return w.write()
}

// checkSizeCap fails a frame that would take the store file and its log
// past Options.maxSize: the files share one simulated disk.
func (s *Store) checkSizeCap(frame int64) error {
	var dbSize int64
	if fi, err := os.Stat(s.path); err == nil {
		dbSize = fi.Size()
	}
	if dbSize+s.lg.bytes+frame > int64(s.opts.maxSize) {
		return fmt.Errorf("the store file and its log would exceed %d bytes: %w", s.opts.maxSize, berrors.ErrMaxSizeReached)
	}
	return nil
}

// makeRoom waits while the log not yet checkpointed is over its bound,
// and fails when the checkpoint that should make room failed.
func (s *Store) makeRoom() error {
	for s.lg.bytes >= s.maxLogBytes() {
		if s.lg.flight == nil && !s.startCheckpoint(true) {
			return errors.New("no checkpoint could start")
		}
		s.checkpointDone(<-s.ckptDone)
		if err := s.lg.lastErr; err != nil {
			return fmt.Errorf("the log is full and its checkpoint failed: %w", err)
		}
	}
	return nil
}

// startCheckpoint hands every batch logged so far to the checkpointer,
// after starting a new segment when rotate is set (a failed rotation is
// retried by the next append). It reports whether a checkpoint is in
// flight.
func (s *Store) startCheckpoint(rotate bool) bool {
	lg := &s.lg
	if lg.flight != nil || len(lg.pend) == 0 {
		return lg.flight != nil
	}
	upTo := lg.w.n
	if rotate {
		lg.w.close()
		if err := lg.w.create(upTo + 1); err != nil {
			s.log.Warn("store: starting a new log segment failed", "dir", lg.w.dir, "err", err)
		}
	}
	c := &checkpoint{batches: lg.pend, upTo: upTo, bytes: lg.bytes}
	lg.pend, lg.flight = nil, c
	if lg.timerOn {
		lg.timer.Stop()
		lg.timerOn = false
	}
	s.ckptReq <- c // capacity 1 and one flight at a time: never blocks
	return true
}

// checkpointDone takes the checkpointer's outcome for the flight.
func (s *Store) checkpointDone(err error) {
	lg := &s.lg
	c := lg.flight
	lg.flight = nil
	if c == nil {
		return
	}
	if err != nil {
		lg.lastErr = err
		lg.pend = append(c.batches, lg.pend...) // tried again, in order, by the next checkpoint
		if !lg.timerOn {
			lg.timer.Reset(s.opts.CheckpointInterval)
			lg.timerOn = true
		}
		return
	}
	lg.lastErr = nil
	lg.bytes -= c.bytes
	s.stats.setLogBytes(lg.bytes)
	for _, b := range c.batches {
		s.giveSpareOps(b)
	}
	if lg.bytes >= int64(s.opts.CheckpointBytes) {
		s.startCheckpoint(true)
	} else if len(lg.pend) > 0 && !lg.timerOn {
		// The interval may have passed during the flight (the timer's
		// startCheckpoint found it busy): start the wait again.
		lg.timer.Reset(s.opts.CheckpointInterval)
		lg.timerOn = true
	}
}

// finalCheckpoint applies everything logged, on Close, and removes the
// log's segments; after a failure they stay, to be replayed by Open.
func (s *Store) finalCheckpoint() {
	if s.lg.flight != nil {
		s.checkpointDone(<-s.ckptDone)
	}
	if s.startCheckpoint(false) {
		s.checkpointDone(<-s.ckptDone)
	}
	if s.lg.flight != nil || len(s.lg.pend) > 0 {
		s.log.Error("store: the log could not be applied on close; it is replayed at the next start",
			"dir", s.lg.w.dir, "err", s.lg.lastErr)
		s.lg.w.close()
		return
	}
	s.lg.w.close()
	if err := segfile.RemoveUpTo(s.lg.w.dir, s.lg.w.n); err != nil {
		s.log.Warn("store: removing the applied log failed; it is replayed at the next start", "dir", s.lg.w.dir, "err", err)
	}
}

// runCheckpointer is the checkpointer goroutine: it applies each
// checkpoint the writer hands it and answers on ckptDone.
func (s *Store) runCheckpointer() {
	defer close(s.checkpointerDone)
	for c := range s.ckptReq {
		s.ckptDone <- s.applyCheckpoint(c)
	}
}

// applyCheckpoint applies c's batches in one bbolt transaction (with its
// fsyncs), then removes the segments it made redundant.
func (s *Store) applyCheckpoint(c *checkpoint) error {
	start := time.Now()
	ops := 0
	for _, b := range c.batches {
		ops += len(b)
	}
	err := s.update(func(tx *bolt.Tx) error {
		if err := s.applyLogged(tx, c.batches...); err != nil {
			return err
		}
		meta := tx.Bucket([]byte(bucketMeta))
		if err := putUint64(meta, logAppliedKey, c.upTo); err != nil {
			return err
		}
		return putUint64(meta, lastAliveKey, uint64(time.Now().UnixNano()))
	})
	s.stats.checkpoint(ops, time.Since(start), err)
	if err != nil {
		s.log.Error("store: checkpoint failed; the log keeps its operations", "path", s.path, "ops", ops, "err", err)
		return fmt.Errorf("store: checkpoint into %s failed: %w", s.path, err)
	}
	if err := segfile.RemoveUpTo(walDir(s.path), c.upTo); err != nil {
		s.log.Warn("store: removing checkpointed log segments failed; they are replayed at the next start", "err", err)
	}
	return nil
}

// applyLogged applies one logged batch, warning about entry states it
// could not patch.
func (s *Store) applyLogged(tx *bolt.Tx, batches ...[]queuedOp) error {
	skipped, err := applyBatches(tx, batches...)
	if skipped > 0 {
		s.log.Warn("store: entry state not updated: the stored entry is not a record this build reads",
			"path", s.path, "entries", skipped)
	}
	return err
}

// replayLog applies the segments a crash left behind to bbolt, in order,
// then removes them. Replaying a segment that a checkpoint had applied
// already is harmless: every op writes or deletes whole keys (or patches
// an entry's state to a fixed value), so applying a suffix of the log
// again ends in the same state. A damaged frame ends the last segment (a
// write the crash cut short, never acknowledged); anywhere else it fails
// Open. It returns the number the next segment gets.
func (s *Store) replayLog() (uint64, error) {
	dir := walDir(s.path)
	var applied uint64
	var marked bool // files before the marker have none: replay all
	if err := s.view(func(tx *bolt.Tx) error {
		applied, marked = getUint64(tx.Bucket([]byte(bucketMeta)), logAppliedKey)
		return nil
	}); err != nil {
		return 0, err
	}
	ns, err := segfile.List(dir)
	if err != nil || len(ns) == 0 {
		return applied + 1, err
	}
	ops := 0
	for i, n := range ns {
		if marked && n <= applied {
			continue // in the file already: a crash came before its removal
		}
		path := segfile.Path(dir, n)
		sg, err := readSegment(path)
		if err == nil && sg.torn && i < len(ns)-1 {
			err = fmt.Errorf("%w: a damaged frame at byte %d, before the last segment", ErrCorrupt, sg.valid)
		}
		if err != nil {
			return 0, unreadable(path, err)
		}
		if err := s.update(func(tx *bolt.Tx) error {
			if err := s.applyLogged(tx, sg.ops); err != nil {
				return err
			}
			meta := tx.Bucket([]byte(bucketMeta))
			if err := putUint64(meta, logAppliedKey, n); err != nil {
				return err
			}
			return putUint64(meta, lastAliveKey, uint64(max(s.lastAlive, sg.stamp)))
		}); err != nil {
			return 0, fmt.Errorf("store: replaying log segment %s into %s: %w (free disk space and start again; the log is kept)", path, s.path, err)
		}
		s.lastAlive = max(s.lastAlive, sg.stamp)
		ops += len(sg.ops)
	}
	if err := segfile.RemoveUpTo(dir, ns[len(ns)-1]); err != nil {
		return 0, fmt.Errorf("store: removing the replayed log: %w", err)
	}
	s.log.Info("store: log replayed", "dir", dir, "segments", len(ns), "ops", ops)
	return max(ns[len(ns)-1], applied) + 1, nil
}
