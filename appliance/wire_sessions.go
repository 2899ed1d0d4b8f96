package appliance

import (
	"github.com/prometheus/client_golang/prometheus"

	"gantry/cluster/dataplane"
)

// This file joins the broker's sessions to the cluster's (docs/cluster.md,
// "Sessions follow the client"): the data plane's session exchange claims
// each CONNECT's session from the other nodes before it attaches, keeps
// the directory of every node's persistent sessions, and answers the
// peers' requests on the operations port (POST /cluster/sessions/...,
// signed with SharedSecret; GET /cluster/sessions shows this node's view).

// openSessions builds the session exchange of a node whose data plane
// runs.
func (n *Node) openSessions() {
	if n.dataPlane == nil {
		return
	}
	opts := dataplane.SessionOptions{Broker: n.Broker, Members: n.otherMembers, PeerOps: n.Cluster.PeerOps}
	if n.cfg.Durability.Enabled {
		opts.DataDir = n.cfg.Cluster.DataDir // the claims survive a restart as the sessions do
	}
	n.dataPlane.UseRequests(n.Cluster.Requests()) // one replay cache and bound per node (cluster/signing, "Requests")
	n.sessions = n.dataPlane.NewSessions(opts)
	n.Broker.SetSessionClaimer(n.sessions)
	n.Broker.AddObserver(n.sessions)
}

// otherMembers lists the members of the cluster but this node.
func (n *Node) otherMembers() []string {
	var out []string
	for _, m := range n.Cluster.Status().Members {
		if !m.Self && m.Name != n.cfg.Cluster.NodeName {
			out = append(out, m.Name)
		}
	}
	return out
}

// startSessions pushes the session directory, and exchanges it with each
// peer whose link comes up, until Shutdown.
func (n *Node) startSessions() {
	if n.sessions == nil {
		return
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.sessions.Run(n.stop)
	}()
	go func() {
		defer n.wg.Done()
		n.sessions.WatchLinks(n.stop)
	}()
}

// sessionsCollector exports the session exchange's counters.
type sessionsCollector struct{ s *dataplane.Sessions }

var (
	sessHeld = prometheus.NewDesc("coreflux_cluster_sessions_held",
		"Persistent sessions this node holds (connected or not).", nil, nil)
	sessClaims = prometheus.NewDesc("coreflux_cluster_session_claims_total",
		"CONNECTs that asked the other nodes for the client's session.", nil, nil)
	sessMoved = prometheus.NewDesc("coreflux_cluster_session_handovers_total",
		"Sessions handed over with their messages: in (taken from another node, or handed back by one that returned) and out (exported to a claiming node, or returned to the new holder).",
		[]string{"direction"}, nil)
	sessDirectory = prometheus.NewDesc("coreflux_cluster_sessions_from_directory_total",
		"Sessions served from the directory because their holder did not answer.", nil, nil)
	sessCopies = prometheus.NewDesc("coreflux_cluster_session_messages_from_copies_total",
		"Messages queued from the partition copies for sessions whose holder was down.", nil, nil)
	sessLent = prometheus.NewDesc("coreflux_cluster_sessions_lent",
		"Sessions this node handed over and keeps until the new node confirms it stored them.", nil, nil)
	sessTakenBack = prometheus.NewDesc("coreflux_cluster_session_lends_taken_back_total",
		"Sessions handed over without the new node's confirmation, taken back and handed over again (their messages may arrive twice).", nil, nil)
	sessReturnFailed = prometheus.NewDesc("coreflux_cluster_session_returns_failed_total",
		"Hand-overs of a session kept while this node was away that its new holder did not take (tried again at the next directory push).", nil, nil)
)

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessHeld, sessClaims, sessMoved, sessDirectory, sessCopies, sessLent, sessTakenBack, sessReturnFailed} {
		ch <- d
	}
}

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	ch <- prometheus.MustNewConstMetric(sessHeld, prometheus.GaugeValue, float64(len(st.Held)))
	ch <- prometheus.MustNewConstMetric(sessClaims, prometheus.CounterValue, float64(st.Claims))
	ch <- prometheus.MustNewConstMetric(sessMoved, prometheus.CounterValue, float64(st.Imported), "in")
	ch <- prometheus.MustNewConstMetric(sessMoved, prometheus.CounterValue, float64(st.Exported+st.Returned), "out")
	ch <- prometheus.MustNewConstMetric(sessDirectory, prometheus.CounterValue, float64(st.FromDirectory))
	ch <- prometheus.MustNewConstMetric(sessCopies, prometheus.CounterValue, float64(st.FromCopies))
	ch <- prometheus.MustNewConstMetric(sessLent, prometheus.GaugeValue, float64(st.Lent))
	ch <- prometheus.MustNewConstMetric(sessTakenBack, prometheus.CounterValue, float64(st.TakenBack))
	ch <- prometheus.MustNewConstMetric(sessReturnFailed, prometheus.CounterValue, float64(st.ReturnFailed))
}
