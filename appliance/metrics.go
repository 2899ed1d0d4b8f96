package appliance

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// brokerCollector reads the broker's counters at scrape time, so metrics
// cost nothing on the publish path.
type brokerCollector struct {
	n *Node
}

type metricDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(n *Node) float64
	// byQoS, when set instead of value, gives a series per QoS, labelled
	// qos="0", "1" and "2".
	byQoS func(n *Node) *[3]atomic.Uint64
}

func gauge(name, help string, f func(n *Node) float64) metricDesc {
	return metricDesc{prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, f, nil}
}

func counter(name, help string, f func(n *Node) float64) metricDesc {
	return metricDesc{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, f, nil}
}

// counterByQoS is a counter with a qos label; the sum over the labels is
// the total.
func counterByQoS(name, help string, f func(n *Node) *[3]atomic.Uint64) metricDesc {
	return metricDesc{desc: prometheus.NewDesc(name, help, []string{"qos"}, nil), kind: prometheus.CounterValue, byQoS: f}
}

var qosLabels = [3]string{"0", "1", "2"}

var brokerMetrics = []metricDesc{
	gauge("gantry_connections", "Client connections open now.", func(n *Node) float64 { return float64(n.Broker.Stats().Connections.Load()) }),
	counter("gantry_connects_total", "Client connections accepted.", func(n *Node) float64 { return float64(n.Broker.Stats().Connects.Load()) }),
	counter("gantry_disconnects_total", "Client connections closed.", func(n *Node) float64 { return float64(n.Broker.Stats().Disconnects.Load()) }),
	counterByQoS("gantry_messages_received_total", "PUBLISH packets received from clients, by QoS.", func(n *Node) *[3]atomic.Uint64 { return &n.Broker.Stats().MessagesInByQoS }),
	counterByQoS("gantry_messages_sent_total", "PUBLISH packets sent to clients, by QoS.", func(n *Node) *[3]atomic.Uint64 { return &n.Broker.Stats().MessagesOutByQoS }),
	counter("gantry_bytes_received_total", "Bytes of MQTT packets received.", func(n *Node) float64 { return float64(n.Broker.Stats().BytesIn.Load()) }),
	counter("gantry_bytes_sent_total", "Bytes written to client connections.", func(n *Node) float64 { return float64(n.Broker.Stats().BytesOut.Load()) }),
	counter("gantry_messages_dropped_total", "Messages dropped: queue full, expired, larger than the client's Maximum Packet Size, or for a slow consumer.", func(n *Node) float64 { return float64(n.Broker.Stats().Dropped.Load()) }),
	counter("gantry_publishes_refused_total", "Publishes refused by access rules or the publish pipeline.", func(n *Node) float64 { return float64(n.Broker.Stats().RefusedPublishes.Load()) }),
	counter("gantry_session_congestions_total", "Times a connected session's queue reached Mqtt.MaxQueuedMessages and its publishers were paused.", func(n *Node) float64 { return float64(n.Broker.Stats().Congestions.Load()) }),
	counter("gantry_publisher_pauses_total", "Times a publisher's connection stopped being read until a congested session drained (backpressure).", func(n *Node) float64 { return float64(n.Broker.Stats().PublisherPauses.Load()) }),
	counter("gantry_store_failures_total", "QoS 1/2 publishes refused because the durable store failed to write them.", func(n *Node) float64 { return float64(n.Broker.Stats().StoreFailures.Load()) }),
	counter("gantry_store_withdrawn_total", "Queued deliveries to offline sessions taken back because their durable write failed; their sender sends them again.", func(n *Node) float64 { return float64(n.Broker.Stats().StoreWithdrawn.Load()) }),
	counter("gantry_session_handover_duplicates_total", "Queued messages dropped because a session handed over from another node brought them too (published during the move, both nodes queued them).", func(n *Node) float64 { return float64(n.Broker.Stats().HandoverDuplicates.Load()) }),
	counter("gantry_malformed_packets_total", "Connections closed for a malformed packet or a protocol error.", func(n *Node) float64 { return float64(n.Broker.Stats().MalformedPackets.Load()) }),
	counter("gantry_auth_failures_total", "Failed or refused logins.", func(n *Node) float64 { return float64(n.Broker.Stats().AuthFailures.Load()) }),
	counter("gantry_connections_refused_total", "CONNECTs refused by Mqtt.MaxConnections or Mqtt.MaxConnectionsPerListener.", func(n *Node) float64 { return float64(n.Broker.Stats().ConnectionsRefused.Load()) }),
	counter("gantry_connect_rate_refused_total", "CONNECTs refused by Mqtt.MaxConnectRatePerSecond.", func(n *Node) float64 { return float64(n.Broker.Stats().ConnectRateRefused.Load()) }),
	counter("gantry_connect_timeouts_total", "Connections closed for sending no CONNECT within Mqtt.ConnectTimeoutSeconds.", func(n *Node) float64 { return float64(n.Broker.Stats().ConnectTimeouts.Load()) }),
	counter("gantry_topic_levels_exceeded_total", "Topics and filters refused for having more than Mqtt.MaxTopicLevels levels.", func(n *Node) float64 { return float64(n.Broker.Stats().TopicLevelsExceeded.Load()) }),
	counter("gantry_slow_consumer_drops_total", "QoS 0 messages dropped for clients with more than Mqtt.MaxOutboundBytesPerClient waiting (also in gantry_messages_dropped_total).", func(n *Node) float64 { return float64(n.Broker.Stats().SlowConsumerDrops.Load()) }),
	counter("gantry_slow_consumer_disconnects_total", "Clients disconnected for taking no data for Mqtt.StuckClientTimeoutSeconds.", func(n *Node) float64 { return float64(n.Broker.Stats().SlowConsumerDisconnects.Load()) }),
	counter("gantry_login_throttled_total", "Times a source address was blocked after a burst of failed logins.", func(n *Node) float64 { return float64(n.throttle.Throttled.Load()) }),
	gauge("gantry_inflight_messages", "QoS 1/2 messages sent to clients and not yet acknowledged.", func(n *Node) float64 { _, f := n.Broker.QueueCounts(); return float64(f) }),
	gauge("gantry_queued_messages", "Messages waiting in session queues.", func(n *Node) float64 { q, _ := n.Broker.QueueCounts(); return float64(q) }),
	gauge("gantry_retained_messages", "Retained messages stored.", func(n *Node) float64 { return float64(n.Broker.RetainedCount()) }),
	gauge("gantry_subscriptions", "Subscriptions of all sessions.", func(n *Node) float64 { return float64(n.Broker.SubscriptionCount()) }),
	gauge("gantry_sessions", "Sessions, connected or not.", func(n *Node) float64 { return float64(n.Broker.SessionCount()) }),
	gauge("gantry_users", "Users in the user store.", func(n *Node) float64 { return float64(n.Users.Len()) }),
}

func (c brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range brokerMetrics {
		ch <- m.desc
	}
}

func (c brokerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range brokerMetrics {
		if m.byQoS != nil {
			counts := m.byQoS(c.n)
			for q := range counts {
				ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(counts[q].Load()), qosLabels[q])
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(c.n))
	}
}

// metricsHandler serves /metrics: the broker's series and the Go runtime's.
func (n *Node) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(brokerCollector{n}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if n.store != nil {
		reg.MustRegister(storeCollector{n.store})
	}
	if n.Cluster != nil {
		reg.MustRegister(clusterCollector{n.Cluster}, lotCollector{n}) // wire_cluster_lot.go
		if n.dataPlane != nil {
			reg.MustRegister(dataPlaneCollector{n.dataPlane})
		}
		if n.sessions != nil {
			reg.MustRegister(sessionsCollector{n.sessions}) // wire_sessions.go
		}
	}
	if n.drivers != nil {
		reg.MustRegister(connectorCollector{n.drivers})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil})
}
