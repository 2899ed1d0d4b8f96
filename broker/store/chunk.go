package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
)

// formatChunk is the leading byte of an entries-bucket value that holds
// several entries (see doc.go, "Entry chunks").
const formatChunk = 2

// Bounds of one chunk written by a checkpoint.
const (
	maxChunkEntries = 1024
	maxChunkBytes   = 32 << 10
)

// chunkEntry is one entry of a chunk, or of a run of entries a
// checkpoint puts: its seq and its entry record (format 1).
type chunkEntry struct {
	seq  uint64
	rec  []byte
	gone bool // deleted
}

// appendChunk appends the chunk value of the entries of es that are not
// gone; key seq is the chunk key's seq, at most the first entry's.
func appendChunk(dst []byte, keySeq uint64, es []chunkEntry) []byte {
	n := 0
	for i := range es {
		if !es[i].gone {
			n++
		}
	}
	dst = append(dst, formatChunk)
	dst = binary.AppendUvarint(dst, uint64(n))
	prev := keySeq
	for i := range es {
		e := &es[i]
		if e.gone {
			continue
		}
		dst = binary.AppendUvarint(dst, e.seq-prev)
		dst = binary.AppendUvarint(dst, uint64(len(e.rec)))
		dst = append(dst, e.rec...)
		prev = e.seq
	}
	return dst
}

// decodeChunk splits a chunk value into its entries (records point into
// v). Seqs ascend from keySeq.
func decodeChunk(v []byte, keySeq uint64) ([]chunkEntry, error) {
	if len(v) == 0 || v[0] != formatChunk {
		return nil, corruptf("not an entry chunk")
	}
	r := frameReader{b: v[1:]}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b))/2 {
		return nil, corruptf("bad entry count in a chunk")
	}
	es := make([]chunkEntry, 0, n)
	seq := keySeq
	for i := range n {
		d := r.uvarint()
		rec := r.bytes()
		if r.err != nil || (i > 0 && d == 0) || seq+d < seq {
			return nil, corruptf("bad entry %d of a chunk", i)
		}
		seq += d
		es = append(es, chunkEntry{seq: seq, rec: rec})
	}
	if len(r.b) != 0 {
		return nil, corruptf("%d bytes after a chunk", len(r.b))
	}
	return es, nil
}

// findSeq returns the index of seq in es (ascending), or -1.
func findSeq(es []chunkEntry, seq uint64) int {
	i, ok := slices.BinarySearchFunc(es, seq, func(e chunkEntry, s uint64) int {
		switch {
		case e.seq < s:
			return -1
		case e.seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// chunkEdit is a stored chunk a checkpoint changes: decoded once, edited
// in memory, written back once.
type chunkEdit struct {
	key []byte
	es  []chunkEntry
}

// chunker applies a checkpoint's ops to the buckets. Entries put by the
// checkpoint are held back, with the states and deletes that follow them,
// and written at the end as chunks, one value per run of a client's
// entries instead of one key each; edits of stored chunks are written
// back once. Both only touch keys no other op of the checkpoint touches
// (entries of a client are put in ascending seq order, see doc.go), so
// holding them back does not reorder anything that matters; a
// DeleteSession writes everything held first.
type chunker struct {
	b       buckets
	runs    map[string][]chunkEntry // client id → its entries put and held back, ascending
	clients []string                // keys of runs in first-put order
	edits   map[string]*chunkEdit   // chunk key → edited stored chunk
	last    *chunkEdit              // the edit of the last change, tried first
	buf     []byte
}

func newChunker(tx *bolt.Tx) (*chunker, error) {
	b := buckets{
		sessions: tx.Bucket([]byte(bucketSessions)),
		entries:  tx.Bucket([]byte(bucketEntries)),
		qos2:     tx.Bucket([]byte(bucketQoS2In)),
		retained: tx.Bucket([]byte(bucketRetained)),
	}
	if b.sessions == nil || b.entries == nil || b.qos2 == nil || b.retained == nil {
		return nil, errors.New("store: a bucket is missing")
	}
	b.entries.FillPercent = entriesFillPercent
	return &chunker{b: b, runs: map[string][]chunkEntry{}, edits: map[string]*chunkEdit{}}, nil
}

// applyBatches applies the batches of one checkpoint (or one replayed
// segment) in order, in tx, and returns the number of entry states it
// could not patch.
func applyBatches(tx *bolt.Tx, batches ...[]queuedOp) (skipped int, err error) {
	ch, err := newChunker(tx)
	if err != nil {
		return 0, err
	}
	for _, ops := range batches {
		for i := range ops {
			op := &ops[i]
			if err := ch.apply(op); err != nil {
				return 0, fmt.Errorf("op %d (kind %d): %w", i, op.kind, err)
			}
		}
	}
	if err := ch.flush(); err != nil {
		return 0, err
	}
	return ch.b.skipped, nil
}

func (ch *chunker) apply(op *queuedOp) error {
	switch op.kind {
	case broker.PersistEntry:
		return ch.put(op)
	case broker.PersistEntryState, broker.DeleteEntry:
		return ch.change(op)
	case broker.DeleteSession:
		if err := ch.flush(); err != nil {
			return err
		}
	}
	return ch.b.apply(op)
}

// put holds an entry back in its client's run.
func (ch *chunker) put(op *queuedOp) error {
	id, seq, ok := splitEntryKey(op.key)
	if !ok {
		return ch.b.apply(op)
	}
	run, held := ch.runs[id]
	if n := len(run); n > 0 && run[n-1].seq >= seq {
		if i := findSeq(run, seq); i >= 0 {
			run[i] = chunkEntry{seq: seq, rec: op.val} // put again: the newer record
			return nil
		}
		// Out of order: write what is held, start a new run.
		if err := ch.writeRun(id, run); err != nil {
			return err
		}
		run = run[:0]
	}
	if !held {
		ch.clients = append(ch.clients, id)
	}
	ch.runs[id] = append(run, chunkEntry{seq: seq, rec: op.val})
	return nil
}

// change applies an entry state or a delete: to a held entry, to a stored
// chunk, or to a stored single record.
func (ch *chunker) change(op *queuedOp) error {
	id, seq, ok := splitEntryKey(op.key)
	if !ok {
		return ch.b.apply(op)
	}
	if run := ch.runs[id]; len(run) > 0 {
		if i := findSeq(run, seq); i >= 0 {
			return ch.changeEntry(&run[i], op)
		}
	}
	if ed := ch.last; ed != nil && len(ed.key) == len(op.key) && bytes.Equal(ed.key[:len(ed.key)-8], op.key[:len(op.key)-8]) {
		if i := findSeq(ed.es, seq); i >= 0 { // a queue drains in order: mostly the chunk of the last change
			return ch.changeEntry(&ed.es[i], op)
		}
	}
	k, v := ch.atOrBefore(op.key)
	if k != nil && bytes.Equal(k, op.key) && (len(v) == 0 || v[0] != formatChunk) {
		return ch.b.apply(op) // a single record
	}
	if k == nil || len(v) == 0 || v[0] != formatChunk {
		return nil // no such entry: already deleted
	}
	ed, err := ch.edit(k, v)
	if err != nil {
		return err
	}
	ch.last = ed
	if i := findSeq(ed.es, seq); i >= 0 {
		return ch.changeEntry(&ed.es[i], op)
	}
	return nil
}

// atOrBefore returns the stored entries key of key's client that is
// key or the greatest below it, and its value; nil if there is none.
func (ch *chunker) atOrBefore(key []byte) (k, v []byte) {
	prefix := key[:len(key)-8] // client id and 0x00
	c := ch.b.entries.Cursor()
	if k, v = c.Seek(key); k != nil && bytes.Equal(k, key) {
		return k, v
	}
	k, v = c.Prev()
	switch {
	case k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(key):
		return k, v
	case k != nil:
		return nil, nil // a smaller client id's key: nothing of this client below key
	}
	// Prev found nothing. bbolt's cursor also says so when the leaf it
	// steps back into was emptied by deletes earlier in this transaction
	// (nodes are rebalanced at commit), so look through the client's
	// keys instead; this is rare (after a DeleteSession or an emptied
	// chunk in the same checkpoint).
	var bk, bv []byte
	for k, v = c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, key) < 0; k, v = c.Next() {
		if len(k) == len(key) {
			bk, bv = k, v
		}
	}
	return bk, bv
}

// edit returns the edit of the stored chunk k, decoding it on first use.
func (ch *chunker) edit(k, v []byte) (*chunkEdit, error) {
	if ed, ok := ch.edits[string(k)]; ok {
		return ed, nil
	}
	es, err := decodeChunk(v, binary.BigEndian.Uint64(k[len(k)-8:]))
	if err != nil {
		return nil, fmt.Errorf("store: entry chunk %q: %w", k, err)
	}
	ed := &chunkEdit{key: slices.Clone(k), es: es}
	ch.edits[string(ed.key)] = ed
	return ed, nil
}

func (ch *chunker) changeEntry(e *chunkEntry, op *queuedOp) error {
	if e.gone {
		return nil
	}
	if op.kind == broker.DeleteEntry {
		e.gone = true
		return nil
	}
	patched, ok := patchEntryState(e.rec, op.state, op.pid)
	if !ok {
		ch.b.skipped++
		return nil
	}
	e.rec = patched
	return nil
}

// flush writes every held run and every edited chunk.
func (ch *chunker) flush() error {
	for _, id := range ch.clients {
		if err := ch.writeRun(id, ch.runs[id]); err != nil {
			return err
		}
	}
	clear(ch.runs)
	ch.clients = ch.clients[:0]
	for _, ed := range ch.edits {
		if err := ch.writeEdit(ed); err != nil {
			return err
		}
	}
	clear(ch.edits)
	ch.last = nil
	return nil
}

// writeRun writes the entries of run that are not gone, as chunks of at
// most maxChunkEntries and maxChunkBytes (a lone entry as a single
// record).
func (ch *chunker) writeRun(id string, run []chunkEntry) error {
	live := make([]chunkEntry, 0, len(run))
	for i := range run {
		if !run[i].gone {
			live = append(live, run[i])
		}
	}
	for len(live) > 0 {
		n, size := 0, 0
		for n < len(live) && n < maxChunkEntries && (n == 0 || size+len(live[n].rec) <= maxChunkBytes) {
			size += len(live[n].rec) + 4
			n++
		}
		key := entryKey(make([]byte, 0, len(id)+9), id, live[0].seq)
		val := live[0].rec
		if n > 1 {
			val = appendChunk(make([]byte, 0, size+8), live[0].seq, live[:n])
		}
		if err := ch.b.entries.Put(key, val); err != nil {
			return err
		}
		live = live[n:]
	}
	return nil
}

// writeEdit writes an edited chunk back, or deletes it once empty.
func (ch *chunker) writeEdit(ed *chunkEdit) error {
	keySeq := binary.BigEndian.Uint64(ed.key[len(ed.key)-8:])
	size := 0
	for i := range ed.es {
		if !ed.es[i].gone {
			size += len(ed.es[i].rec) + 4
		}
	}
	if size > 0 {
		return ch.b.entries.Put(ed.key, appendChunk(make([]byte, 0, size+8), keySeq, ed.es))
	}
	return ch.b.entries.Delete(ed.key)
}

// splitEntryKey splits an entries key into its client id and seq.
func splitEntryKey(k []byte) (string, uint64, bool) {
	id, suffix, ok := splitKey(k, 8)
	if !ok {
		return "", 0, false
	}
	return id, binary.BigEndian.Uint64(suffix), true
}
