package appliance

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gantry/cluster"
	"gantry/cluster/dataplane"
	"gantry/cluster/signing"
)

// peersEvery is how often the data plane's links are matched to the
// cluster's membership.
const peersEvery = time.Second

// openDataPlane builds the data plane of a clustered node that has a
// cluster user (Cluster.DataPlaneUsername): it hooks into the broker's
// publish pipeline, admits the peers' links, and keeps the internal
// topics to the cluster user.
func (n *Node) openDataPlane() error {
	cl := &n.cfg.Cluster
	if n.Cluster == nil || cl.DataPlaneUsername == "" || (!cl.DataPlaneEnabled && !cl.ReplicationEnabled) {
		return nil
	}
	if cl.SharedSecret == "" {
		n.log.Error("Cluster.SharedSecret is empty: nodes do not exchange messages (the links between nodes are authenticated and signed with it)",
			"component", "dataplane")
		return nil
	}
	opts := dataplane.Options{
		NodeName: cl.NodeName, ClusterID: cl.ClusterId, Username: cl.DataPlaneUsername,
		Signer:     signing.New([]byte(cl.SharedSecret), nil),
		BestEffort: cl.DataPlaneEnabled, Reliable: cl.ReplicationEnabled,
		ForwardQueueEntries: cl.ReplicationForwardQueueEntries,
		Broker:              n.Broker, Logger: n.log,
	}
	if cl.UseTls {
		if n.cfg.Mqtt.CertFile == "" || n.cfg.Mqtt.TlsPort == 0 {
			n.log.Error("Cluster.UseTls is on but the TLS listener is off (Mqtt.CertFile, Mqtt.TlsPort): nodes do not exchange messages",
				"component", "dataplane")
			return nil
		}
		opts.TLS = n.linkTLS
	}
	if n.cfg.Durability.Enabled {
		// Acknowledged means on disk here too: the reliable stream to the
		// peers survives a restart of this node.
		opts.DataDir = cl.DataDir
	}
	if cl.ReplicationEnabled {
		opts.Replication = &dataplane.Replication{
			Gate:           cl.QuorumGateEnabled,
			Timeout:        time.Duration(cl.ReplicationTimeoutMs) * time.Millisecond,
			Window:         cl.ReplicationWindow,
			CompactEvery:   cl.ReplicationCompactEveryRecords,
			Replay:         time.Duration(cl.ReplicationReplaySeconds) * time.Second,
			DeliverReplays: !cl.ReplicationDedupDelivered,
		}
		if cl.ReplicationTrace {
			opts.Trace = &dataplane.Trace{Dir: filepath.Join(cl.DataDir, "replication", "trace"),
				MaxBytes: int64(cl.ReplicationTraceMaxMegabytes) << 20}
		}
		// 2.5 s: well inside FailoverDelay (6 s), after which the leader
		// moves a silent node's copies; elections take well under it.
		opts.InContact = func() bool { return n.Cluster.LeaderContact(2500 * time.Millisecond) }
		opts.CaughtUp = func(p uint32, node string, _ uint64) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return n.Cluster.ReportCaughtUp(ctx, int(p), node)
		}
	}
	p, err := dataplane.New(opts)
	if err != nil {
		return err
	}
	n.dataPlane = p
	if opts.Replication != nil {
		// New copies are filled by their partition's owner, which reports
		// them caught up; the map reaches the data plane as it is applied.
		n.Cluster.SetCopiesReported(true)
		n.Cluster.OnState(func(st cluster.State) { p.SetMap(st.Partitions) })
		p.SetMap(n.Cluster.Partitions())
	}
	n.Broker.AddPublishHook(p)
	n.Broker.SetSubscribeHook(p) // a SUBACK waits until the peers know the interest
	n.Broker.AddObserver(p)      // a peer's link going away makes its interest stale
	n.Broker.SetAuthenticator(p.Authenticator(n.authn))
	n.Broker.SetAuthorizer(p.Authorizer(n.LoT.Authorizer()))
	if cl.Topology == "ring" {
		n.log.Info("Cluster.Topology ring runs as the mesh: with interest routing the mesh already sends only where a subscriber is, and the quorum write needs every link (docs/cluster.md)", "component", "dataplane")
	}
	return nil
}

// serveTrace answers GET /cluster/trace: the newest lines of the
// replication trace (Cluster.ReplicationTrace) as JSON lines, oldest
// first; ?limit= (1000, up to 100000), ?client=, ?topic=, ?partition=.
func (n *Node) serveTrace(w http.ResponseWriter, r *http.Request) {
	if n.dataPlane == nil {
		http.Error(w, "the data plane is not running on this node", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	f := dataplane.TraceFilter{Client: q.Get("client"), Topic: q.Get("topic"), Partition: -1, Limit: 1000}
	if v := q.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > 100000 {
			http.Error(w, "limit: want 1..100000", http.StatusBadRequest)
			return
		}
		f.Limit = l
	}
	if v := q.Get("partition"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 {
			http.Error(w, "partition: want a partition number", http.StatusBadRequest)
			return
		}
		f.Partition = p
	}
	var buf bytes.Buffer
	if err := n.dataPlane.ReadTrace(&buf, f); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Write(buf.Bytes())
}

// linkTLS is the links' TLS client configuration (Cluster.UseTls): the
// peer's certificate must be valid for its address and signed by a CA of
// Mqtt.ClientCaFile (or, without one, by a system root); with mutual TLS
// the link presents this node's own certificate.
func (n *Node) linkTLS(host string) (*tls.Config, error) {
	if n.tls == nil {
		return nil, errors.New("Cluster.UseTls needs the TLS listener: set Mqtt.CertFile and Mqtt.KeyFile")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, RootCAs: n.tls.cas.Load()}
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return n.tls.cert.Load(), nil }
	return c, nil
}

// dataPlanePort is the port the links dial: the TLS port with UseTls.
func (n *Node) dataPlanePort() int {
	if n.cfg.Cluster.UseTls {
		return n.cfg.Mqtt.TlsPort
	}
	return n.cfg.Cluster.DataPlaneMqttPort
}

// runDataPlane keeps the links in line with the membership until stop.
func (n *Node) runDataPlane(stop <-chan struct{}) {
	t := time.NewTicker(peersEvery)
	defer t.Stop()
	for {
		// Until Raft has read its configuration the members are unknown,
		// not gone: the links stay as they are.
		if st := n.Cluster.Status(); len(st.Members) > 0 {
			n.dataPlane.SetPeers(dataPlanePeers(st, n.dataPlanePort()))
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// dataPlanePeers maps every other member to its MQTT address: the host of
// its cluster address with the data-plane port.
func dataPlanePeers(st cluster.Status, port int) map[string]string {
	peers := make(map[string]string, len(st.Members))
	for _, m := range st.Members {
		if m.Self || m.Name == st.NodeName {
			continue
		}
		host, _, err := net.SplitHostPort(m.Address)
		if err != nil {
			continue
		}
		peers[m.Name] = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return peers
}

// dataPlaneCollector exports the links' counters.
type dataPlaneCollector struct{ p *dataplane.Plane }

var (
	dpBacklog = prometheus.NewDesc("coreflux_replication_forward_backlog",
		"QoS 1/2 messages waiting for a peer's confirmation.", []string{"peer"}, nil)
	dpDropped = prometheus.NewDesc("coreflux_replication_forward_dropped_total",
		"QoS 1/2 messages dropped for a peer beyond ReplicationForwardQueueEntries.", []string{"peer"}, nil)
	dpHolds = prometheus.NewDesc("coreflux_replication_forward_holds_total",
		"Times this node's publishers were held back (not read) because its stream reached ReplicationForwardQueueEntries while a peer that is up and confirming still needed its oldest messages.", []string{"peer"}, nil)
	dpBeDropped = prometheus.NewDesc("coreflux_cluster_dataplane_best_effort_dropped_total",
		"QoS 0 messages not sent to a peer (link down or too slow).", []string{"peer"}, nil)
	dpUp = prometheus.NewDesc("coreflux_cluster_dataplane_link_up",
		"1 while the link to a peer is connected.", []string{"peer"}, nil)
	dpReceived = prometheus.NewDesc("coreflux_cluster_dataplane_received_messages_total",
		"Messages peers delivered to this node.", nil, nil)
	dpRefused = prometheus.NewDesc("coreflux_cluster_dataplane_dropped_frames_total",
		"Frames and link logins from peers dropped: forged (a bad signature or link token), replayed (a frame not newer than the last accepted, or a link token used already or signed before this node started), corrupt, sent by another user (unauthorized), or sent behind a frame this node failed to write (afterFailure: the peer sends both again).", []string{"reason"}, nil)
	dpDuplicates = prometheus.NewDesc("coreflux_cluster_dataplane_duplicates_dropped_total",
		"Reliable messages a peer sent again that this node had delivered already.", nil, nil)
	repFailures = prometheus.NewDesc("coreflux_replication_quorum_failures_total",
		"QoS 1/2 publishes refused (0x97, or 0x80 for reason disk) because no majority of their partition's copies stored them.", []string{"reason"}, nil)
	repWrites = prometheus.NewDesc("coreflux_replication_quorum_writes_total",
		"QoS 1/2 publishes acknowledged once a majority of their partition's copies stored them.", nil, nil)
	repInflight = prometheus.NewDesc("coreflux_replication_inflight",
		"QoS 1/2 publishes waiting for their majority now.", nil, nil)
	repCopies = prometheus.NewDesc("coreflux_partition_copy_records",
		"Records this node holds of a partition's copy.", []string{"partition"}, nil)
	repReplayed = prometheus.NewDesc("coreflux_replication_replayed_total",
		"Records this node re-delivered for a node that was lost (failover replay).", nil, nil)
	repReplayDups = prometheus.NewDesc("coreflux_replication_replay_duplicates_dropped_total",
		"Replay copies this node dropped because it had delivered them (ReplicationDedupDelivered).", nil, nil)
	repStale = prometheus.NewDesc("coreflux_replication_stale_copies_refused_total",
		"Copies this node refused because they were written in a partition epoch that is over (a deposed owner's map).", nil, nil)
)

func (c dataPlaneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dpBacklog, dpDropped, dpHolds, dpBeDropped, dpUp, dpReceived, dpRefused, dpDuplicates,
		repFailures, repWrites, repInflight, repCopies, repReplayed, repReplayDups, repStale} {
		ch <- d
	}
}

func (c dataPlaneCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Status()
	for _, p := range st.Peers {
		ch <- prometheus.MustNewConstMetric(dpBacklog, prometheus.GaugeValue, float64(p.Backlog), p.Name)
		ch <- prometheus.MustNewConstMetric(dpDropped, prometheus.CounterValue, float64(p.Dropped), p.Name)
		ch <- prometheus.MustNewConstMetric(dpHolds, prometheus.CounterValue, float64(p.Holds), p.Name)
		ch <- prometheus.MustNewConstMetric(dpBeDropped, prometheus.CounterValue, float64(p.BeDropped), p.Name)
		ch <- prometheus.MustNewConstMetric(dpUp, prometheus.GaugeValue, b2f(p.Connected), p.Name)
	}
	r := st.Received
	ch <- prometheus.MustNewConstMetric(dpReceived, prometheus.CounterValue, float64(r.Messages))
	ch <- prometheus.MustNewConstMetric(dpDuplicates, prometheus.CounterValue, float64(r.Duplicates))
	for reason, v := range map[string]uint64{"forged": r.Forged, "replayed": r.Replayed, "corrupt": r.Corrupt, "unauthorized": r.Refused, "afterFailure": r.AfterFailure} {
		ch <- prometheus.MustNewConstMetric(dpRefused, prometheus.CounterValue, float64(v), reason)
	}
	if rs := st.Replication; rs != nil {
		for reason, v := range rs.Failures {
			ch <- prometheus.MustNewConstMetric(repFailures, prometheus.CounterValue, float64(v), reason)
		}
		ch <- prometheus.MustNewConstMetric(repWrites, prometheus.CounterValue, float64(rs.Acknowledged))
		ch <- prometheus.MustNewConstMetric(repInflight, prometheus.GaugeValue, float64(rs.InFlight))
		for part, n := range rs.Copies {
			ch <- prometheus.MustNewConstMetric(repCopies, prometheus.GaugeValue, float64(n), strconv.Itoa(int(part)))
		}
		ch <- prometheus.MustNewConstMetric(repReplayed, prometheus.CounterValue, float64(rs.ReplayedOut))
		ch <- prometheus.MustNewConstMetric(repReplayDups, prometheus.CounterValue, float64(rs.ReplayDuplicates))
		ch <- prometheus.MustNewConstMetric(repStale, prometheus.CounterValue, float64(rs.StaleCopies))
	}
}
