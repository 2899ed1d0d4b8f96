package dataplane

import (
	"bytes"
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Copies are stored in chunks: one bbolt key per partition and group
// commit, not one per record. bbolt's cost is per key (a search, an insert
// into a leaf that is split only at commit, and the leaf written again),
// and with a key per record a checkpoint of a quorum load cost a copy
// about as much CPU as a single node spends on a whole publish. A group
// commit of a loaded node holds tens of records of each partition, so a
// chunk cuts that by as much.
//
// A chunk's key is its partition (4 bytes) and its first record's key (8
// bytes), both big-endian; its value is the span (uvarint, last key minus
// first) and then its records in ascending key order, each the distance
// of its key from the first (uvarint), its length (uvarint) and appendCopy's
// encoding. The keys of one chunk are distinct from every other chunk's
// (copyLog.add gives each record its own key, and a chunk holds the
// records of one group commit), so chunks never overlap: sorted by key
// they are sorted by range, and the chunk that may hold key k is the last
// one whose first key is at most k.
//
// A record is removed from its chunk (opDrop: its quorum write was
// refused) by writing the chunk again without it; a partition is trimmed
// (opTrim) by deleting its chunks that end at or below the trim, so the
// chunk across the trim stays whole: a few records older than the bound
// are kept, which readers pass over where they start from a key.

// chunkMax bounds a chunk's records and bytes, so that rewriting one for a
// refusal and reading one for a lookup stay cheap.
const (
	chunkMaxRecords = 256
	chunkMaxBytes   = 64 << 10
)

// keyedCopy is a record and its key, for building chunks.
type keyedCopy struct {
	key uint64
	r   *copyRec
}

// appendChunks appends, through put, partition p's records of one group
// as chunks; recs must be in ascending key order. scratch is reused.
func appendChunks(recs []keyedCopy, p uint32, scratch []byte, put func(key, val []byte)) []byte {
	var k [12]byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && n < chunkMaxRecords && (n == 0 || size < chunkMaxBytes) {
			size += len(recs[n].r.msg) + 32
			n++
		}
		first := recs[0].key
		scratch = binary.AppendUvarint(scratch[:0], recs[n-1].key-first)
		for _, kc := range recs[:n] {
			scratch = binary.AppendUvarint(scratch, kc.key-first)
			scratch = binary.AppendUvarint(scratch, uint64(copyEncodedSize(kc.r)))
			scratch = appendCopy(scratch, kc.r)
		}
		put(putCopyKey(k[:], p, first), scratch)
		recs = recs[n:]
	}
	return scratch
}

// copyEncodedSize is the length of appendCopy's encoding of r.
func copyEncodedSize(r *copyRec) int {
	return uvarintSize(r.epoch) + uvarintSize(uint64(r.at)) + uvarintSize(r.id.boot) + uvarintSize(r.id.seq) +
		uvarintSize(uint64(len(r.id.origin))) + len(r.id.origin) + len(r.msg)
}

func uvarintSize(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// chunkLast is the last key of the chunk k → v; ok is false when k or v
// is not a chunk's.
func chunkLast(k, v []byte) (last uint64, ok bool) {
	if len(k) != 12 {
		return 0, false
	}
	span, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[4:]) + span, true
}

// chunkRecords calls fn with each record of the chunk k → v (its key and
// appendCopy's encoding, valid while v is), in key order, until fn
// returns false; false when the chunk is damaged (what follows the damage
// is passed over).
func chunkRecords(k, v []byte, fn func(key uint64, enc []byte) bool) bool {
	if len(k) != 12 {
		return false
	}
	first := binary.BigEndian.Uint64(k[4:])
	_, n := binary.Uvarint(v)
	if n <= 0 {
		return false
	}
	v = v[n:]
	for len(v) > 0 {
		d, n := binary.Uvarint(v)
		if n <= 0 {
			return false
		}
		v = v[n:]
		size, n := binary.Uvarint(v)
		if n <= 0 || size > uint64(len(v)-n) {
			return false
		}
		enc := v[n : n+int(size)]
		v = v[n+int(size):]
		if !fn(first+d, enc) {
			return true
		}
	}
	return true
}

// findChunk positions c on the chunk of partition p that may hold key
// (the last one whose first key is at most key) and returns it; nil when
// there is none.
func findChunk(c *bolt.Cursor, p uint32, key uint64) (k, v []byte) {
	want := copyKey(p, key)
	k, v = c.Seek(want)
	if k != nil && bytes.Equal(k, want) {
		return k, v
	}
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if len(k) != 12 || binary.BigEndian.Uint32(k) != p {
		return nil, nil
	}
	return k, v
}

// getCopy reads partition p's record key from the copies bucket b.
func getCopy(b *bolt.Bucket, p uint32, key uint64) (r copyRec, ok bool) {
	k, v := findChunk(b.Cursor(), p, key)
	if k == nil {
		return r, false
	}
	chunkRecords(k, v, func(rk uint64, enc []byte) bool {
		if rk < key {
			return true
		}
		if rk == key {
			r, ok = decodeCopy(enc)
		}
		return false
	})
	return r, ok
}

// dropFromChunk removes record key (a copy key: partition and key) from
// the chunk of b that holds it, deleting the chunk when it was its only
// record; nothing when no chunk holds it (trimmed, or never written).
func dropFromChunk(b *bolt.Bucket, ck []byte) error {
	if len(ck) != 12 {
		return nil
	}
	p, key := binary.BigEndian.Uint32(ck), binary.BigEndian.Uint64(ck[4:])
	k, v := findChunk(b.Cursor(), p, key)
	if k == nil {
		return nil
	}
	if last, ok := chunkLast(k, v); !ok || last < key {
		return nil
	}
	var keep []keyedCopy
	found := false
	chunkRecords(k, v, func(rk uint64, enc []byte) bool {
		if rk == key {
			found = true
			return true
		}
		if r, ok := decodeCopy(enc); ok {
			keep = append(keep, keyedCopy{key: rk, r: &r})
		}
		return true
	})
	if !found {
		return nil
	}
	k = slices.Clone(k) // the cursor's key is bbolt's memory, which the writes below may move
	if err := b.Delete(k); err != nil {
		return err
	}
	var err error
	appendChunks(keep, p, nil, func(nk, nv []byte) {
		if err == nil {
			err = b.Put(slices.Clone(nk), slices.Clone(nv))
		}
	})
	return err
}

// trimChunks deletes partition prefix's chunks (prefix: its 4 bytes) that
// end at or below up; the chunk across up stays.
func trimChunks(b *bolt.Bucket, prefix []byte, up uint64) error {
	if len(prefix) != 4 {
		return nil
	}
	var gone [][]byte // deleting while a cursor walks can skip keys
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		last, ok := chunkLast(k, v)
		if ok && last > up {
			break // this chunk is across the trim; every later one above it
		}
		gone = append(gone, slices.Clone(k))
	}
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// migrateLegacyCopies moves the copies of a store an earlier build wrote,
// a record per key in bucket "copies", into chunks of one record each,
// and deletes that bucket.
func migrateLegacyCopies(tx *bolt.Tx) error {
	old := tx.Bucket(bucketLegacyCopies)
	if old == nil {
		return nil
	}
	nb := tx.Bucket(bucketCopies)
	var scratch []byte
	err := old.ForEach(func(k, v []byte) error {
		r, ok := decodeCopy(v)
		if len(k) != 12 || !ok {
			return nil
		}
		var err error
		scratch = appendChunks([]keyedCopy{{key: binary.BigEndian.Uint64(k[4:]), r: &r}}, binary.BigEndian.Uint32(k), scratch,
			func(ck, cv []byte) { err = nb.Put(slices.Clone(ck), slices.Clone(cv)) })
		return err
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bucketLegacyCopies)
}
