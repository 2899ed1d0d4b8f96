package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"gantry/broker"
)

// sampleLogOps are ops of every shape a frame carries.
func sampleLogOps() []queuedOp {
	return []queuedOp{
		{kind: broker.PersistSession, key: []byte("c"), val: []byte{1, 1, 'c', 0, 0, 0, 0}},
		{kind: broker.PersistEntry, key: entryKey(nil, "c", 7), val: []byte{1, 0, 0, 0, 1, 0, 0}},
		{kind: broker.PersistEntryState, key: entryKey(nil, "c", 7), state: 1, pid: 9},
		{kind: broker.PersistInboundQoS2, key: qos2Key(nil, "c", 3), val: []byte{}},
		{kind: broker.DeleteEntry, key: entryKey(nil, "c", 7)},
		{kind: broker.DeleteSession, key: []byte("c\x00")},
	}
}

func sampleSegment() []byte {
	seg := binary.BigEndian.AppendUint32([]byte(walMagic), walVersion)
	seg = appendFrame(seg, sampleLogOps(), 1234)
	return appendFrame(seg, sampleLogOps()[:2], 5678)
}

// FuzzDecodeSegment: decodeSegment never panics, fails only with
// ErrCorrupt (a bad header), and the frames it accepts encode again to
// the bytes it read.
func FuzzDecodeSegment(f *testing.F) {
	f.Add(sampleSegment())
	f.Add(sampleSegment()[:30])
	f.Add([]byte(walMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		sg, err := decodeSegment(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if sg.valid > len(b) || (!sg.torn && len(b) >= walHeaderSize && sg.valid != len(b)) {
			t.Fatalf("valid %d of %d bytes, torn %v", sg.valid, len(b), sg.torn)
		}
		if len(b) < walHeaderSize {
			return
		}
		again, err := decodeSegment(b[:sg.valid])
		if err != nil || again.torn || len(again.ops) != len(sg.ops) {
			t.Fatalf("the valid prefix decodes to %d ops (torn %v, %v), want %d", len(again.ops), again.torn, err, len(sg.ops))
		}
	})
}

// FuzzDecodeChunk: decodeChunk never panics, fails only with ErrCorrupt,
// returns ascending seqs, and what it accepts encodes again to the same
// bytes.
func FuzzDecodeChunk(f *testing.F) {
	es := []chunkEntry{{seq: 5, rec: []byte{1, 0, 0, 0}}, {seq: 6, rec: []byte{1, 1, 0, 2}}, {seq: 900, rec: []byte{1}}}
	f.Add(appendChunk(nil, 5, es), uint64(5))
	f.Add(appendChunk(nil, 1, es[:1]), uint64(1))
	f.Add([]byte{formatChunk, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, keySeq uint64) {
		got, err := decodeChunk(b, keySeq)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i].seq <= got[i-1].seq {
				t.Fatalf("seqs %d then %d", got[i-1].seq, got[i].seq)
			}
		}
		if again := appendChunk(nil, keySeq, got); !bytes.Equal(again, b) && len(again) > len(b) {
			t.Fatalf("re-encoding is %d bytes, longer than the %d-byte input", len(again), len(b))
		}
	})
}
