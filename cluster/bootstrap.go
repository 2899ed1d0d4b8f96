package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// seekCluster is the round of a node that its configuration does not list:
// it asks the peers that belong to a cluster to add it, and a fresh node,
// once BootstrapGrace has passed and no peer belongs to a cluster or might,
// forms one if it comes first in the order every fresh node computes alike.
func (n *Node) seekCluster(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, n.peerTimeout())
	defer cancel()
	s := n.discover(ctx)
	n.learnAdvertise(s)
	inCluster := false
	for _, h := range s.hellos {
		if !h.HasState {
			continue
		}
		inCluster = true
		if h.Member && h.Leader != "" {
			if ok, err := n.requestJoin(ctx, h); ok {
				n.log.Info("asked to join", "via", h.NodeName, "leader", h.Leader)
			} else if err != nil {
				n.log.Debug("join request not taken", "via", h.NodeName, "err", err)
			}
		}
	}
	if n.hadState || inCluster || time.Since(n.started) < n.opts.BootstrapGrace {
		return // a member waits to be added back; a fresh node waits its grace
	}
	if n.opts.BootstrapPeerCheck && len(s.unanswered) > 0 {
		n.logWaiting(s)
		return
	}
	if !n.firstAmong(s) {
		return
	}
	n.bootstrap()
}

// firstAmong reports whether this node comes first among the fresh nodes
// it knows: by NodeName among those that answered, and by cluster address
// against those that did not (possible only without the peer check). Every
// fresh node computes the same order, so exactly one forms the cluster and
// the leader then adds the others.
func (n *Node) firstAmong(s survey) bool {
	for _, h := range s.hellos {
		if h.NodeName < n.opts.NodeName {
			return false
		}
	}
	for _, p := range s.unanswered {
		if p.RaftAddr < n.advertise() {
			return false
		}
	}
	return true
}

func (n *Node) bootstrap() {
	n.log.Info("no cluster found after the bootstrap grace: forming a new cluster", "cluster", n.opts.ClusterID)
	cfg := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.opts.NodeName), Address: raft.ServerAddress(n.advertise())}}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && err != raft.ErrCantBootstrap {
		n.log.Error("cannot form the cluster", "err", err)
	}
}

// logWaiting says, at most every BootstrapGrace, which peers hold a fresh
// node back.
func (n *Node) logWaiting(s survey) {
	if time.Since(n.lastWaitLog) < n.opts.BootstrapGrace {
		return
	}
	n.lastWaitLog = time.Now()
	addrs := make([]string, len(s.unanswered))
	for i, p := range s.unanswered {
		addrs[i] = p.RaftAddr
	}
	n.log.Warn("not forming a cluster: these peers do not answer and might belong to one (BootstrapPeerCheck)",
		"peers", addrs)
}
