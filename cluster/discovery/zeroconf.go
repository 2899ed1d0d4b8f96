package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/grandcat/zeroconf"

	"gantry/cluster/signing"
)

// DNS-SD services Zeroconf registers.
const (
	// ClusterService is the cluster port of a Gantry node; instance = node
	// name, port = cluster (Raft) port, TXT as in zeroconf_txt.go.
	ClusterService = "_gantry-cluster._tcp"
	// ConsoleService is the web console, so an operator's laptop lists
	// every gateway: instance "Gantry <node>", port = operations port,
	// TXT path=/ui/, node=…, cluster=….
	ConsoleService = "_http._tcp"

	mdnsDomain = "local."

	// DefaultBrowseInterval is how often Zeroconf queries for peers.
	DefaultBrowseInterval = 10 * time.Second

	// zeroconfProbeTime bounds the announcing goroutine that
	// zeroconf.Register starts: in v1.0.0 it sleeps about 3.5 s in all and
	// does not stop on Shutdown. Run waits until this long after its last
	// registration before returning, so that no goroutine outlives it.
	zeroconfProbeTime = 4 * time.Second
)

// ZeroconfOptions configure a Zeroconf source.
type ZeroconfOptions struct {
	ClusterID string // only nodes of this cluster are peers
	NodeName  string // this node; service instance name
	// RaftAddr is the host:port peers dial for Raft; an empty host tells
	// them to use an address of this host from its mDNS A records (the one
	// in their own subnet). Give a host only when set explicitly.
	RaftAddr string
	// OpsAddr is the operations endpoint, same rule. "" announces none and
	// does not register the console.
	OpsAddr string
	// Interfaces to register and browse on; empty means every up,
	// multicast-capable, non-loopback interface with IPv4 (see ifaces.go).
	Interfaces []string
	// BrowseInterval is how often peers are queried for; 0 means
	// DefaultBrowseInterval.
	BrowseInterval time.Duration
	// ExpireAfter drops a peer not seen for that long; 0 means 3.5 browse
	// intervals.
	ExpireAfter time.Duration
	// Signer signs the TXT record and checks the peers'; nil means none.
	Signer *signing.Signer
	Logger *slog.Logger // nil discards
}

func (o ZeroconfOptions) withDefaults() ZeroconfOptions {
	if o.BrowseInterval == 0 {
		o.BrowseInterval = DefaultBrowseInterval
	}
	if o.ExpireAfter == 0 {
		o.ExpireAfter = o.BrowseInterval * 7 / 2
	}
	return o
}

// Validate checks the options (after defaults), naming the bad one.
func (o *ZeroconfOptions) Validate() error {
	d := o.withDefaults()
	var errs []error
	a := announcement{ClusterID: d.ClusterID, NodeName: d.NodeName, RaftAddr: d.RaftAddr, OpsAddr: d.OpsAddr}
	if err := a.check(); err != nil {
		errs = append(errs, err)
	}
	if d.BrowseInterval < 0 || d.ExpireAfter <= d.BrowseInterval {
		errs = append(errs, fmt.Errorf("discovery: zeroconf browse interval %v and expiry %v, want 0 < interval < expiry", d.BrowseInterval, d.ExpireAfter))
	}
	if _, err := clusterTXT(d.Signer, txtFields{d.ClusterID, d.NodeName, d.RaftAddr, d.OpsAddr}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Zeroconf registers this node with DNS-SD over mDNS and browses for the
// other nodes of its cluster (github.com/grandcat/zeroconf).
type Zeroconf struct {
	opts     ZeroconfOptions
	txt      []string // cluster service TXT, signed
	raftPort int
	opsPort  int // 0: no console registration
	log      *slog.Logger
	limited  *limitedLog
	now      func() time.Time
	running  atomic.Bool

	mu    sync.Mutex         // guards heard; never held across I/O or logging
	heard map[string]*zcNode // by node name
}

type zcNode struct {
	peer     Peer
	lastSeen time.Time
}

// NewZeroconf returns a Zeroconf source for opts.
func NewZeroconf(opts ZeroconfOptions) (*Zeroconf, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	z := &Zeroconf{opts: opts, log: componentLogger(opts.Logger), now: time.Now, heard: map[string]*zcNode{}}
	z.limited = newLimitedLog(z.log)
	z.txt, _ = clusterTXT(opts.Signer, txtFields{opts.ClusterID, opts.NodeName, opts.RaftAddr, opts.OpsAddr})
	_, z.raftPort, _ = splitAddr(opts.RaftAddr, true)
	if opts.OpsAddr != "" {
		_, z.opsPort, _ = splitAddr(opts.OpsAddr, true)
	}
	return z, nil
}

// Peers returns the nodes of the cluster seen within ExpireAfter.
func (z *Zeroconf) Peers(context.Context) ([]Peer, error) {
	now := z.now()
	z.mu.Lock()
	defer z.mu.Unlock()
	var out []Peer
	for _, n := range z.heard {
		if now.Sub(n.lastSeen) <= z.opts.ExpireAfter {
			out = append(out, n.peer)
		}
	}
	return sortPeers(out), nil
}

// Run registers the services and browses in rounds of BrowseInterval
// until ctx ends. Each round is a fresh query (zeroconf's browser reports
// an instance once and stops querying after the first answer), which also
// refreshes the peers seen and lets the silent ones expire. When the set
// of interfaces changes, the services are registered again on the new
// set. Run returns at the earliest zeroconfProbeTime after its last
// registration (see that constant).
func (z *Zeroconf) Run(ctx context.Context) error {
	if !z.running.CompareAndSwap(false, true) {
		return errors.New("discovery: Zeroconf.Run is already running")
	}
	defer z.running.Store(false)
	var reg registration
	defer reg.stop(true)
	for ctx.Err() == nil {
		z.register(&reg)
		z.browseRound(ctx, reg.ifaces)
		z.expire()
	}
	return nil
}

// registration is the zeroconf servers of one interface set. Only Run's
// goroutine touches it.
type registration struct {
	servers []*zeroconf.Server
	ifaces  []net.Interface
	at      time.Time // last Register call
}

// stop unregisters (mDNS goodbye) and, with wait, waits out the library's
// announcing goroutine.
func (r *registration) stop(wait bool) {
	for _, s := range r.servers {
		s.Shutdown()
	}
	r.servers, r.ifaces = nil, nil
	if d := time.Until(r.at.Add(zeroconfProbeTime)); wait && d > 0 {
		time.Sleep(d) // the library gives no way to wait for that goroutine
	}
}

// register (re)registers the services when the interface set changed.
func (z *Zeroconf) register(reg *registration) {
	sel, err := selectInterfaces(z.opts.Interfaces)
	if err != nil {
		z.limited.Warn("interfaces", err.Error())
		return
	}
	if len(sel.missing) > 0 {
		z.limited.Warn("missing", "discovery: zeroconf interfaces missing, down or without IPv4; retrying",
			"interfaces", sel.missing)
	}
	if reg.servers != nil && slices.Equal(indexes(sel.ifaces), indexes(reg.ifaces)) {
		return
	}
	reg.stop(false)
	if len(sel.ifaces) == 0 {
		z.limited.Warn("nointerface", "discovery: no multicast interface for zeroconf; peers cannot find this node until one is up",
			"interfaces", z.opts.Interfaces)
		return
	}
	reg.at = time.Now()
	s, err := zeroconf.Register(instanceName(z.opts.NodeName), ClusterService, mdnsDomain, z.raftPort, z.txt, sel.ifaces)
	if err != nil {
		z.limited.Warn("register", "discovery: cannot register the zeroconf service; retrying",
			"service", ClusterService, "err", err)
		return
	}
	reg.servers, reg.ifaces = append(reg.servers, s), sel.ifaces
	if z.opsPort != 0 {
		txt := []string{"path=/ui/", "node=" + z.opts.NodeName, "cluster=" + z.opts.ClusterID}
		c, err := zeroconf.Register(instanceName("Gantry "+z.opts.NodeName), ConsoleService, mdnsDomain, z.opsPort, txt, sel.ifaces)
		if err != nil {
			z.limited.Warn("register-console", "discovery: cannot register the web console with zeroconf",
				"service", ConsoleService, "err", err)
		} else {
			reg.servers = append(reg.servers, c)
		}
	}
	z.log.Info("discovery: zeroconf services registered", "instance", instanceName(z.opts.NodeName),
		"interfaces", ifaceNames(sel.ifaces), "console", z.opsPort != 0)
}

// instanceName makes name usable as a DNS-SD instance label: the library
// does not escape dots, and a label has at most 63 bytes.
func instanceName(name string) string {
	name = strings.ReplaceAll(name, ".", "-")
	for len(name) > 63 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// browseRound queries for the cluster service on ifaces and takes in the
// answers for one BrowseInterval (or until ctx ends).
func (z *Zeroconf) browseRound(ctx context.Context, ifaces []net.Interface) {
	rctx, cancel := context.WithTimeout(ctx, z.opts.BrowseInterval)
	defer cancel()
	if len(ifaces) == 0 {
		<-rctx.Done()
		return
	}
	res, err := zeroconf.NewResolver(zeroconf.SelectIfaces(ifaces), zeroconf.SelectIPTraffic(zeroconf.IPv4))
	if err != nil {
		z.limited.Warn("browse", "discovery: cannot browse with zeroconf; retrying", "err", err)
		<-rctx.Done()
		return
	}
	var nets []*net.IPNet
	for _, ifi := range ifaces {
		nets = append(nets, ipv4Nets(ifi)...)
	}
	entries := make(chan *zeroconf.ServiceEntry, 8)
	if err := res.Browse(rctx, ClusterService, mdnsDomain, entries); err != nil {
		z.limited.Warn("browse", "discovery: zeroconf query failed; retrying", "err", err)
	}
	for e := range entries { // closed by the library when rctx ends, also after an error
		z.consider(e, nets)
	}
}

// consider takes in one browse answer.
func (z *Zeroconf) consider(e *zeroconf.ServiceEntry, nets []*net.IPNet) {
	f, sig, err := parseTXT(e.Text)
	if err != nil {
		z.limited.Debug("malformed|"+e.Instance, "discovery: zeroconf instance with a malformed TXT record ignored",
			"instance", e.Instance, "err", err)
		return
	}
	if f.ClusterID != z.opts.ClusterID {
		z.limited.Debug("foreign|"+f.ClusterID, "discovery: zeroconf instance of another cluster ignored",
			"instance", e.Instance, "clusterId", f.ClusterID)
		return
	}
	if err := z.opts.Signer.CheckSum(f.canonical(), sig); err != nil {
		z.limited.Warn("forged|"+e.Instance, "discovery: zeroconf instance with a bad signature ignored: forged, or another SharedSecret",
			"instance", e.Instance, "claimedNode", f.NodeName, "addrs", e.AddrIPv4, "err", err)
		return
	}
	if f.NodeName == z.opts.NodeName {
		if local, err := localIPs(); err == nil && !slices.ContainsFunc(e.AddrIPv4, func(ip net.IP) bool { return containsIP(local, ip) }) {
			z.limited.Warn("samename|"+e.HostName, "discovery: another node announces this node's NodeName; give every node a unique NodeName",
				"host", e.HostName, "addrs", e.AddrIPv4)
		}
		return
	}
	local, _ := localIPs()
	host := pickAddress(e, nets, local)
	p := Peer{NodeName: f.NodeName, ClusterID: f.ClusterID, RaftAddr: withHost(f.RaftAddr, host), OpsAddr: withHost(f.OpsAddr, host)}
	if strings.HasPrefix(p.RaftAddr, ":") {
		return // no usable address in the answer; the next round may bring one
	}
	now := z.now()
	z.mu.Lock()
	n := z.heard[f.NodeName]
	found := n == nil
	moved := n != nil && n.peer != p
	if n == nil {
		n = &zcNode{}
		z.heard[f.NodeName] = n
	}
	n.peer, n.lastSeen = p, now
	z.mu.Unlock()
	switch {
	case found:
		z.log.Info("discovery: found peer", "peer", p.NodeName, "raftAddr", p.RaftAddr, "opsAddr", p.OpsAddr)
	case moved:
		z.log.Info("discovery: peer changed address", "peer", p.NodeName, "raftAddr", p.RaftAddr)
	}
}

// pickAddress returns the entry's IPv4 address in one of this node's
// subnets, else its first IPv4 address, else its first global IPv6
// address, else "". An address this node holds itself (local) is chosen
// only when the peer has no other: gateways cloned with the same
// machine-cell address announce it too, and it would lead back here,
// while a peer on this very host (tests, demos) has only local ones.
func pickAddress(e *zeroconf.ServiceEntry, nets []*net.IPNet, local []net.IP) string {
	var v4 []net.IP
	for _, ip := range e.AddrIPv4 {
		if !containsIP(local, ip) {
			v4 = append(v4, ip)
		}
	}
	if len(v4) == 0 {
		v4 = e.AddrIPv4
	}
	for _, ip := range v4 {
		if slices.ContainsFunc(nets, func(n *net.IPNet) bool { return n.Contains(ip) }) {
			return ip.String()
		}
	}
	if len(v4) > 0 {
		return v4[0].String()
	}
	for _, ip := range e.AddrIPv6 {
		if ip.IsGlobalUnicast() {
			return ip.String()
		}
	}
	return ""
}

// expire logs and forgets the peers not seen within ExpireAfter.
func (z *Zeroconf) expire() {
	now := z.now()
	var lost []string
	z.mu.Lock()
	for name, n := range z.heard {
		if now.Sub(n.lastSeen) > z.opts.ExpireAfter {
			delete(z.heard, name)
			lost = append(lost, name)
		}
	}
	z.mu.Unlock()
	for _, name := range lost {
		z.log.Info("discovery: peer no longer answers zeroconf queries", "peer", name, "after", z.opts.ExpireAfter)
	}
}
