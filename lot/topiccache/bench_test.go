package topiccache

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

const benchTopics = 100_000

func filled(b *testing.B) (*Cache, []string) {
	c := newCache(b, nil)
	topics := make([]string, benchTopics)
	payload := []byte(`{"temp":21.5,"unit":"C"}`)
	for i := range topics {
		topics[i] = fmt.Sprintf("factory/line%d/press%d/temp", i%50, i)
		if err := c.Publish(topics[i], payload, t0); err != nil {
			b.Fatal(err)
		}
	}
	return c, topics
}

// BenchmarkGet reads random held topics from parallel goroutines.
func BenchmarkGet(b *testing.B) {
	c, topics := filled(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			if _, ok := c.Get(topics[r.IntN(len(topics))]); !ok {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkGetMiss reads topics the cache does not hold.
func BenchmarkGetMiss(b *testing.B) {
	c, _ := filled(b)
	b.ReportAllocs()
	for b.Loop() {
		c.Get("factory/none/temp")
	}
}

// BenchmarkFrameGet resolves GET TOPIC through a frame with two pending
// writes, a trigger and the cache.
func BenchmarkFrameGet(b *testing.B) {
	c, topics := filled(b)
	f := NewFrame(c, nil)
	f.SetTrigger("trigger/topic", []byte("x"))
	f.Publish("out/a", []byte("1"))
	f.Keep("out/b", []byte("2"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.Get(topics[i%len(topics)])
		i++
	}
}

// BenchmarkPublishUpdate replaces held topics' values from parallel
// goroutines (the per-publish cost on the broker's path).
func BenchmarkPublishUpdate(b *testing.B) {
	c, topics := filled(b)
	payload := []byte(`{"temp":22.0,"unit":"C"}`)
	var n atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(n.Add(1) * 7919)
		for pb.Next() {
			_ = c.Publish(topics[i%len(topics)], payload, t0)
			i++
		}
	})
}
