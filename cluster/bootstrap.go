package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
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
		n.waiting.Store("")
		return // a member waits to be added back; a fresh node waits its grace
	}
	if n.opts.BootstrapPeerCheck && len(s.unanswered)+len(s.foreign) > 0 {
		n.logWaiting(s)
		return
	}
	n.waiting.Store("")
	if !n.firstAmong(s) {
		return
	}
	n.bootstrap()
}

// resolveAdvertised looks Options.AdvertisedHost up every
// ReconcileInterval until it resolves or BootstrapGrace has passed since
// Start, as the reference says; it runs on its own goroutine, so that a
// slow resolver never delays a round. While the name itself is advertised
// and does not resolve, holdJoin is set: a node not yet in the
// configuration then neither asks to be added nor forms a cluster, so
// that no leader records an address that does not resolve (a pod's DNS
// name appears a few seconds after the pod). When another address is
// advertised (the appliance fell back to an interface address because the
// default name did not resolve at start), the name is advertised once it
// resolves, unless the node has already adopted the address its peers see.
func (n *Node) resolveAdvertised(ctx context.Context) {
	defer n.holdJoin.Store(false)
	name := n.opts.AdvertisedHost
	resolver := n.opts.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	t := time.NewTicker(n.opts.ReconcileInterval)
	defer t.Stop()
	for said := false; ; {
		host, port, _ := net.SplitHostPort(n.advertise())
		advertised := strings.EqualFold(host, name)
		lctx, cancel := context.WithTimeout(ctx, n.peerTimeout())
		addrs, err := resolver.LookupHost(lctx, name)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && len(addrs) > 0:
			if !advertised && !n.learned.Load() {
				n.readvertise(net.JoinHostPort(name, port), "AdvertisedHost resolves now: advertising it")
			} else if said {
				n.log.Info("AdvertisedHost resolves now", "host", name, "addrs", addrs)
			}
			return
		case time.Since(n.started) >= n.opts.BootstrapGrace:
			if advertised {
				n.log.Warn(fmt.Sprintf("Cluster.AdvertisedHost = %q does not resolve after BootstrapGraceSeconds (%v): going on with it, but peers that cannot resolve it cannot reach this node; fix DNS or set an address",
					name, n.opts.BootstrapGrace), "err", err)
			} else {
				n.log.Info(fmt.Sprintf("AdvertisedHost %q (the NodeName) does not resolve after BootstrapGraceSeconds (%v): keeping %s",
					name, n.opts.BootstrapGrace, n.advertise()), "err", err)
			}
			return
		case !said:
			said = true
			n.log.Info(fmt.Sprintf("AdvertisedHost %q does not resolve yet: retrying for BootstrapGraceSeconds (%v)", name, n.opts.BootstrapGrace),
				"err", err, "advertising", n.advertise(), "holdingJoin", advertised)
		}
		n.holdJoin.Store(advertised)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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

// logWaiting says which peers hold a fresh node back: in Status.Waiting
// always, in the log at most every BootstrapGrace. A peer that does not
// answer might belong to a cluster; one that answers for another
// ClusterId does, but not to this one: it is named for what it is, so
// that the operator fixes the ClusterId or the discovery list.
func (n *Node) logWaiting(s survey) {
	var silent, foreign []string
	for _, p := range s.unanswered {
		silent = append(silent, describe(p.RaftAddr, p.NodeName))
	}
	for _, h := range s.foreign {
		foreign = append(foreign, fmt.Sprintf("%s answers for another cluster %q", describe(h.RaftAddr, h.NodeName), h.ClusterID))
	}
	var why []string
	if len(silent) > 0 {
		why = append(why, strings.Join(silent, ", ")+" "+plural(len(silent), "does", "do")+" not answer and might belong to a cluster")
	}
	if len(foreign) > 0 {
		why = append(why, strings.Join(foreign, ", ")+fmt.Sprintf(" (this node's ClusterId is %q: set the same ClusterId on every node, or take the peer out of discovery)", n.opts.ClusterID))
	}
	text := "not forming a cluster (BootstrapPeerCheck): " + strings.Join(why, "; ")
	n.waiting.Store(text)
	if time.Since(n.lastWaitLog) < n.opts.BootstrapGrace {
		return
	}
	n.lastWaitLog = time.Now()
	if len(silent) > 0 {
		n.log.Warn("not forming a cluster: these peers do not answer and might belong to one (BootstrapPeerCheck)",
			"peers", silent)
	}
	if len(foreign) > 0 {
		n.log.Warn("not forming a cluster: these peers answer for another cluster (BootstrapPeerCheck); set the same ClusterId on every node, or take them out of discovery",
			"peers", foreign, "clusterId", n.opts.ClusterID)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
