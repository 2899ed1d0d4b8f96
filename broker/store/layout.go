package store

import (
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Bucket names. One bucket per record kind; see doc.go for keys and values.
const (
	bucketMeta     = "meta"     // schemaKey, lastAliveKey
	bucketSessions = "sessions" // client id → session record
	bucketEntries  = "entries"  // client id, 0x00, uint64 seq → entry record
	bucketQoS2In   = "qos2in"   // client id, 0x00, uint16 packet id → empty
	bucketRetained = "retained" // topic → retained record
)

// Keys of the meta bucket.
const (
	schemaKey     = "schema"     // big-endian uint64 schema version
	lastAliveKey  = "lastAlive"  // big-endian uint64 Unix ns of the last commit
	logAppliedKey = "logApplied" // big-endian uint64: log segments up to this number are in the file
)

// SchemaVersion is the layout of buckets and keys this package reads and
// writes. It is written when the file is created and checked by Open.
// Version 2 has the buckets of version 1 and a write-ahead log beside the
// file (gantry.db.wal/) that Open replays; Open migrates a version 1 file
// by rewriting the number, so that a release that ignores the log cannot
// open it.
const SchemaVersion = 2

// schemaVersionNoLog is the version before the write-ahead log.
const schemaVersionNoLog = 1

// maxKeySize is bbolt's key limit; longer client ids or topics are refused
// per Persist call rather than failing a whole group commit.
const maxKeySize = bolt.MaxKeySize

// allBuckets lists the buckets created with a new file.
var allBuckets = [...]string{bucketMeta, bucketSessions, bucketEntries, bucketQoS2In, bucketRetained}

// entryKey appends the entries-bucket key of (clientID, seq) to dst.
func entryKey(dst []byte, clientID string, seq uint64) []byte {
	dst = append(dst, clientID...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// qos2Key appends the qos2in-bucket key of (clientID, pid) to dst.
func qos2Key(dst []byte, clientID string, pid uint16) []byte {
	dst = append(dst, clientID...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint16(dst, pid)
}

// splitKey splits an entries or qos2in key into its client id and the
// big-endian suffix of suffixLen bytes.
func splitKey(k []byte, suffixLen int) (clientID string, suffix []byte, ok bool) {
	sep := len(k) - suffixLen - 1
	if sep < 1 || k[sep] != 0 {
		return "", nil, false
	}
	return string(k[:sep]), k[sep+1:], true
}

// checkClientID validates a client id used as (part of) a key.
func checkClientID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty client id", ErrInvalidOp)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: client id %q contains U+0000", ErrInvalidOp, id)
	case len(id)+9 > maxKeySize:
		return fmt.Errorf("%w: client id of %d bytes is longer than the store's limit of %d", ErrInvalidOp, len(id), maxKeySize-9)
	}
	return nil
}

// checkTopic validates a retained topic used as a key.
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty retained topic", ErrInvalidOp)
	case len(topic) > maxKeySize:
		return fmt.Errorf("%w: retained topic of %d bytes is longer than the store's limit of %d", ErrInvalidOp, len(topic), maxKeySize)
	}
	return nil
}

// putUint64 stores v big-endian under key in b.
func putUint64(b *bolt.Bucket, key string, v uint64) error {
	return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, v))
}

// getUint64 reads a big-endian uint64 from key in b; ok is false if the
// key is missing or not 8 bytes.
func getUint64(b *bolt.Bucket, key string) (v uint64, ok bool) {
	raw := b.Get([]byte(key))
	if len(raw) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(raw), true
}
