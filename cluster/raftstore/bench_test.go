package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs stores batches of 1 and 64 entries of 256 bytes of
// data, with the fsync Raft needs and without; ns/op is per batch.
func BenchmarkStoreLogs(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("batch=%d/nosync=%v", batch, noSync), func(b *testing.B) {
				s := newStore(b, Options{NoSync: noSync})
				logs := make([]*raft.Log, batch)
				data := make([]byte, 256)
				for i := range logs {
					logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
				}
				next := uint64(1)
				b.ReportAllocs()
				b.SetBytes(int64(batch * len(data)))
				for b.Loop() {
					for _, l := range logs {
						l.Index = next
						next++
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int(next-1)), "ns/entry")
			})
		}
	}
}

// BenchmarkGetLog reads entries back from a store of 10000.
func BenchmarkGetLog(b *testing.B) {
	s := newStore(b, Options{NoSync: true})
	if err := s.StoreLogs(entries(1, 10000, 1)); err != nil {
		b.Fatal(err)
	}
	var l raft.Log
	i := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.GetLog(1+i%10000, &l); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
