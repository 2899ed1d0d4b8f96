package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"gantry/appliance/config"
	"gantry/cluster"
	"gantry/cluster/dataplane"
	"gantry/cluster/discovery"
	"gantry/cluster/signing"
	"gantry/drivers/engine"
)

// clusterOptions maps the Cluster section onto cluster.Options.
func clusterOptions(cfg *config.Config) cluster.Options {
	cl := &cfg.Cluster
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	sec := func(v int) time.Duration { return time.Duration(v) * time.Second }
	o := cluster.DefaultOptions()
	o.ClusterID, o.NodeName = cl.ClusterId, cl.NodeName
	o.BindAddr = net.JoinHostPort(cl.BindIP, strconv.Itoa(cl.Port))
	o.AdvertiseAddr = net.JoinHostPort(advertisedHost(cl), strconv.Itoa(cl.AdvertisedPort))
	o.AdvertisedHost = cl.AdvertisedHost // resolved again for BootstrapGraceSeconds when it did not resolve at once
	// Learning the advertised address from what peers see is for a node
	// bound to every address; one bound to a single address advertises it
	// (on loopback, peers would see 127.0.0.1 whatever the bind).
	bindIP := net.ParseIP(cl.BindIP)
	o.AdvertiseLearn = !advertisedHostSet(cl) && (bindIP == nil || bindIP.IsUnspecified())
	o.OpsAddr = net.JoinHostPort(advertisedHost(cl), strconv.Itoa(cfg.Ops.Port))
	o.PeerOpsPort = cl.PeerOpsPort
	o.DataDir = cl.DataDir
	o.ElectionTimeoutLower, o.ElectionTimeoutUpper = ms(cl.ElectionTimeoutLowerMs), ms(cl.ElectionTimeoutUpperMs)
	o.RPCTimeout = ms(cl.EffectiveElectionRpcTimeoutMs())
	o.HeartbeatThreshold = cl.HeartbeatThreshold
	o.DeadlineTransport = cl.RaftTransport == "Deadline"
	o.BootstrapGrace, o.BootstrapPeerCheck = sec(cl.BootstrapGraceSeconds), cl.BootstrapPeerCheck
	o.MemberRemovalGrace = sec(cl.MemberRemovalGraceSeconds)
	o.MemberAbsentFromDiscovery = sec(cl.MemberAbsentFromDiscoverySeconds)
	o.MemberAddResign = sec(cl.MemberAddResignSeconds)
	o.PartitionCount, o.ReplicationFactor = cl.PartitionCount, cl.EffectiveReplicationFactor()
	o.SharedSecret = []byte(cl.SharedSecret)
	if bindIP != nil && !bindIP.IsUnspecified() {
		// The peer protocol leaves from the bound address, so peers see
		// the address this node advertises.
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: bindIP}, Timeout: o.RPCTimeout + time.Second}
		o.HTTPClient = &http.Client{Timeout: o.RPCTimeout + time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	}
	return o
}

// advertisedHostSet reports whether Cluster.AdvertisedHost was given
// rather than left to its default, the NodeName.
func advertisedHostSet(cl *config.Cluster) bool { return cl.AdvertisedHost != cl.NodeName }

// advertisedHost is Cluster.AdvertisedHost when it was set. Left to its
// default (the NodeName), the name is advertised only when it resolves;
// otherwise the address the cluster port is bound to, or, bound to all
// addresses, the address of the interface of the default route, or the
// first non-loopback IPv4 address: a gateway named "press-line-2" with no
// DNS entry is still reachable. Peers that see the node at another address
// correct it (cluster.Options.AdvertiseLearn).
func advertisedHost(cl *config.Cluster) string {
	if advertisedHostSet(cl) {
		return cl.AdvertisedHost
	}
	if _, err := net.LookupHost(cl.NodeName); err == nil {
		return cl.NodeName
	}
	if ip := net.ParseIP(cl.BindIP); ip != nil && !ip.IsUnspecified() {
		return cl.BindIP
	}
	// A UDP "connection" sends nothing: it only asks the kernel which
	// local address routes to a public one.
	if c, err := net.Dial("udp4", "192.0.2.1:9"); err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsLoopback() {
			return a.IP.String()
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return cl.AdvertisedHost
}

// announced is the address multicast and zeroconf announce: without an
// explicit AdvertisedHost, only the port, so that each peer uses the
// address the announcement came from, right for the network it came over.
func announced(cl *config.Cluster, addr string) string {
	if advertisedHostSet(cl) {
		return addr
	}
	_, port, _ := net.SplitHostPort(addr)
	return ":" + port
}

// newDiscovery builds the discovery source of Cluster.Discovery.
func (n *Node) newDiscovery(o *cluster.Options) (discovery.Source, error) {
	cl := &n.cfg.Cluster
	log := n.log.With("node", cl.NodeName)
	signer := signing.New(o.SharedSecret, nil)
	switch cl.Discovery {
	case config.DiscoverySeeds:
		return discovery.NewSeeds(discovery.SeedsOptions{Seeds: cl.Seeds, AdvertiseAddr: o.AdvertiseAddr, BindAddr: o.BindAddr})
	case config.DiscoveryKubernetes:
		return discovery.NewKubernetes(discovery.KubernetesOptions{ServiceDNS: cl.KubernetesServiceDns,
			PeerPort: cl.KubernetesPeerPort, Logger: log})
	case config.DiscoveryZeroconf:
		return discovery.NewZeroconf(discovery.ZeroconfOptions{ClusterID: cl.ClusterId, NodeName: cl.NodeName,
			RaftAddr: announced(cl, o.AdvertiseAddr), OpsAddr: announced(cl, o.OpsAddr), Signer: signer, Logger: log})
	default:
		return discovery.NewMulticast(discovery.MulticastOptions{ClusterID: cl.ClusterId, NodeName: cl.NodeName,
			RaftAddr: announced(cl, o.AdvertiseAddr), OpsAddr: announced(cl, o.OpsAddr), Group: cl.MulticastGroup, Port: cl.MulticastPort,
			Signer: signer, Logger: log})
	}
}

// openCluster builds the cluster node when clustering is on and its
// configuration is valid; otherwise it records why it is off.
func (n *Node) openCluster() error {
	cl := &n.cfg.Cluster
	if !cl.Enabled {
		return nil
	}
	if ps := n.cfg.ClusterProblems(); len(ps) > 0 {
		for _, p := range ps {
			n.log.Error("clustering does not start: "+p, "component", "cluster")
		}
		n.clusterOff = ps
		return nil
	}
	if _, ok := n.Users.Lookup(cl.DataPlaneUsername); cl.DataPlaneUsername != "" && !ok {
		u := cl.DataPlaneUsername
		p := fmt.Sprintf("config: Cluster.DataPlaneUsername = %q, but no such user exists on this node: create it with -addUser", u)
		n.log.Error("clustering does not start: "+p, "component", "cluster")
		n.clusterOff = []string{p}
		return nil
	}
	opts := clusterOptions(&n.cfg)
	opts.Logger = n.log
	n.log.Info("clustering on", "component", "cluster", "node", cl.NodeName, "cluster", cl.ClusterId,
		"discovery", cl.Discovery, "advertise", opts.AdvertiseAddr)
	src, err := n.newDiscovery(&opts)
	if err == nil {
		opts.Discovery = src
		n.Cluster, err = cluster.New(opts)
	}
	if err != nil {
		// The broker serves on: a busy cluster port or a discovery that
		// cannot start stops clustering only, as a bad value does.
		p := fmt.Sprintf("cluster (%s discovery): %v", cl.Discovery, err)
		n.log.Error("clustering does not start: "+p, "component", "cluster")
		n.clusterOff = []string{p}
		return nil
	}
	n.openClusterUsers() // wire_cluster_users.go
	n.openClusterLoT()   // wire_cluster_lot.go
	if err := n.openDataPlane(); err != nil {
		return err
	}
	n.openSessions() // wire_sessions.go
	return nil
}

// clusterStatus is GET /cluster: the node's view, or why clustering is off.
func (n *Node) clusterStatus() cluster.Status {
	if n.Cluster != nil {
		return n.Cluster.Status()
	}
	return cluster.Status{NodeName: n.cfg.Cluster.NodeName, ClusterID: n.cfg.Cluster.ClusterId,
		Role: "standalone", Problems: n.clusterOff}
}

func (n *Node) serveCluster(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	view := struct {
		cluster.Status
		DataPlane      *dataplane.Status `json:"dataPlane,omitempty"`
		RouteListeners []engine.Listener `json:"routeListeners"` // wire_drivers.go
		LoT            *lotStatus        `json:"lot,omitempty"`  // wire_cluster_lot.go
		// Requests counts the signed requests from other nodes, taken and
		// refused by reason (cluster/signing, "Requests").
		Requests *signing.RequestStats `json:"requests,omitempty"`
	}{Status: n.clusterStatus(), RouteListeners: n.routeListeners(), LoT: n.lotClusterStatus()}
	if n.dataPlane != nil {
		st := n.dataPlane.Status()
		view.DataPlane = &st
	}
	if n.Cluster != nil {
		st := n.Cluster.Requests().Stats()
		view.Requests = &st
	}
	enc.Encode(view)
}

// clusterSummary is the cluster part of GET /info.
type clusterSummary struct {
	Enabled      bool   `json:"enabled"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	MembersTotal int    `json:"membersTotal"`
	MembersAlive int    `json:"membersAlive"`
}

func (n *Node) clusterInfo() clusterSummary {
	st := n.clusterStatus()
	return clusterSummary{Enabled: st.Enabled, Role: st.Role, Leader: st.Leadership.Leader,
		MembersTotal: st.MembersTotal, MembersAlive: st.MembersAlive}
}

// shutdownCluster stops the cluster node, bounded by ctx.
func (n *Node) shutdownCluster(ctx context.Context) error {
	if n.Cluster == nil {
		return nil
	}
	if n.dataPlane != nil {
		n.dataPlane.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- n.Cluster.Shutdown() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.Join(ctx.Err(), errors.New("cluster: shutdown did not finish"))
	}
}
