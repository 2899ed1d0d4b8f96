package dataplane

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// copyID names a QoS 1/2 record by the stream it entered the cluster on:
// the node (its origin), that node's incarnation and the record's number
// there. A replay or a new copy's fill carries it, so that every receiver
// recognises a record it already delivered.
type copyID struct {
	origin    string
	boot, seq uint64
}

// copyRec is one record of a partition's copy.
type copyRec struct {
	id    copyID
	at    int64  // when the origin accepted it (Unix ns)
	epoch uint64 // the partition's epoch it was written in
	msg   []byte // wire.AppendMessage encoding
	// pid is a QoS 2 message's packet identifier at its publisher (0:
	// none); client and sum (qos2Sum) index it for recognising a resend.
	pid    uint16
	client string
	sum    uint64
	// key is its key in the partition's log, set by copyLog.add.
	key uint64
	// hold: its delivery here waits for its origin's decision (two-phase
	// delivery): the held bucket names it until it is released.
	hold bool
	// refused: its quorum write was refused (in memory; with a store the
	// record is deleted): replays and fills pass it over.
	refused bool
}

// qos2Key names a QoS 2 message by its publisher and packet identifier.
type qos2Key struct {
	client string
	pid    uint16
}

// qos2Seen is a QoS 2 message written to a copy: its content's sum and
// its identity in the stream it entered.
type qos2Seen struct {
	sum uint64
	id  copyID
	at  int64
}

// qos2Max bounds the QoS 2 messages remembered per partition.
const qos2Max = 4096

// qos2Sum is what tells a resent QoS 2 message from a new one that reuses
// its packet identifier: FNV-1a of topic and payload.
func qos2Sum[T string | []byte](topic T, payload []byte) uint64 {
	// FNV-1a, 64 bits: hash/fnv's, without its allocation per use.
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := range len(topic) {
		h = (h ^ uint64(topic[i])) * prime
	}
	h *= prime // the 0 between topic and payload
	for _, b := range payload {
		h = (h ^ uint64(b)) * prime
	}
	return h
}

// partCopy is what this node holds of one partition: keys first..last in
// the log (first > last when empty); in memory, the records themselves.
type partCopy struct {
	first, last uint64
	mem         deque[copyRec] // without a store: mem.at(i) has key first+i
	// qos2 are the QoS 2 messages written here (at most qos2Max, oldest
	// out first), with their qos2Sum; with a store also those written
	// before this node restarted (the qos2 bucket).
	qos2  map[qos2Key]qos2Seen
	order []qos2Key
}

func (pc *partCopy) rememberQoS2(r *copyRec) {
	k := qos2Key{r.client, r.pid}
	if pc.qos2 == nil {
		pc.qos2 = map[qos2Key]qos2Seen{}
	}
	if _, ok := pc.qos2[k]; !ok {
		pc.order = append(pc.order, k)
		if len(pc.order) > qos2Max {
			delete(pc.qos2, pc.order[0])
			pc.order = pc.order[1:]
		}
	}
	pc.qos2[k] = qos2Seen{sum: r.sum, id: r.id, at: r.at}
}

func (pc *partCopy) count() int { return int(pc.last + 1 - pc.first) }

// copyLog is this node's copies of the partitions it is a replica of:
// every QoS 1/2 record written to a partition while this node was one of
// its copies (and what a new copy was filled with), kept for the failover
// replay and for filling new copies. With a store it is the copies bucket
// of dataplane.db, written in the same group commit as the rest, and only
// the keys are in memory; without one the records are in memory. A
// partition keeps at most max records (ReplicationCompactEveryRecords):
// beyond it a tenth of them, the oldest, go in one compaction.
type copyLog struct {
	max   int
	store *store

	mu    sync.Mutex // guards parts
	parts map[uint32]*partCopy
}

func newCopyLog(max int, st *store) *copyLog {
	l := &copyLog{max: max, store: st, parts: map[uint32]*partCopy{}}
	if st != nil {
		for p, fl := range st.copyRanges() {
			l.parts[p] = &partCopy{first: fl[0], last: fl[1]}
		}
		for p, recs := range st.qos2Copies(qos2Max) {
			if pc := l.parts[p]; pc != nil {
				for i := range recs {
					pc.rememberQoS2(&recs[i])
				}
			}
		}
	}
	return l
}

func (l *copyLog) part(p uint32) *partCopy {
	pc := l.parts[p]
	if pc == nil {
		pc = &partCopy{first: 1}
		l.parts[p] = pc
	}
	return pc
}

// add appends records to partition p's copy. With a store it returns
// true and done reports the write once it is on disk; without one the
// records are kept at once: it returns false and never calls done.
func (l *copyLog) add(p uint32, recs []copyRec, done func(error)) bool {
	l.mu.Lock()
	pc := l.part(p)
	var keys []uint64
	if l.store != nil {
		keys = make([]uint64, len(recs))
	}
	for i := range recs {
		pc.last++
		if keys != nil {
			keys[i] = pc.last
		}
		recs[i].key = pc.last
		if recs[i].pid != 0 {
			pc.rememberQoS2(&recs[i])
		}
		if l.store == nil {
			pc.mem.push(recs[i])
		}
	}
	var trimTo uint64
	if n := pc.count(); n > l.max {
		drop := n - l.max + l.max/10
		trimTo = pc.first + uint64(drop) - 1
		if l.store == nil {
			pc.mem.dropOldest(drop)
		}
		pc.first = trimTo + 1
	}
	l.mu.Unlock()
	if l.store == nil {
		return false
	}
	l.store.putCopies(p, keys, recs, trimTo, done)
	return true
}

// addMixed is add without a store, of records of any partitions
// (parts[i] is recs[i]'s): it sets their keys.
func (l *copyLog) addMixed(parts []uint32, recs []copyRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pc *partCopy
	for i := range recs {
		if i == 0 || parts[i] != parts[i-1] {
			pc = l.part(parts[i])
		}
		pc.keep(&recs[i], l.max)
	}
}

// keep appends rec to the copy in memory (it sets rec's key), and drops
// the oldest tenth beyond max records. The copy log's mu is held.
func (pc *partCopy) keep(rec *copyRec, max int) {
	pc.last++
	rec.key = pc.last
	if rec.pid != 0 {
		pc.rememberQoS2(rec)
	}
	pc.mem.push(*rec)
	if n := pc.count(); n > max {
		drop := n - max + max/10
		pc.mem.dropOldest(drop)
		pc.first += uint64(drop)
	}
}

// addOne is add of one record, and returns its key too: without a store
// it allocates nothing beyond the log's growth.
func (l *copyLog) addOne(p uint32, rec copyRec, done func(error)) (uint64, bool) {
	if l.store != nil {
		recs := []copyRec{rec}
		stored := l.add(p, recs, done)
		return recs[0].key, stored
	}
	l.mu.Lock()
	l.part(p).keep(&rec, l.max)
	l.mu.Unlock()
	return rec.key, false
}

// records calls fn with partition p's records from key from on (0: the
// oldest), in order, until fn returns false. fn only collects: without a
// store it runs under copyLog.mu (no copy of the partition per call, which
// a fill's chunks would make quadratic), with one inside a read of the
// store; it must not call the copy log or wait. An error says the store
// could not serve every record written (its log could not be applied):
// the caller must not take what it got for the whole.
func (l *copyLog) records(p uint32, from uint64, fn func(key uint64, r copyRec) bool) error {
	l.mu.Lock()
	pc := l.parts[p]
	if pc == nil {
		l.mu.Unlock()
		return nil
	}
	from = max(from, pc.first)
	if l.store == nil {
		defer l.mu.Unlock()
		for i := from - pc.first; i < uint64(pc.mem.len()); i++ {
			r := pc.mem.at(int(i))
			if r.refused {
				continue
			}
			if !fn(pc.first+i, *r) {
				return nil
			}
		}
		return nil
	}
	l.mu.Unlock()
	return l.store.rangeCopies(p, from, fn)
}

// dropRefused removes held records whose quorum write was refused from
// their partitions' copies (and the QoS 2 index); with a store it returns
// true and done runs once that is on disk.
func (l *copyLog) dropRefused(hs []heldRec, done func(error)) bool {
	l.mu.Lock()
	for _, h := range hs {
		pc := l.parts[h.part]
		if pc == nil {
			continue
		}
		if h.pid != 0 {
			if seen, ok := pc.qos2[qos2Key{h.client, h.pid}]; ok && seen.id == h.id {
				delete(pc.qos2, qos2Key{h.client, h.pid}) // a resend of it is a new publish
			}
		}
		if l.store == nil && h.key >= pc.first && h.key-pc.first < uint64(pc.mem.len()) {
			pc.mem.at(int(h.key - pc.first)).refused = true
		}
	}
	l.mu.Unlock()
	if l.store == nil {
		return false
	}
	l.store.dropHeld(hs, true, done)
	return true
}

// acceptedQoS2 reports whether partition p's copy here holds the QoS 2
// message client published with packet identifier pid and sum.
func (l *copyLog) acceptedQoS2(p uint32, client string, pid uint16, sum uint64) (qos2Seen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc := l.parts[p]
	if pc == nil {
		return qos2Seen{}, false
	}
	s, ok := pc.qos2[qos2Key{client, pid}]
	return s, ok && s.sum == sum
}

// qos2IDs is partition p's QoS 2 index by identity: the packet
// identifier of each QoS 2 message its copy here remembers (nil: none).
func (l *copyLog) qos2IDs(p uint32) map[copyID]uint16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc := l.parts[p]
	if pc == nil || len(pc.qos2) == 0 {
		return nil
	}
	ids := make(map[copyID]uint16, len(pc.qos2))
	for k, s := range pc.qos2 {
		ids[s.id] = k.pid
	}
	return ids
}

// last is the key of partition p's newest record (0: none).
func (l *copyLog) lastKey(p uint32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pc := l.parts[p]; pc != nil && pc.count() > 0 {
		return pc.last
	}
	return 0
}

// counts is the number of records held per partition.
func (l *copyLog) counts() map[uint32]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uint32]int, len(l.parts))
	for p, pc := range l.parts {
		out[p] = pc.count()
	}
	return out
}

// copyKey is a record's key in the copies bucket: partition, then key,
// big-endian, so that a partition's records are contiguous and in order.
func copyKey(p uint32, key uint64) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 12), p)
	return binary.BigEndian.AppendUint64(b, key)
}

// appendCopy appends r's encoding in a chunk of the copies bucket to b.
func appendCopy(b []byte, r *copyRec) []byte {
	b = binary.AppendUvarint(b, r.epoch)
	b = binary.AppendUvarint(b, uint64(r.at))
	b = binary.AppendUvarint(b, r.id.boot)
	b = binary.AppendUvarint(b, r.id.seq)
	b = binary.AppendUvarint(b, uint64(len(r.id.origin)))
	b = append(b, r.id.origin...)
	return append(b, r.msg...)
}

// decodeCopy reads a record of a chunk of the copies bucket; ok is false
// when it is not one (a damaged file), and the record is skipped.
func decodeCopy(v []byte) (r copyRec, ok bool) {
	var vals [5]uint64
	for i := range vals {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			return r, false
		}
		vals[i], v = x, v[n:]
	}
	if vals[4] > uint64(len(v)) {
		return r, false
	}
	r.epoch, r.at, r.id.boot, r.id.seq = vals[0], int64(vals[1]), vals[2], vals[3]
	r.id.origin = string(v[:vals[4]])
	r.msg = append([]byte(nil), v[vals[4]:]...)
	return r, true
}

// copyRanges reads the first and last key of every partition held.
func (s *store) copyRanges() map[uint32][2]uint64 {
	out := map[uint32][2]uint64{}
	s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCopies).Cursor()
		k, _ := c.First()
		for k != nil && len(k) == 12 {
			p := binary.BigEndian.Uint32(k)
			first := binary.BigEndian.Uint64(k[4:])
			var next, lk []byte
			if p != ^uint32(0) {
				next, _ = c.Seek(copyKey(p+1, 0))
			}
			var lv []byte
			if next == nil {
				lk, lv = c.Last()
			} else {
				lk, lv = c.Prev()
			}
			last, ok := chunkLast(lk, lv)
			if !ok {
				last = binary.BigEndian.Uint64(lk[4:])
			}
			out[p] = [2]uint64{first, last}
			k = next
		}
		return nil
	})
	return out
}

// rangeCopies calls fn with partition p's stored records from key from.
func (s *store) rangeCopies(p uint32, from uint64, fn func(key uint64, r copyRec) bool) error {
	if err := s.settle(); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCopies).Cursor()
		k, v := findChunk(c, p, from)
		if k == nil {
			k, v = c.Seek(copyKey(p, from)) // none starts at or below from: the first above it
		} else if last, ok := chunkLast(k, v); ok && last < from {
			k, v = c.Next() // from is past that chunk
		}
		more := true
		for ; more && k != nil && len(k) == 12 && binary.BigEndian.Uint32(k) == p; k, v = c.Next() {
			chunkRecords(k, v, func(key uint64, enc []byte) bool {
				if key < from {
					return true // a chunk across a trim, or the one from is in
				}
				r, ok := decodeCopy(enc)
				if ok {
					more = fn(key, r)
				}
				return more
			})
		}
		return nil
	})
}

type pendingCopies struct {
	p      uint32
	keys   []uint64
	recs   []copyRec
	trimTo uint64 // keys up to it go (0: none)
}

// putCopies queues partition records for the next group commit; done runs
// once they are on disk.
func (s *store) putCopies(p uint32, keys []uint64, recs []copyRec, trimTo uint64, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if done != nil {
			go done(errStoreClosed) // as store.put
		}
		return
	}
	s.copies = append(s.copies, pendingCopies{p: p, keys: keys, recs: recs, trimTo: trimTo})
	if done != nil {
		s.dones = append(s.dones, done)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// heldKey is a held record's key in the held bucket: its origin, a zero
// byte, its boot and number, so that one origin's records are in order.
func heldKey(id copyID) []byte { return appendHeldKey(make([]byte, 0, len(id.origin)+17), id) }

// appendHeldKey appends heldKey(id) to b.
func appendHeldKey(b []byte, id copyID) []byte {
	b = append(b, id.origin...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, id.boot)
	return binary.BigEndian.AppendUint64(b, id.seq)
}

// dropHeld queues removing hs from the held bucket (released), and with
// copies also their records (refused); done, when set, runs once that is
// on disk.
func (s *store) dropHeld(hs []heldRec, copies bool, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if done != nil {
			go done(errStoreClosed)
		}
		return
	}
	for _, h := range hs {
		s.heldGone = append(s.heldGone, heldKey(h.id))
		if copies {
			s.copiesGone = append(s.copiesGone, copyKey(h.part, h.key))
		}
	}
	if done != nil {
		s.dones = append(s.dones, done)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loadHeld reads the held records, in order per origin: what this node
// had not delivered yet when it stopped, for want of a decision.
func (s *store) loadHeld() []heldRec {
	var out []heldRec
	s.settle() // at start: nothing is waiting for a checkpoint yet
	s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCopies)
		return tx.Bucket(bucketHeld).ForEach(func(k, v []byte) error {
			i := bytes.IndexByte(k, 0)
			if i < 0 || len(k) != i+17 || len(v) != 12 {
				return nil
			}
			r, ok := getCopy(b, binary.BigEndian.Uint32(v), binary.BigEndian.Uint64(v[4:]))
			if !ok {
				return nil // compacted away meanwhile
			}
			id := copyID{origin: string(k[:i]), boot: binary.BigEndian.Uint64(k[i+1:]), seq: binary.BigEndian.Uint64(k[i+9:])}
			out = append(out, heldRec{id: id, part: binary.BigEndian.Uint32(v), key: binary.BigEndian.Uint64(v[4:]), enc: r.msg})
			return nil
		})
	})
	return out
}

// putCopyKey writes copyKey(p, key) into dst (12 bytes) and returns it.
func putCopyKey(dst []byte, p uint32, key uint64) []byte {
	binary.BigEndian.PutUint32(dst, p)
	binary.BigEndian.PutUint64(dst[4:], key)
	return dst[:12]
}

// qos2Copies reads, per partition, the newest max QoS 2 copies (oldest
// first) with what recognises a resend of each: its publisher, packet
// identifier, sum and identity.
func (s *store) qos2Copies(max int) map[uint32][]copyRec {
	out := map[uint32][]copyRec{}
	s.settle() // at open: nothing is waiting for a checkpoint yet
	s.db.View(func(tx *bolt.Tx) error {
		qb, cb := tx.Bucket(bucketQoS2), tx.Bucket(bucketCopies)
		c := qb.Cursor()
		for k, v := c.Last(); k != nil; {
			if len(k) != 12 {
				k, v = c.Prev()
				continue
			}
			p := binary.BigEndian.Uint32(k)
			var recs []copyRec
			for ; k != nil && len(k) == 12 && binary.BigEndian.Uint32(k) == p; k, v = c.Prev() {
				if len(recs) == max || len(v) < 10 {
					continue
				}
				r, ok := getCopy(cb, p, binary.BigEndian.Uint64(k[4:]))
				if !ok {
					continue // trimmed from the copies (a trim covers both)
				}
				r.pid, r.sum, r.client = binary.BigEndian.Uint16(v), binary.BigEndian.Uint64(v[2:]), string(v[10:])
				r.msg = nil
				recs = append(recs, r)
			}
			slices.Reverse(recs)
			out[p] = recs // k is the previous partition's last key now
		}
		return nil
	})
	return out
}
