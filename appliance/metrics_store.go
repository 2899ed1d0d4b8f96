package appliance

import (
	"github.com/prometheus/client_golang/prometheus"

	"gantry/broker/store"
)

// storeCollector exports the durable store's counters and its commit
// latency histogram (each commit is one fsync), read at scrape time.
type storeCollector struct {
	st *store.Store
}

var (
	storeCommits  = prometheus.NewDesc("gantry_store_commits_total", "Write transactions of the durable store (one fsync each).", nil, nil)
	storeOps      = prometheus.NewDesc("gantry_store_ops_total", "Operations committed to the durable store.", nil, nil)
	storeBytes    = prometheus.NewDesc("gantry_store_bytes_written_total", "Bytes of keys and values written by committed operations.", nil, nil)
	storeFailed   = prometheus.NewDesc("gantry_store_failed_writes_total", "Write transactions that failed (disk full, I/O error).", nil, nil)
	storePending  = prometheus.NewDesc("gantry_store_pending_ops", "Operations queued for the next commit.", nil, nil)
	storeLatency  = prometheus.NewDesc("gantry_store_commit_seconds", "Duration of write transactions, fsync included.", nil, nil)
	latencyBounds = store.LatencyBounds()
)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{storeCommits, storeOps, storeBytes, storeFailed, storePending, storeLatency} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	ch <- prometheus.MustNewConstMetric(storeCommits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(storeOps, prometheus.CounterValue, float64(s.Ops))
	ch <- prometheus.MustNewConstMetric(storeBytes, prometheus.CounterValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(storeFailed, prometheus.CounterValue, float64(s.FailedWrites))
	ch <- prometheus.MustNewConstMetric(storePending, prometheus.GaugeValue, float64(s.Pending))
	buckets := make(map[float64]uint64, len(latencyBounds))
	var cumulative uint64
	for i, b := range latencyBounds {
		if i < len(s.LatencyCounts) {
			cumulative += s.LatencyCounts[i]
		}
		buckets[b.Seconds()] = cumulative
	}
	var total uint64
	for _, n := range s.LatencyCounts {
		total += n
	}
	ch <- prometheus.MustNewConstHistogram(storeLatency, total, s.LatencySum.Seconds(), buckets)
}
