package store

import (
	"sync"
	"time"
)

// latencyBounds are the upper bounds of the commit latency histogram's
// buckets: 50µs doubling up to ~6.7s; a last bucket holds the rest.
var latencyBounds = func() []time.Duration {
	b := make([]time.Duration, 18)
	d := 50 * time.Microsecond
	for i := range b {
		b[i] = d
		d *= 2
	}
	return b
}()

// LatencyBounds returns the upper bounds of Stats.LatencyCounts' buckets
// (the last count, one more than the bounds, is the +Inf bucket).
func LatencyBounds() []time.Duration { return append([]time.Duration(nil), latencyBounds...) }

// Stats are the store's counters since Open, for metrics.
type Stats struct {
	Commits           uint64 // write transactions that carried operations
	Ops               uint64 // operations committed
	Bytes             uint64 // bytes of keys and values written by committed operations
	FailedWrites      uint64 // write transactions that failed (their operations count in FailedOps)
	FailedOps         uint64 // operations whose done got an error (failed write or invalid op)
	AliveStamps       uint64 // idle transactions that only stamped meta.lastAlive
	Checkpoints       uint64 // checkpoints that applied the log to the store file
	CheckpointOps     uint64 // operations they applied
	FailedCheckpoints uint64 // checkpoints that failed (retried with the next)
	LogBytes          int64  // bytes of the write-ahead log not yet checkpointed
	Pending           int    // operations queued now

	LastCommitLatency time.Duration // duration of the last write transaction, fsync included
	// LatencyCounts counts write transactions per bucket of LatencyBounds
	// (not cumulative), plus a last +Inf bucket; LatencySum is their total.
	LatencyCounts []uint64
	LatencySum    time.Duration
}

// Quantile estimates the q-quantile (0 < q <= 1) of the commit latency as
// the upper bound of the bucket that holds it; 0 before the first commit.
// A quantile in the +Inf bucket is reported as twice the last bound.
func (s Stats) Quantile(q float64) time.Duration {
	var total uint64
	for _, c := range s.LatencyCounts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range s.LatencyCounts {
		seen += c
		if seen >= rank && i < len(latencyBounds) {
			return latencyBounds[i]
		}
	}
	return 2 * latencyBounds[len(latencyBounds)-1]
}

// P99 is Quantile(0.99).
func (s Stats) P99() time.Duration { return s.Quantile(0.99) }

// counters holds the writer's statistics.
type counters struct {
	mu sync.Mutex // guards s
	s  Stats
}

func (c *counters) init() {
	c.s.LatencyCounts = make([]uint64, len(latencyBounds)+1)
}

// commit records one write transaction of ops operations and n bytes.
func (c *counters) commit(ops, n int, took time.Duration, err error) {
	i := 0
	for i < len(latencyBounds) && took > latencyBounds[i] {
		i++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.LastCommitLatency = took
	c.s.LatencyCounts[i]++
	c.s.LatencySum += took
	if err != nil {
		c.s.FailedWrites++
		c.s.FailedOps += uint64(ops)
		return
	}
	if ops == 0 {
		c.s.AliveStamps++
		return
	}
	c.s.Commits++
	c.s.Ops += uint64(ops)
	c.s.Bytes += uint64(n)
}

// checkpoint records one checkpoint of ops operations.
func (c *counters) checkpoint(ops int, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.s.FailedCheckpoints++
		return
	}
	c.s.Checkpoints++
	c.s.CheckpointOps += uint64(ops)
}

func (c *counters) setLogBytes(n int64) {
	c.mu.Lock()
	c.s.LogBytes = n
	c.mu.Unlock()
}

func (c *counters) invalid(ops int) {
	c.mu.Lock()
	c.s.FailedOps += uint64(ops)
	c.mu.Unlock()
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.LatencyCounts = append([]uint64(nil), c.s.LatencyCounts...)
	return s
}
