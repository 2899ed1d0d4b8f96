package appliance

import (
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"gantry/drivers"
	"gantry/drivers/engine"
	"gantry/lot/interp"
	"gantry/lot/runtime"
	"gantry/lot/syntax"
)

// openDrivers builds the connector manager; the LoT engine then hands it
// the deployed connectors (lotConnectors). On one node every connector
// runs; the cluster will place exclusive ones through Manager.Run and
// Manager.Stop.
func (n *Node) openDrivers() error {
	// On a clustered node exclusive connectors run where the owner map
	// says (wire_cluster_work.go); a node whose clustering does not start
	// runs them all (placeWork).
	m, err := engine.New(engine.Options{Broker: n.Broker, Logger: n.log, WaitForOwner: n.cfg.Cluster.Enabled,
		PKIDir: pkiDir(n.cfg.DataDir, os.LookupEnv)})
	if err != nil {
		return err
	}
	n.drivers = m
	return nil
}

// pkiDir is where server connectors keep their certificates: the PKI_DIR
// environment variable (the seed's name; in a container, a writable
// folder), else DataDir/pki.
func pkiDir(dataDir string, env func(string) (string, bool)) string {
	if d, ok := env("PKI_DIR"); ok && d != "" {
		return d
	}
	return filepath.Join(dataDir, "pki")
}

// closeDrivers stops every connector (each closes its device connection).
func (n *Node) closeDrivers() {
	if n.drivers != nil {
		n.drivers.Close()
	}
}

// lotConnectors adapts the manager to runtime.Connectors.
type lotConnectors struct{ m *engine.Manager }

func (l lotConnectors) Check(c *syntax.Connector, env interp.EnvReader) error {
	return l.m.Check(c, drivers.Env(env))
}

func (l lotConnectors) Deploy(list []runtime.DeployedConnector, env interp.EnvReader) {
	defs := make([]engine.Definition, len(list))
	for i, d := range list {
		defs[i] = engine.Definition{Name: d.Name, Source: d.Source, Def: d.Def}
	}
	l.m.Deploy(defs, env)
}

// connectorCollector serves each connector's counters on /metrics.
type connectorCollector struct{ m *engine.Manager }

var (
	connLabels       = []string{"connector", "type"}
	connUpDesc       = prometheus.NewDesc("gantry_connector_up", "1 when the connector's device connection is open.", connLabels, nil)
	connHealthDesc   = prometheus.NewDesc("gantry_connector_health", "Connector health: 2 Green, 1 Yellow (tags failing), 0 Red.", connLabels, nil)
	connPollDesc     = prometheus.NewDesc("gantry_connector_last_poll_seconds", "Duration of the connector's last batch read.", connLabels, nil)
	connTagErrorDesc = prometheus.NewDesc("gantry_connector_tag_errors", "Tags the device refuses now.", connLabels, nil)
	connCounters     = []struct {
		desc  *prometheus.Desc
		value func(s *engine.Snapshot) uint64
	}{
		{prometheus.NewDesc("gantry_connector_polls_total", "Batch reads of the connector's mappings.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Polls }},
		{prometheus.NewDesc("gantry_connector_reads_total", "Tag values read.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Reads }},
		{prometheus.NewDesc("gantry_connector_read_errors_total", "Tag reads refused and batch reads failed.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.ReadErrors }},
		{prometheus.NewDesc("gantry_connector_published_total", "Values published.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Published }},
		{prometheus.NewDesc("gantry_connector_writes_total", "Values written to the device.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Writes }},
		{prometheus.NewDesc("gantry_connector_write_errors_total", "Writes refused or failed.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.WriteErrors }},
		{prometheus.NewDesc("gantry_connector_connects_total", "Device connections opened.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Connects }},
		{prometheus.NewDesc("gantry_connector_failures_total", "Device connections that failed (each is closed and redialled).", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Failures }},
		{prometheus.NewDesc("gantry_connector_messages_received_total", "Bridge: messages received from the remote broker.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Received }},
		{prometheus.NewDesc("gantry_connector_messages_sent_total", "Bridge: messages sent to the remote broker.", connLabels, nil), func(s *engine.Snapshot) uint64 { return s.Sent }},
	}
)

// listenerUpDesc is the seed's coreflux_route_listener_up: 1 for each
// server connector listening, 0 for one whose bind failed.
var listenerUpDesc = prometheus.NewDesc("coreflux_route_listener_up", "1 when a server connector's listener is bound, 0 when its bind failed (not retried).",
	[]string{"connector", "type", "address"}, nil)

func (c connectorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- listenerUpDesc
	ch <- connUpDesc
	ch <- connHealthDesc
	ch <- connPollDesc
	ch <- connTagErrorDesc
	for _, k := range connCounters {
		ch <- k.desc
	}
}

func (c connectorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.m.Listeners() {
		up := 0.0
		if l.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(listenerUpDesc, prometheus.GaugeValue, up, l.Connector, l.Type, l.Address)
	}
	for _, s := range c.m.Snapshots() {
		up := 0.0
		if s.Connection == engine.Connected || s.Connection == engine.Listening {
			up = 1
		}
		h := map[string]float64{engine.Green: 2, engine.Yellow: 1}[s.Health]
		ch <- prometheus.MustNewConstMetric(connUpDesc, prometheus.GaugeValue, up, s.Name, s.Type)
		ch <- prometheus.MustNewConstMetric(connHealthDesc, prometheus.GaugeValue, h, s.Name, s.Type)
		ch <- prometheus.MustNewConstMetric(connPollDesc, prometheus.GaugeValue, s.PollSeconds, s.Name, s.Type)
		ch <- prometheus.MustNewConstMetric(connTagErrorDesc, prometheus.GaugeValue, float64(len(s.TagErrors)), s.Name, s.Type)
		for _, k := range connCounters {
			ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.value(&s)), s.Name, s.Type)
		}
	}
}

// routeListeners is GET /cluster's routeListeners: every server
// connector's listener on this node with its state (the seed's "Server
// connectors"); empty, not null, when there is none.
func (n *Node) routeListeners() []engine.Listener {
	if n.drivers == nil {
		return []engine.Listener{}
	}
	return n.drivers.Listeners()
}
