package raftstore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// sameLog reports whether two entries are equal field by field, telling
// nil from empty byte slices and comparing times with Equal.
func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil) &&
		bytes.Equal(a.Extensions, b.Extensions) && (a.Extensions == nil) == (b.Extensions == nil) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func sampleLogs() map[string]*raft.Log {
	now := time.Now()
	return map[string]*raft.Log{
		"zero":              {},
		"noop":              {Index: 1, Term: 1, Type: raft.LogNoop},
		"command":           {Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("set x=1"), AppendedAt: now},
		"empty not nil":     {Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte{}, Extensions: []byte{}},
		"extensions":        {Index: 4, Term: 2, Type: raft.LogConfiguration, Data: []byte{0, 1, 2}, Extensions: []byte("chunk 1/3")},
		"max index, term":   {Index: ^uint64(0), Term: ^uint64(0), Type: raft.LogBarrier},
		"unknown type":      {Index: 5, Term: 3, Type: raft.LogType(200)},
		"UTC time":          {Index: 6, Term: 3, AppendedAt: time.Date(2026, 3, 1, 12, 0, 0, 999999999, time.UTC)},
		"before 1970":       {Index: 7, Term: 3, AppendedAt: time.Date(1901, 1, 1, 0, 0, 0, 1, time.UTC)},
		"far future":        {Index: 8, Term: 3, AppendedAt: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
		"one ns after zero": {Index: 9, Term: 3, AppendedAt: time.Time{}.Add(1)},
		"large data":        {Index: 10, Term: 4, Data: bytes.Repeat([]byte("x"), 1<<20)},
	}
}

func TestLogRoundTrip(t *testing.T) {
	for name, l := range sampleLogs() {
		t.Run(name, func(t *testing.T) {
			b := appendLog(nil, l)
			if len(b) > logSize(l) {
				t.Errorf("record of %d bytes, logSize says at most %d", len(b), logSize(l))
			}
			var got raft.Log
			if err := decodeLog(b, &got); err != nil {
				t.Fatal(err)
			}
			if !sameLog(&got, l) {
				t.Fatalf("got %+v\nwant %+v", got, *l)
			}
			if len(l.Data) < 100 {
				t.Logf("%d bytes: %x", len(b), b)
			}
		})
	}
}

func TestDecodeLogRefuses(t *testing.T) {
	good := appendLog(nil, sampleLogs()["extensions"])
	cases := map[string][]byte{
		"empty":             nil,
		"short":             {1, 0},
		"unknown format":    append([]byte{2}, good[1:]...),
		"unknown flag":      {1, 0, 8, 1, 1},
		"truncated":         good[:len(good)-1],
		"trailing":          append(good[:len(good):len(good)], 0),
		"data beyond end":   {1, 0, flagData, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x'},
		"overlong uvarint":  {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1},
		"nanos over 1e9":    {1, 0, flagAppendedAt, 1, 1, 2, 0x80, 0x94, 0xeb, 0xdc, 0x03},
		"flagged zero time": append([]byte{1, 0, flagAppendedAt, 1, 1}, zeroTimeBytes()...),
		"time truncated":    {1, 0, flagAppendedAt, 1, 1, 2},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			before := raft.Log{Index: 42}
			l := before
			err := decodeLog(b, &l)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeLog = %v, want ErrCorrupt", err)
			}
			if !sameLog(&l, &before) {
				t.Fatal("decodeLog changed its output on error")
			}
			t.Log(err)
		})
	}
}

func zeroTimeBytes() []byte {
	var b []byte
	b = appendVarint(b, time.Time{}.Unix())
	return append(b, 0)
}

func appendVarint(b []byte, v int64) []byte {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// FuzzDecodeLog: decodeLog never panics, and what it accepts re-encodes
// to a record that decodes to the same entry.
func FuzzDecodeLog(f *testing.F) {
	for _, l := range sampleLogs() {
		if len(l.Data) < 100 {
			f.Add(appendLog(nil, l))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if decodeLog(b, &l) != nil {
			return
		}
		var again raft.Log
		if err := decodeLog(appendLog(nil, &l), &again); err != nil || !sameLog(&l, &again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, l, again)
		}
	})
}
