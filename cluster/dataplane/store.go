package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/cluster/wire"
)

// FileName is the data plane's store in the cluster's data directory.
const FileName = "dataplane.db"

// Buckets of the store.
var (
	bucketMeta    = []byte("meta")     // "boot": stream identity; "base": records up to it are gone
	bucketOutbox  = []byte("outbox")   // seq (8 bytes, big-endian) → encoded message
	bucketCursors = []byte("cursors")  // peer name → highest seq it confirmed
	bucketInbox   = []byte("inbox")    // sender name → boot, highest seq delivered from it
	bucketRetain  = []byte("retained") // topic → version of the retained value stored (counter, node)
	bucketCopies  = []byte("copies")   // partition (4 bytes) + key (8 bytes) → a record of its copy (copies.go)
	bucketHeld    = []byte("held")     // origin, 0, boot, seq → its copies key: copies not delivered yet (heldKey)
	keyBoot       = []byte("boot")
	keyBase       = []byte("base")
	keyLease      = []byte("lease") // the highest record number reserved: peers may hold numbers up to it
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
	kick           chan struct{}
	stopped        chan struct{}
}

type pendingRecord struct {
	seq uint64
	msg []byte
}

// openStore opens (creating) the store at path.
func openStore(path string) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("dataplane: opening %s: %w", path, err)
	}
	s := &store{db: db, pendingCursors: map[string]uint64{}, inbox: map[string][2]uint64{}, versions: map[string]wire.Version{},
		kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketOutbox, bucketCursors, bucketInbox, bucketRetain, bucketCopies, bucketHeld} {
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
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dataplane: %s: %w", path, err)
	}
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

// run commits the queued writes until close.
func (s *store) run() {
	defer close(s.stopped)
	for range s.kick {
		s.mu.Lock()
		records, dones, trimTo, cursors, inbox, versions, closed := s.records, s.dones, s.trimTo, s.pendingCursors, s.inbox, s.versions, s.closed
		copies, leaseTo, heldGone, copiesGone := s.copies, s.leaseTo, s.heldGone, s.copiesGone
		s.records, s.dones, s.copies, s.leaseTo, s.heldGone, s.copiesGone = nil, nil, nil, 0, nil, nil
		s.pendingCursors, s.inbox, s.versions = map[string]uint64{}, map[string][2]uint64{}, map[string]wire.Version{}
		s.mu.Unlock()
		if len(records) > 0 || len(cursors) > 0 || len(inbox) > 0 || len(versions) > 0 || trimTo > 0 || len(copies) > 0 || len(dones) > 0 || leaseTo > 0 || len(heldGone) > 0 {
			err := s.db.Update(func(tx *bolt.Tx) error {
				if err := commit(tx, records, trimTo, cursors, inbox); err != nil {
					return err
				}
				if err := commitCopies(tx, copies, heldGone, copiesGone); err != nil {
					return err
				}
				if leaseTo > 0 {
					if err := tx.Bucket(bucketMeta).Put(keyLease, u64(leaseTo)); err != nil {
						return err
					}
				}
				rb := tx.Bucket(bucketRetain)
				for topic, v := range versions {
					if err := rb.Put([]byte(topic), append(u64(v.Counter), v.Node...)); err != nil {
						return err
					}
				}
				return nil
			})
			for _, d := range dones {
				d(err)
			}
		}
		if closed {
			return
		}
	}
}

func commit(tx *bolt.Tx, records []pendingRecord, trimTo uint64, cursors map[string]uint64, inbox map[string][2]uint64) error {
	out := tx.Bucket(bucketOutbox)
	for _, r := range records {
		if r.seq <= trimTo {
			continue
		}
		if err := out.Put(u64(r.seq), r.msg); err != nil {
			return err
		}
	}
	if trimTo > 0 {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyBase); len(v) != 8 || binary.BigEndian.Uint64(v) < trimTo {
			if err := meta.Put(keyBase, u64(trimTo)); err != nil {
				return err
			}
			var gone [][]byte // deleting while a cursor walks can skip keys
			c := out.Cursor()
			for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= trimTo; k, _ = c.Next() {
				gone = append(gone, k)
			}
			for _, k := range gone {
				if err := out.Delete(k); err != nil {
					return err
				}
			}
		}
	}
	cb := tx.Bucket(bucketCursors)
	for p, seq := range cursors {
		if err := cb.Put([]byte(p), u64(seq)); err != nil {
			return err
		}
	}
	ib := tx.Bucket(bucketInbox)
	for sender, v := range inbox {
		if err := ib.Put([]byte(sender), append(u64(v[0]), u64(v[1])...)); err != nil {
			return err
		}
	}
	return nil
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
