package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
)

// Load reads the whole durable state: every session with its queue (in
// Seq order) and inbound QoS 2 packet ids, every retained message, and the
// store's last sign of life before this Open. Call it once after Open
// (and Compact, if any), before the first Persist.
//
// A record that does not decode fails Load with an error naming it: the
// store never drops state silently. Entries and QoS 2 ids of a client
// with no session record are skipped and counted in a warning.
func (s *Store) Load() (*broker.PersistedState, error) {
	st := &broker.PersistedState{LastAlive: s.lastAlive}
	err := s.view(func(tx *bolt.Tx) error {
		index, err := loadSessions(tx, st)
		if err != nil {
			return err
		}
		orphans, err := loadEntries(tx, st, index)
		if err != nil {
			return err
		}
		orphans2, err := loadQoS2(tx, st, index)
		if err != nil {
			return err
		}
		if orphans+orphans2 > 0 {
			s.log.Warn("store: records of clients without a session skipped",
				"entries", orphans, "qos2_ids", orphans2)
		}
		return loadRetained(tx, st)
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("store loaded", "sessions", len(st.Sessions), "retained", len(st.Retained))
	return st, nil
}

// loadSessions appends every session to st and returns the index of each
// client id in st.Sessions.
func loadSessions(tx *bolt.Tx, st *broker.PersistedState) (map[string]int, error) {
	b := tx.Bucket([]byte(bucketSessions))
	index := make(map[string]int)
	err := b.ForEach(func(k, v []byte) error {
		rec, err := DecodeSession(v)
		if err != nil {
			return fmt.Errorf("store: session %q: %w", k, err)
		}
		rec.ClientID = string(k)
		index[rec.ClientID] = len(st.Sessions)
		st.Sessions = append(st.Sessions, broker.PersistedSession{SessionRecord: rec})
		return nil
	})
	return index, err
}

// loadEntries appends every entry to its session's queue. Keys sort by
// client id then big-endian seq, so each queue comes out in Seq order.
func loadEntries(tx *bolt.Tx, st *broker.PersistedState, index map[string]int) (orphans int, err error) {
	err = tx.Bucket([]byte(bucketEntries)).ForEach(func(k, v []byte) error {
		id, suffix, ok := splitKey(k, 8)
		if !ok {
			return fmt.Errorf("%w: entries key %q", ErrCorrupt, k)
		}
		i, found := index[id]
		if !found {
			orphans++
			return nil
		}
		keySeq := binary.BigEndian.Uint64(suffix)
		ps := &st.Sessions[i]
		if len(v) == 0 || v[0] != formatChunk {
			e, err := DecodeEntry(v)
			if err != nil {
				return fmt.Errorf("store: entry %d of %q: %w", keySeq, id, err)
			}
			e.Seq = keySeq
			ps.Entries = append(ps.Entries, e)
			return nil
		}
		es, err := decodeChunk(v, keySeq)
		if err != nil {
			return fmt.Errorf("store: entry chunk %d of %q: %w", keySeq, id, err)
		}
		for _, ce := range es {
			e, err := DecodeEntry(ce.rec)
			if err != nil {
				return fmt.Errorf("store: entry %d of %q: %w", ce.seq, id, err)
			}
			e.Seq = ce.seq
			ps.Entries = append(ps.Entries, e)
		}
		return nil
	})
	if err == nil {
		for i := range st.Sessions {
			sortEntries(st.Sessions[i].Entries)
		}
	}
	return orphans, err
}

// sortEntries puts a queue in Seq order: the chunks of one client cover
// ascending, disjoint ranges of seqs unless its seqs were ever reused.
func sortEntries(es []broker.EntryRecord) {
	if !slices.IsSortedFunc(es, cmpSeq) {
		slices.SortStableFunc(es, cmpSeq)
	}
}

func cmpSeq(a, b broker.EntryRecord) int { return cmp.Compare(a.Seq, b.Seq) }

// loadQoS2 appends every inbound QoS 2 packet id to its session.
func loadQoS2(tx *bolt.Tx, st *broker.PersistedState, index map[string]int) (orphans int, err error) {
	err = tx.Bucket([]byte(bucketQoS2In)).ForEach(func(k, _ []byte) error {
		id, suffix, ok := splitKey(k, 2)
		if !ok {
			return fmt.Errorf("%w: qos2in key %q", ErrCorrupt, k)
		}
		i, found := index[id]
		if !found {
			orphans++
			return nil
		}
		ps := &st.Sessions[i]
		ps.InboundQoS2 = append(ps.InboundQoS2, binary.BigEndian.Uint16(suffix))
		return nil
	})
	return orphans, err
}

// loadRetained appends every retained message, in topic order.
func loadRetained(tx *bolt.Tx, st *broker.PersistedState) error {
	return tx.Bucket([]byte(bucketRetained)).ForEach(func(k, v []byte) error {
		m, err := DecodeMessage(v)
		if err != nil {
			return fmt.Errorf("store: retained message %q: %w", k, err)
		}
		st.Retained = append(st.Retained, m)
		return nil
	})
}
