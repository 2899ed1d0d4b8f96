package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// Buckets of the Raft file.
var (
	bucketLogs   = []byte("logs")   // big-endian index → JSON raft.Log
	bucketStable = []byte("stable") // key → value (current term, last vote)
)

// errKeyNotFound is what raft's stable store returns for an unknown key,
// as its InmemStore does ("not found").
var errKeyNotFound = errors.New("not found")

// raftStore is the Raft log and stable store in one bbolt file. Every
// write is one fsynced transaction, as Raft's safety requires.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

type boltStore struct{ db *bolt.DB }

func openRaftStore(path string) (raftStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("cluster: %s is locked: another gantry uses this Cluster.DataDir", path)
		}
		return nil, fmt.Errorf("cluster: open %s: %w (move it away to start this node without cluster state)", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cluster: %s: %w", path, err)
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func (s *boltStore) FirstIndex() (uint64, error) {
	var i uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().First(); k != nil {
			i = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return i, err
}

func (s *boltStore) LastIndex() (uint64, error) {
	var i uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().Last(); k != nil {
			i = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return i, err
}

func (s *boltStore) GetLog(index uint64, log *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(key(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := json.Unmarshal(v, log); err != nil {
			return fmt.Errorf("cluster: Raft log entry %d: %w", index, err)
		}
		return nil
	})
}

func (s *boltStore) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			v, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if err := b.Put(key(l.Index), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(key(min)); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) Set(k, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketStable).Put(k, v) })
}

func (s *boltStore) Get(k []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket(bucketStable).Get(k); got != nil {
			v = append([]byte(nil), got...)
			return nil
		}
		return errKeyNotFound
	})
	return v, err
}

func (s *boltStore) SetUint64(k []byte, v uint64) error { return s.Set(k, key(v)) }

func (s *boltStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("cluster: stable value %q has %d bytes, want 8", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
