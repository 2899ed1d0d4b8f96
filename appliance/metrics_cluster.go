package appliance

import (
	"github.com/prometheus/client_golang/prometheus"

	"gantry/cluster"
)

// clusterCollector reads the cluster's status at scrape time. Series are
// prefixed coreflux_cluster_ and coreflux_partition, the names of the
// Coreflux reference.
type clusterCollector struct {
	c *cluster.Node
}

var clusterMetrics = []struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(st *cluster.Status) float64
}{
	{prometheus.NewDesc("coreflux_cluster_is_leader", "1 when this node leads the cluster.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return b2f(st.Leadership.IsLeader) }},
	{prometheus.NewDesc("coreflux_cluster_has_leader", "1 when this node knows a leader.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return b2f(st.Leadership.Leader != "") }},
	{prometheus.NewDesc("coreflux_cluster_term", "Raft term this node is in.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.Leadership.Term) }},
	{prometheus.NewDesc("coreflux_cluster_members_total", "Members of the cluster as this node knows them.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.MembersTotal) }},
	{prometheus.NewDesc("coreflux_cluster_members_alive", "Members known to answer (trust the leader's value).", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.MembersAlive) }},
	{prometheus.NewDesc("coreflux_cluster_leader_changes_total", "Leaders this node has seen elected.", nil, nil), prometheus.CounterValue,
		func(st *cluster.Status) float64 { return float64(st.LeaderChanges) }},
	{prometheus.NewDesc("coreflux_cluster_commit_index", "Raft commit index on this node.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.Raft.CommitIndex) }},
	{prometheus.NewDesc("coreflux_cluster_applied_index", "Raft index applied on this node.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.Raft.AppliedIndex) }},
	{prometheus.NewDesc("coreflux_partitions_total", "Partitions of QoS 1/2 traffic.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(len(st.Partitions.Partitions)) }},
	{prometheus.NewDesc("coreflux_partitions_owned", "Partitions this node owns.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.OwnedByMe) }},
	{prometheus.NewDesc("coreflux_partition_map_version", "Version of the committed partition map.", nil, nil), prometheus.GaugeValue,
		func(st *cluster.Status) float64 { return float64(st.Partitions.Version) }},
}

// The requests between nodes (cluster/signing, "Requests"): one set of
// counters per node, over the peer protocol, the session exchange and
// the kept values.
var (
	reqAccepted = prometheus.NewDesc("coreflux_cluster_requests_accepted_total",
		"Signed requests from other nodes this node accepted (peer protocol, LoT status, sessions, kept values).", nil, nil)
	reqRefused = prometheus.NewDesc("coreflux_cluster_requests_refused_total",
		"Requests from other nodes refused, by reason: forged, unsigned, stale, malformed, replayed, wrong_path, wrong_node, too_large, busy, cache_full, before_start, incomplete.",
		[]string{"reason"}, nil)
	reqCached = prometheus.NewDesc("coreflux_cluster_request_ids_cached",
		"Request ids remembered to refuse their replay (bounded; cache_full refusals when full).", nil, nil)
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range clusterMetrics {
		ch <- m.desc
	}
	ch <- reqAccepted
	ch <- reqRefused
	ch <- reqCached
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.c.Status()
	for _, m := range clusterMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st))
	}
	rs := c.c.Requests().Stats()
	ch <- prometheus.MustNewConstMetric(reqAccepted, prometheus.CounterValue, float64(rs.Accepted))
	for reason, v := range rs.Refused {
		ch <- prometheus.MustNewConstMetric(reqRefused, prometheus.CounterValue, float64(v), reason)
	}
	ch <- prometheus.MustNewConstMetric(reqCached, prometheus.GaugeValue, float64(rs.Cached))
}
