package dataplane

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker/store/segfile"
	"gantry/cluster/wire"
)

// FileName is the data plane's store in the cluster's data directory.
const FileName = "dataplane.db"

// Buckets of the store.
var (
	bucketMeta    = []byte("meta")       // "boot": stream identity; "base": records up to it are gone
	bucketOutbox  = []byte("outbox")     // seq (8 bytes, big-endian) → encoded message
	bucketCursors = []byte("cursors")    // peer name → highest seq it confirmed
	bucketInbox   = []byte("inbox")      // sender name → boot, highest seq delivered from it
	bucketRetain  = []byte("retained")   // topic → version of the retained value stored (counter, node)
	bucketCopies  = []byte("copychunks") // partition (4 bytes) + first key (8 bytes) → a chunk of its copy's records (copychunks.go)
	bucketHeld    = []byte("held")       // origin, 0, boot, seq → its copies key: copies not delivered yet (heldKey)
	bucketQoS2    = []byte("qos2")       // a QoS 2 copy's copies key → its publisher's packet id, qos2Sum and client id
	// bucketLegacyCopies is where an earlier build kept the copies, a
	// record per key; openStore moves them into chunks.
	bucketLegacyCopies = []byte("copies")
	keyBoot            = []byte("boot")
	keyBase            = []byte("base")
	keyLease           = []byte("lease") // the highest record number reserved: peers may hold numbers up to it
)

// store keeps the outbox, the peers' cursors and what was received from
// each sender on disk. Writes are queued and one goroutine commits them in
// groups: every fsync covers all that arrived while the previous one ran,
// so it bounds latency, not throughput.
type store struct {
	db   *bolt.DB
	boot uint64

	mu             sync.Mutex // guards the pending writes and closed
	records        []pendingRecord
	dones          []func(error)
	trimTo         uint64
	pendingCursors map[string]uint64
	inbox          map[string][2]uint64
	versions       map[string]wire.Version
	copies         []pendingCopies
	heldGone       [][]byte // keys of the held bucket to delete
	copiesGone     [][]byte // keys of the copies bucket to delete (refused)
	leaseTo        uint64
	closed         bool
	settles        []chan error // readers waiting for every logged write to be in bbolt
	kick           chan struct{}
	stopped        chan struct{}

	// The write-ahead log (storelog.go); the writer goroutine's own.
	log     segLog
	frames  frame           // the frames logged since the last checkpoint started, in order
	waiting []chan error    // settles the next checkpoint answers
	retryAt time.Time       // a checkpoint failed: the next try (zero: none failed)
	lastErr error           // why it failed
	busy    bool            // a checkpoint runs
	ckpt    chan ckptResult // a finished checkpoint
	scratch []byte          // an encoded copy or held key
	// chunkRecs and chunkOrder sort a group's copies into chunks
	// (encodeGroup; the writer goroutine's, reused).
	chunkRecs  map[uint32][]keyedCopy
	chunkOrder []uint32
	// ckptFailures counts checkpoints bbolt refused (retried later; the
	// log keeps their writes meanwhile).
	ckptFailures atomic.Uint64
}

// ckptResult is a checkpoint's outcome: the frames it applied (to retry
// when err is set) and the readers it answers.
type ckptResult struct {
	frames  []byte
	waiters []chan error
	err     error
}

type pendingRecord struct {
	seq uint64
	msg []byte
}

// openStore opens (creating) the store at path.
func openStore(path string) (*store, error) {
	// A checkpoint writes megabytes at once: bbolt growing its map in the
	// middle of one copies every node the transaction touched
	// (dereference) and searches an array freelist, which took most of a
	// copy node's CPU under a quorum load. The map starts large (address
	// space is no cost on 64 bits; 32-bit gateways get less) and the
	// freelist is a map, rebuilt at open instead of written every commit.
	mmap := 256 << 20
	if strconv.IntSize == 32 {
		mmap = 32 << 20
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, InitialMmapSize: mmap,
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("dataplane: opening %s: %w", path, err)
	}
	s := &store{db: db, pendingCursors: map[string]uint64{}, inbox: map[string][2]uint64{}, versions: map[string]wire.Version{},
		kick: make(chan struct{}, 1), stopped: make(chan struct{}), ckpt: make(chan ckptResult, 1), log: segLog{dir: segfile.Dir(path)}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketOutbox, bucketCursors, bucketInbox, bucketRetain, bucketCopies, bucketHeld, bucketQoS2} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyBoot); len(v) == 8 {
			s.boot = binary.BigEndian.Uint64(v)
			return nil
		}
		s.boot = uint64(time.Now().UnixNano())
		return meta.Put(keyBoot, u64(s.boot))
	})
	if err == nil {
		s.log.num, err = replayLog(db, s.log.dir)
	}
	if err == nil {
		err = db.Update(migrateLegacyCopies)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dataplane: %s: %w", path, err)
	}
	s.frames.b = make([]byte, 0, checkpointBytes+checkpointBytes/8)
	go s.run()
	return s, nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// loadOutbox reads the records kept: the base and the records after it.
func (s *store) loadOutbox() (base uint64, entries []entry) {
	s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyBase); len(v) == 8 {
			base = binary.BigEndian.Uint64(v)
		}
		c := tx.Bucket(bucketOutbox).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k)
			if seq <= base {
				continue
			}
			if len(entries) == 0 && seq != base+1 {
				base = seq - 1 // a gap at the start: those were trimmed
			}
			for len(entries) > 0 && seq > entries[len(entries)-1].seq+1 {
				// Numbers skipped after a restart (the lease): placeholders.
				entries = append(entries, entry{seq: entries[len(entries)-1].seq + 1, only: noPeer})
			}
			if bytes.Equal(v, refusedMark) {
				entries = append(entries, entry{seq: seq, only: refusedOnly})
				continue
			}
			e := entry{seq: seq, msg: append([]byte(nil), v...)}
			if rep, msg, ok := parseOriginRecord(e.msg); ok {
				e.rep, e.msg = rep, msg
			}
			if len(v) == 0 {
				e.only = "\x00" // a volatile record's placeholder: for no peer
				entries = append(entries, e)
				continue
			}
			if d, err := wire.DecodeMessage(e.msg); err == nil {
				e.topic, e.retain = d.Msg.Topic, d.Msg.Retain // for the peers' interest
			} else {
				e.retain = true // unreadable: every peer gets it and says so
			}
			entries = append(entries, e)
		}
		return nil
	})
	return base, entries
}

// cursors returns every peer's stored cursor.
func (s *store) cursors() map[string]uint64 {
	out := map[string]uint64{}
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				out[string(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	return out
}

// received returns what was delivered from each sender.
func (s *store) received() map[string][2]uint64 {
	out := map[string][2]uint64{}
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInbox).ForEach(func(k, v []byte) error {
			if len(v) == 16 {
				out[string(k)] = [2]uint64{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}
			}
			return nil
		})
	})
	return out
}

var errStoreClosed = errors.New("dataplane: store closed")

func (s *store) queue(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// put queues a record; done is called once it is on disk.
func (s *store) put(seq uint64, msg []byte, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go done(errStoreClosed) // not on the caller's goroutine: it may hold outbox.mu
		return
	}
	s.records = append(s.records, pendingRecord{seq: seq, msg: msg})
	s.dones = append(s.dones, done)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// putRefused queues replacing record seq by refusedMark: its quorum
// write was refused.
func (s *store) putRefused(seq uint64) {
	s.queue(func() {
		if !s.closed {
			s.records = append(s.records, pendingRecord{seq: seq, msg: refusedMark})
		}
	})
}

// trim queues deleting the records up to base.
func (s *store) trim(base uint64) { s.queue(func() { s.trimTo = max(s.trimTo, base) }) }

// lease reads the reservation of record numbers.
func (s *store) lease() uint64 {
	var l uint64
	s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLease); len(v) == 8 {
			l = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return l
}

// putLease queues a reservation of record numbers up to l; done runs
// once it is on disk.
func (s *store) putLease(l uint64, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.leaseTo = max(s.leaseTo, l)
	s.dones = append(s.dones, done)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *store) putCursor(peer string, seq uint64) { s.queue(func() { s.pendingCursors[peer] = seq }) }

func (s *store) putRetainedVersion(topic string, v wire.Version) {
	s.queue(func() { s.versions[topic] = v })
}

// retainedVersions returns the stored versions of the retained topics.
func (s *store) retainedVersions() map[string]wire.Version {
	out := map[string]wire.Version{}
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRetain).ForEach(func(k, v []byte) error {
			if len(v) >= 8 {
				out[string(k)] = wire.Version{Counter: binary.BigEndian.Uint64(v), Node: string(v[8:])}
			}
			return nil
		})
	})
	return out
}

func (s *store) putReceived(sender string, boot, seq uint64) {
	s.queue(func() { s.inbox[sender] = [2]uint64{boot, seq} })
}

// Checkpoint failures: the next try waits ckptRetry; beyond maxUnapplied
// of frames not in bbolt the writer logs nothing more (its callers wait,
// and a publish times out with 0x97) until a checkpoint makes room, so
// that a disk bbolt cannot write to does not grow the memory without
// bound.
const (
	ckptRetry    = time.Second
	maxUnapplied = 8 * checkpointBytes
)

// errNotApplied answers a read that waited for the log while bbolt
// refused it: the read would miss acknowledged writes.
var errNotApplied = errors.New("dataplane: the store's log could not be applied to dataplane.db")

// run logs the queued writes in groups, and starts the checkpoints,
// until close.
func (s *store) run() {
	defer close(s.stopped)
	var retry *time.Timer
	for {
		var retryC <-chan time.Time
		if !s.retryAt.IsZero() && !s.busy {
			if retry == nil {
				retry = time.NewTimer(time.Until(s.retryAt))
			} else {
				retry.Reset(time.Until(s.retryAt))
			}
			retryC = retry.C
		}
		s.mu.Lock()
		full := !s.closed && len(s.frames.b) >= maxUnapplied // closing, what waits is logged all the same
		s.mu.Unlock()
		kick := s.kick
		if full {
			kick = nil // no new writes until a checkpoint makes room
		}
		select {
		case <-kick:
		case r := <-s.ckpt:
			s.checkpointed(r)
		case <-retryC:
			s.retryAt = time.Time{}
		}
		if retry != nil && !retry.Stop() {
			select {
			case <-retry.C:
			default:
			}
		}
		s.mu.Lock()
		closed := s.closed
		s.waiting = append(s.waiting, s.settles...)
		s.settles = nil
		if !full {
			records, dones, trimTo, cursors, inbox, versions := s.records, s.dones, s.trimTo, s.pendingCursors, s.inbox, s.versions
			copies, leaseTo, heldGone, copiesGone := s.copies, s.leaseTo, s.heldGone, s.copiesGone
			s.records, s.dones, s.copies, s.leaseTo, s.heldGone, s.copiesGone = nil, nil, nil, 0, nil, nil
			// A map taken is replaced; an empty one stays, and is not read
			// outside the lock (its writers go on filling it).
			if len(cursors) > 0 {
				s.pendingCursors = map[string]uint64{}
			} else {
				cursors = nil
			}
			if len(inbox) > 0 {
				s.inbox = map[string][2]uint64{}
			} else {
				inbox = nil
			}
			if len(versions) > 0 {
				s.versions = map[string]wire.Version{}
			} else {
				versions = nil
			}
			s.mu.Unlock()
			if len(records) > 0 || len(cursors) > 0 || len(inbox) > 0 || len(versions) > 0 || trimTo > 0 || len(copies) > 0 ||
				len(dones) > 0 || leaseTo > 0 || len(heldGone) > 0 || len(copiesGone) > 0 {
				start := s.frames.begin()
				s.encodeGroup(records, trimTo, cursors, inbox, copies, heldGone, copiesGone, leaseTo, versions)
				err := s.log.append(s.frames.end(start))
				if err != nil {
					s.frames.b = s.frames.b[:start] // not on disk: not in bbolt either
				}
				for _, d := range dones {
					d(err)
				}
			}
		} else {
			s.mu.Unlock()
		}
		if closed {
			if s.busy {
				s.checkpointed(<-s.ckpt)
			}
			if full {
				s.kickSelf()
				continue // what waits is logged on the next loop, which does not wait for room
			}
			s.log.rotate()
			if len(s.frames.b) > 0 {
				s.checkpointed(s.checkpoint(s.log.num, s.frames.b, nil))
			}
			s.answer(s.waiting, s.lastErr)
			return
		}
		switch {
		case s.busy:
		case !s.retryAt.IsZero():
			s.answer(s.waiting, s.lastErr) // bbolt refused the last checkpoint: the reads cannot be served whole
			s.waiting = nil
		case len(s.frames.b) >= checkpointBytes || len(s.waiting) > 0 && len(s.frames.b) > 0:
			s.busy = true
			last, frames, waiters := s.log.rotate(), s.frames.b, s.waiting
			s.frames.b, s.waiting = make([]byte, 0, max(checkpointBytes+checkpointBytes/8, len(frames))), nil
			go func() { s.ckpt <- s.checkpoint(last, frames, waiters) }()
		case len(s.waiting) > 0:
			s.answer(s.waiting, nil) // nothing logged is missing from bbolt
			s.waiting = nil
		}
	}
}

// kickSelf makes the next loop of run go without waiting.
func (s *store) kickSelf() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// answer tells waiting readers whether bbolt has every logged write.
func (s *store) answer(waiters []chan error, err error) {
	for _, w := range waiters {
		w <- err // buffered
	}
}

// checkpoint applies frames, the log up to segment last, to bbolt in one
// transaction and deletes those segments.
func (s *store) checkpoint(last uint64, frames []byte, waiters []chan error) ckptResult {
	err := s.db.Update(func(tx *bolt.Tx) error { return applyFrames(tx, frames) })
	if err == nil {
		// A segment that stays is replayed again at the next open:
		// harmless (storelog.go).
		segfile.RemoveUpTo(s.log.dir, last)
	}
	return ckptResult{frames: frames, waiters: waiters, err: err}
}

// checkpointed takes a checkpoint's outcome (writer goroutine): a failed
// one's frames go back in front of the log's, to be applied with the
// next try, ckptRetry later.
func (s *store) checkpointed(r ckptResult) {
	s.busy = false
	if r.err != nil {
		s.ckptFailures.Add(1)
		s.frames.b = append(r.frames, s.frames.b...)
		s.retryAt, s.lastErr = time.Now().Add(ckptRetry), fmt.Errorf("%w: %w", errNotApplied, r.err)
		s.answer(r.waiters, s.lastErr)
		return
	}
	s.retryAt, s.lastErr = time.Time{}, nil
	s.answer(r.waiters, nil)
}

// settle returns once every write logged so far is in bbolt, for a read
// of it; an error when bbolt refused them (the read would miss some).
// Never on the store's writer goroutine (a done callback): it would wait
// for itself.
func (s *store) settle() error {
	ch := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.settles = append(s.settles, ch)
	s.mu.Unlock()
	s.kickSelf()
	return <-ch
}

// encodeGroup appends one group commit's writes to the log as a frame's
// operations, in the order bbolt applied them before the log.
func (s *store) encodeGroup(records []pendingRecord, trimTo uint64, cursors map[string]uint64, inbox map[string][2]uint64,
	copies []pendingCopies, heldGone, copiesGone [][]byte, leaseTo uint64, versions map[string]wire.Version) {
	f := &s.frames
	var k, v [16]byte
	for _, r := range records {
		if r.seq <= trimTo {
			continue
		}
		binary.BigEndian.PutUint64(k[:8], r.seq)
		f.op(opPut, lbOutbox, k[:8], r.msg)
	}
	if trimTo > 0 {
		binary.BigEndian.PutUint64(v[:8], trimTo)
		f.op(opPutMax, lbMeta, keyBase, v[:8])
		f.op(opTrim, lbOutbox, nil, v[:8])
	}
	for p, seq := range cursors {
		binary.BigEndian.PutUint64(v[:8], seq)
		f.op(opPut, lbCursors, []byte(p), v[:8])
	}
	for sender, x := range inbox {
		binary.BigEndian.PutUint64(v[:8], x[0])
		binary.BigEndian.PutUint64(v[8:], x[1])
		f.op(opPut, lbInbox, []byte(sender), v[:])
	}
	// A chunk per partition (copychunks.go): the group's records of each
	// partition, in key order (two writers may have queued theirs in the
	// other order), then the held and QoS 2 entries, which name records.
	s.chunkOrder = s.chunkOrder[:0]
	for _, pc := range copies {
		if len(pc.recs) == 0 {
			continue
		}
		recs := s.chunkRecs[pc.p] // empty since the last group
		if len(recs) == 0 {
			s.chunkOrder = append(s.chunkOrder, pc.p)
		}
		for i := range pc.recs {
			recs = append(recs, keyedCopy{key: pc.keys[i], r: &pc.recs[i]})
		}
		if s.chunkRecs == nil {
			s.chunkRecs = map[uint32][]keyedCopy{}
		}
		s.chunkRecs[pc.p] = recs
	}
	for _, p := range s.chunkOrder {
		recs := s.chunkRecs[p]
		if !slices.IsSortedFunc(recs, func(a, b keyedCopy) int { return cmp.Compare(a.key, b.key) }) {
			slices.SortFunc(recs, func(a, b keyedCopy) int { return cmp.Compare(a.key, b.key) })
		}
		s.scratch = appendChunks(recs, p, s.scratch, func(key, val []byte) { f.op(opPut, lbCopies, key, val) })
		for _, kc := range recs {
			r := kc.r
			ck := putCopyKey(k[:12], p, kc.key)
			if r.hold {
				s.scratch = appendHeldKey(s.scratch[:0], r.id)
				f.op(opPut, lbHeld, s.scratch, ck)
			}
			if r.pid != 0 {
				s.scratch = append(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint16(s.scratch[:0], r.pid), r.sum), r.client...)
				f.op(opPut, lbQoS2, ck, s.scratch)
			}
		}
		clear(recs)
		s.chunkRecs[p] = recs[:0]
	}
	for _, pc := range copies {
		if pc.trimTo > 0 {
			binary.BigEndian.PutUint32(k[:4], pc.p)
			binary.BigEndian.PutUint64(v[:8], pc.trimTo)
			f.op(opTrim, lbCopies, k[:4], v[:8])
			f.op(opTrim, lbQoS2, k[:4], v[:8])
		}
	}
	// After the puts: a record held and released (or refused) within one
	// group is gone.
	for _, hk := range heldGone {
		f.op(opDelete, lbHeld, hk, nil)
	}
	for _, ck := range copiesGone {
		f.op(opDrop, lbCopies, ck, nil)
		f.op(opDelete, lbQoS2, ck, nil)
	}
	if leaseTo > 0 {
		binary.BigEndian.PutUint64(v[:8], leaseTo)
		f.op(opPut, lbMeta, keyLease, v[:8])
	}
	for topic, x := range versions {
		s.scratch = append(binary.BigEndian.AppendUint64(s.scratch[:0], x.Counter), x.Node...)
		f.op(opPut, lbRetain, []byte(topic), s.scratch)
	}
}

// close commits what is queued and closes the file.
func (s *store) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	<-s.stopped
	return s.db.Close()
}
