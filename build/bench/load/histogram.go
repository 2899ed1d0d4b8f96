package load

import (
	"encoding/binary"
	"math/bits"
	"time"
)

// StampSize is the length of the stamp at the start of every payload and
// so the smallest payload size.
const StampSize = 16

// stamp writes the publisher index, sequence number and send time into
// the first StampSize bytes of p.
func stamp(p []byte, pub, seq uint32, sentNs int64) {
	binary.LittleEndian.PutUint32(p[0:], pub)
	binary.LittleEndian.PutUint32(p[4:], seq)
	binary.LittleEndian.PutUint64(p[8:], uint64(sentNs))
}

// readStamp decodes a stamp; ok is false when p is too short.
func readStamp(p []byte) (pub, seq uint32, sentNs int64, ok bool) {
	if len(p) < StampSize {
		return 0, 0, 0, false
	}
	return binary.LittleEndian.Uint32(p[0:]), binary.LittleEndian.Uint32(p[4:]),
		int64(binary.LittleEndian.Uint64(p[8:])), true
}

// Histogram buckets: exact below histSub nanoseconds, then histSub/2
// buckets per power of two (relative error under 1/64), up to histMax.
const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	histMaxBits = 40 // 2^40 ns: about 18 minutes
	histBuckets = (histMaxBits-histSubBits+1)*(histSub/2) + histSub
)

// Histogram counts durations in log-linear buckets. The zero value is
// empty and ready to use; it is not safe for concurrent use.
type Histogram struct {
	counts []uint64
	n      uint64
	max    int64
}

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	if v >= 1<<histMaxBits {
		v = 1<<histMaxBits - 1
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return shift*(histSub/2) + int(v>>shift)
}

// bucketValue returns the middle of bucket i in nanoseconds.
func bucketValue(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	shift := i/(histSub/2) - 1
	top := int64(i - shift*(histSub/2))
	return top<<shift + (int64(1)<<shift)/2
}

// Record adds one duration in nanoseconds.
func (h *Histogram) Record(ns int64) {
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	h.counts[bucketOf(ns)]++
	h.n++
	h.max = max(h.max, ns)
}

// Merge adds the counts of o.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest duration recorded.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the duration below which a fraction q of the recorded
// ones lie (0 when empty).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}
