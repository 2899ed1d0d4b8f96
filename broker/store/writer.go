package store

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
)

// queuedOp is a PersistOp encoded by Persist, ready for the writer.
type queuedOp struct {
	kind  broker.PersistKind
	key   []byte // bucket key; for DeleteSession the client id and 0x00
	val   []byte // encoded record of a put
	state uint8  // PersistEntryState
	pid   uint16 // PersistEntryState
}

// call is one Persist call waiting for its commit.
type call struct {
	done func(error)
	ops  int
	err  error // the call was refused before queueing (invalid op)
}

// notice is a committed (or failed) batch whose done callbacks are due.
type notice struct {
	calls []call
	err   error
}

// Persist queues ops for the next group commit and returns without I/O;
// done (may be nil) is called once, on the store's notifier goroutine,
// with nil when they are durable or with the error (after Close: with
// ErrClosed, on a goroutine of its own). Ops are encoded here, so the
// records they point to may change as soon as Persist returns. Persist
// blocks only while its ops would take a non-empty queue past
// Options.MaxPendingOps (backpressure). An invalid op (empty client id,
// key too long, missing record, unknown kind) fails the whole call with
// ErrInvalidOp and nothing of it is written. Persist(nil, done) is a
// barrier: its done comes after the done of every earlier call.
func (s *Store) Persist(ops []broker.PersistOp, done func(error)) {
	var small [2]queuedOp // most calls carry one op: no allocation for the list
	q, err := encodeOps(small[:0], ops)
	s.mu.Lock()
	for !s.closed && len(s.ops) > 0 && len(s.ops)+len(q) > s.opts.MaxPendingOps {
		s.space.Wait()
	}
	if s.closed {
		s.mu.Unlock()
		if done != nil {
			go done(ErrClosed)
		}
		return
	}
	if err == nil {
		s.ops = append(s.ops, q...)
	}
	s.calls = append(s.calls, call{done: done, ops: len(ops), err: err})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runWriter is the single writer goroutine: it logs whatever is queued
// as one frame of the write-ahead log, hands logged batches to the
// checkpointer, and stamps meta.lastAlive when nothing was committed for
// AliveInterval.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	defer close(s.notifyQuit)
	defer close(s.ckptReq)
	alive := time.NewTimer(s.opts.AliveInterval)
	defer alive.Stop()
	defer s.lg.timer.Stop()
	for {
		select {
		case <-s.wake:
			if s.flush() {
				alive.Reset(s.opts.AliveInterval)
			}
		case err := <-s.ckptDone:
			s.checkpointDone(err)
		case <-s.lg.timer.C:
			s.lg.timerOn = false
			s.startCheckpoint(true)
		case <-alive.C:
			if s.lg.flight == nil { // else the checkpoint stamps it
				s.stampAlive()
			}
			alive.Reset(s.opts.AliveInterval)
		case <-s.quit:
			for s.flush() {
			}
			s.finalCheckpoint()
			s.stampAlive()
			return
		}
	}
}

// flush logs everything queued and hands the done callbacks to the
// notifier. It reports whether anything was queued.
func (s *Store) flush() bool {
	next := s.takeSpareCalls()
	s.mu.Lock()
	ops, calls := s.ops, s.calls
	s.ops, s.calls = s.takeSpareOps(len(ops)), next
	s.space.Broadcast()
	s.mu.Unlock()
	if len(calls) == 0 {
		s.giveSpareOps(ops)
		s.giveSpareCalls(calls)
		return false
	}
	var err error
	if len(ops) > 0 {
		err = s.logBatch(ops)
	}
	if err != nil || len(ops) == 0 {
		s.giveSpareOps(ops) // not logged: nothing keeps it
	}
	s.notify(calls, err)
	return true
}

// stampAlive records that the node is alive in a transaction of its own.
func (s *Store) stampAlive() {
	start := time.Now()
	err := s.update(func(tx *bolt.Tx) error {
		return putUint64(tx.Bucket([]byte(bucketMeta)), lastAliveKey, uint64(time.Now().UnixNano()))
	})
	s.stats.commit(0, 0, time.Since(start), err)
	if err != nil {
		s.log.Warn("store: stamping last alive failed", "path", s.path, "err", err)
	}
}

// entriesFillPercent is how full bbolt fills the pages of the entries
// bucket before it splits them. A session's entries are keyed by (client
// id, sequence): new ones go at the end of its range, so full pages are
// split off instead of half-full ones, which halves the pages a
// checkpoint writes and the file grows by (bbolt's default, 0.5, suits
// random inserts).
const entriesFillPercent = 0.95

// buckets are the data buckets of one transaction.
type buckets struct {
	sessions, entries, qos2, retained *bolt.Bucket
	skipped                           int // PersistEntryState on an unreadable entry
}

func (b *buckets) apply(op *queuedOp) error {
	switch op.kind {
	case broker.PersistSession:
		return b.sessions.Put(op.key, op.val)
	case broker.DeleteSession:
		if err := b.sessions.Delete(op.key[:len(op.key)-1]); err != nil {
			return err
		}
		if err := deletePrefix(b.entries, op.key); err != nil {
			return err
		}
		return deletePrefix(b.qos2, op.key)
	case broker.PersistEntry:
		return b.entries.Put(op.key, op.val)
	case broker.PersistEntryState:
		v := b.entries.Get(op.key)
		if v == nil {
			return nil // already acknowledged and deleted
		}
		patched, ok := patchEntryState(v, op.state, op.pid)
		if !ok {
			b.skipped++ // failing the batch would fail other clients' ops; Load reports the record
			return nil
		}
		return b.entries.Put(op.key, patched)
	case broker.DeleteEntry:
		return b.entries.Delete(op.key)
	case broker.PersistInboundQoS2:
		return b.qos2.Put(op.key, op.val)
	case broker.DeleteInboundQoS2:
		return b.qos2.Delete(op.key)
	case broker.PersistRetained:
		return b.retained.Put(op.key, op.val)
	case broker.DeleteRetained:
		return b.retained.Delete(op.key)
	}
	return fmt.Errorf("%w: kind %d", ErrInvalidOp, op.kind)
}

// deletePrefix deletes every key of b that starts with prefix. It seeks
// again after each delete: a bbolt cursor may skip a key when Next
// follows Delete.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// notify hands a batch's done callbacks to the notifier goroutine, so
// that a callback that calls Persist (and meets backpressure) can never
// stall the writer.
func (s *Store) notify(calls []call, err error) {
	s.notifyMu.Lock()
	s.notices = append(s.notices, notice{calls: calls, err: err})
	s.notifyMu.Unlock()
	select {
	case s.notifyWake <- struct{}{}:
	default:
	}
}

// runNotifier calls done callbacks in commit order, then submission order.
func (s *Store) runNotifier() {
	defer close(s.notifierDone)
	for {
		select {
		case <-s.notifyWake:
			s.deliver()
		case <-s.notifyQuit:
			s.deliver()
			return
		}
	}
}

func (s *Store) deliver() {
	for {
		s.notifyMu.Lock()
		ns := s.notices
		s.notices = nil
		s.notifyMu.Unlock()
		if len(ns) == 0 {
			return
		}
		for _, n := range ns {
			for _, c := range n.calls {
				err := n.err
				if c.err != nil {
					err = c.err
					s.stats.invalid(c.ops)
				}
				if c.done != nil {
					c.done(err)
				}
			}
			s.giveSpareCalls(n.calls)
		}
	}
}

// maxSpareOps is how many op slices the writer keeps for reuse.
const maxSpareOps = 4

// takeSpareOps returns an empty op slice for the next batch: a spare one,
// or one with room for as many ops as the last batch (most batches are
// about as large as the one before: no growing them op by op). Writer
// only.
func (s *Store) takeSpareOps(last int) []queuedOp {
	n := len(s.spareOps)
	if n == 0 {
		return make([]queuedOp, 0, max(16, last+last/4))
	}
	q := s.spareOps[n-1]
	s.spareOps = s.spareOps[:n-1]
	return q
}

// giveSpareOps keeps ops, which nothing refers to any more, for reuse.
// Writer only.
func (s *Store) giveSpareOps(ops []queuedOp) {
	if cap(ops) == 0 || len(s.spareOps) >= maxSpareOps {
		return
	}
	clear(ops) // drop references to the encoded records
	s.spareOps = append(s.spareOps, ops[:0])
}

// maxSpareCalls is how many call slices wait for reuse: the one being
// filled, the one being committed and the one being notified are enough.
const maxSpareCalls = 2

// takeSpareCalls returns an empty call slice to queue the next batch's
// calls in: one the notifier is done with, or nil. Reusing them saves
// growing a new slice for every batch.
func (s *Store) takeSpareCalls() []call {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	n := len(s.spareCalls)
	if n == 0 {
		return nil
	}
	c := s.spareCalls[n-1]
	s.spareCalls = s.spareCalls[:n-1]
	return c
}

// giveSpareCalls keeps calls, whose callbacks have all run, for reuse.
func (s *Store) giveSpareCalls(calls []call) {
	if cap(calls) == 0 {
		return
	}
	clear(calls) // drop the callbacks
	s.notifyMu.Lock()
	if len(s.spareCalls) < maxSpareCalls {
		s.spareCalls = append(s.spareCalls, calls[:0])
	}
	s.notifyMu.Unlock()
}
