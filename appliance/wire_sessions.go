package appliance

import (
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

// startSessions pushes the session directory until Shutdown.
func (n *Node) startSessions() {
	if n.sessions == nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.sessions.Run(n.stop)
	}()
}
