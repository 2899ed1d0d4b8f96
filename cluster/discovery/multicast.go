package discovery

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"gantry/cluster/signing"
)

// Defaults of MulticastOptions.
const (
	DefaultMulticastGroup    = "239.63.114.71"
	DefaultMulticastPort     = 9201
	DefaultMulticastInterval = time.Second
	// rescanInterval is how often Multicast looks for interfaces that
	// appeared or vanished.
	rescanInterval = 10 * time.Second
	// maxDatagram bounds a received announcement; real ones are a few
	// hundred bytes.
	maxDatagram = 2048
)

// MulticastOptions configure a Multicast source.
type MulticastOptions struct {
	ClusterID string // only announcements of this cluster are accepted
	NodeName  string // this node; its own announcements are skipped
	// RaftAddr is the host:port the peers dial for Raft. An empty host
	// (":9200") tells them to use the source address of the announcement,
	// which is right on a LAN and for a gateway with several NICs; give a
	// host only when it is set explicitly (Cluster.AdvertisedHost).
	RaftAddr string
	// OpsAddr is the operations endpoint, same rule; "" announces none.
	OpsAddr string
	Group   string // IPv4 multicast group; "" means DefaultMulticastGroup
	Port    int    // UDP port; 0 means DefaultMulticastPort
	// Interfaces names the interfaces to announce and listen on; empty
	// means every up, multicast-capable, non-loopback interface with an
	// IPv4 address, looked at again every 10 s (see ifaces.go).
	Interfaces []string
	// Interval between announcements, each jittered by ±20 %; 0 means 1 s.
	Interval time.Duration
	// ExpireAfter drops a peer not heard from for that long; 0 means five
	// intervals.
	ExpireAfter time.Duration
	// Signer signs announcements and verifies received ones; nil means
	// unsigned (no SharedSecret).
	Signer *signing.Signer
	Logger *slog.Logger // nil discards
}

// withDefaults returns o with zero values replaced by the defaults.
func (o MulticastOptions) withDefaults() MulticastOptions {
	if o.Group == "" {
		o.Group = DefaultMulticastGroup
	}
	if o.Port == 0 {
		o.Port = DefaultMulticastPort
	}
	if o.Interval == 0 {
		o.Interval = DefaultMulticastInterval
	}
	if o.ExpireAfter == 0 {
		o.ExpireAfter = 5 * o.Interval
	}
	return o
}

// Validate checks the options (after defaults), naming the bad one.
func (o *MulticastOptions) Validate() error {
	d := o.withDefaults()
	var errs []error
	a := announcement{ClusterID: d.ClusterID, NodeName: d.NodeName, RaftAddr: d.RaftAddr, OpsAddr: d.OpsAddr}
	if err := a.check(); err != nil {
		errs = append(errs, err)
	}
	if ip := net.ParseIP(d.Group); ip == nil || ip.To4() == nil || !ip.IsMulticast() {
		errs = append(errs, fmt.Errorf("discovery: MulticastGroup %q, want an IPv4 multicast address (224.0.0.0/4)", d.Group))
	}
	if d.Port < 1 || d.Port > 65535 {
		errs = append(errs, fmt.Errorf("discovery: MulticastPort = %d, want 1..65535", d.Port))
	}
	if d.Interval < 0 || d.ExpireAfter <= d.Interval {
		errs = append(errs, fmt.Errorf("discovery: multicast interval %v and expiry %v, want 0 < interval < expiry", d.Interval, d.ExpireAfter))
	}
	return errors.Join(errs...)
}

// Multicast announces this node on a UDP multicast group and listens for
// the announcements of the others (see announce.go for the payload, the
// signing package for the envelope around it).
type Multicast struct {
	opts    MulticastOptions
	group   *net.UDPAddr
	signer  *signing.Signer
	self    announcement
	payload []byte // encoded self, constant
	log     *slog.Logger
	limited *limitedLog
	now     func() time.Time // replaced by tests
	running atomic.Bool      // Run is active

	mu    sync.Mutex            // guards heard; never held across I/O or logging
	heard map[string]*heardNode // by node name
}

// heardNode is what Multicast knows of one peer.
type heardNode struct {
	ann      announcement
	sentAt   time.Time            // envelope timestamp of the last accepted announcement
	lastSeen time.Time            // local time of that acceptance
	srcs     map[string]time.Time // source IPs heard from, with when
	srcIP    string               // the source IP the peer's addresses use
	expired  bool                 // logged as lost
}

// NewMulticast returns a Multicast source for opts.
func NewMulticast(opts MulticastOptions) (*Multicast, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var inc [8]byte
	rand.Read(inc[:])
	m := &Multicast{
		opts:   opts,
		group:  &net.UDPAddr{IP: net.ParseIP(opts.Group).To4(), Port: opts.Port},
		signer: opts.Signer,
		self: announcement{
			Incarnation: binary.BigEndian.Uint64(inc[:]),
			ClusterID:   opts.ClusterID, NodeName: opts.NodeName, RaftAddr: opts.RaftAddr, OpsAddr: opts.OpsAddr,
		},
		log:   componentLogger(opts.Logger),
		now:   time.Now,
		heard: map[string]*heardNode{},
	}
	m.limited = newLimitedLog(m.log)
	m.payload = appendAnnouncement(nil, &m.self)
	return m, nil
}

// Peers returns the peers heard from within ExpireAfter, by node name.
func (m *Multicast) Peers(context.Context) ([]Peer, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Peer
	for _, h := range m.heard {
		if now.Sub(h.lastSeen) <= m.opts.ExpireAfter {
			out = append(out, h.peer())
		}
	}
	return sortPeers(out), nil
}

func (h *heardNode) peer() Peer {
	return Peer{
		NodeName:  h.ann.NodeName,
		ClusterID: h.ann.ClusterID,
		RaftAddr:  withHost(h.ann.RaftAddr, h.srcIP),
		OpsAddr:   withHost(h.ann.OpsAddr, h.srcIP),
	}
}

// withHost fills the empty host of addr with host.
func withHost(addr, host string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || h != "" {
		return addr
	}
	return net.JoinHostPort(host, p)
}

// Run listens and announces until ctx ends. It fails only when the UDP
// port cannot be opened; interfaces that are missing or fail are logged
// and retried.
func (m *Multicast) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("discovery: Multicast.Run is already running")
	}
	defer m.running.Store(false)
	pc, err := m.listen(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.readLoop(ctx, pc) })
	defer wg.Wait()
	defer pc.Close() // before Wait: it ends readLoop

	joined := map[int]net.Interface{}
	m.rejoin(pc, joined)
	m.announce(pc, joined)
	announce := time.NewTimer(m.jittered())
	defer announce.Stop()
	rescan := time.NewTicker(rescanInterval)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-announce.C:
			m.announce(pc, joined)
			m.expire()
			announce.Reset(m.jittered())
		case <-rescan.C:
			m.rejoin(pc, joined)
		}
	}
}

// jittered returns Interval ±20 %, so that nodes started together do not
// announce in lockstep.
func (m *Multicast) jittered() time.Duration {
	i := m.opts.Interval
	return i*8/10 + time.Duration(mathrand.Int64N(int64(i*4/10)+1))
}

// listen opens the group's port. Binding the group address makes the
// socket reusable (SO_REUSEADDR) and bound to 0.0.0.0, so several nodes
// on one host share the port; loopback on lets them hear each other, and
// TTL 1 keeps announcements on the local link.
func (m *Multicast) listen(ctx context.Context) (*ipv4.PacketConn, error) {
	var lc net.ListenConfig
	c, err := lc.ListenPacket(ctx, "udp4", m.group.String())
	if err != nil {
		return nil, fmt.Errorf("discovery: multicast port %d: %w", m.opts.Port, err)
	}
	pc := ipv4.NewPacketConn(c)
	for _, set := range []func() error{
		func() error { return pc.SetMulticastTTL(1) },
		func() error { return pc.SetMulticastLoopback(true) },
		func() error { return pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true) },
	} {
		if err := set(); err != nil {
			pc.Close()
			return nil, fmt.Errorf("discovery: multicast socket option: %w", err)
		}
	}
	return pc, nil
}

// rejoin joins the group on interfaces that appeared and forgets those
// that vanished. Only Run's goroutine calls it; joined is its own.
func (m *Multicast) rejoin(pc *ipv4.PacketConn, joined map[int]net.Interface) {
	sel, err := selectInterfaces(m.opts.Interfaces)
	if err != nil {
		m.limited.Warn("interfaces", err.Error())
		return
	}
	if len(sel.missing) > 0 {
		m.limited.Warn("missing", "discovery: multicast interfaces missing, down or without IPv4; retrying",
			"interfaces", sel.missing)
	}
	for idx, ifi := range joined {
		if !slices.ContainsFunc(sel.ifaces, func(n net.Interface) bool { return n.Index == idx }) {
			pc.LeaveGroup(&ifi, m.group) // fails when the interface is gone: nothing to undo
			delete(joined, idx)
			m.log.Info("discovery: multicast interface gone", "interface", ifi.Name)
		}
	}
	for _, ifi := range sel.ifaces {
		if _, ok := joined[ifi.Index]; ok {
			continue
		}
		if err := pc.JoinGroup(&ifi, m.group); err != nil {
			m.limited.Warn("join|"+ifi.Name, "discovery: cannot join the multicast group; retrying",
				"interface", ifi.Name, "group", m.opts.Group, "err", err)
			continue
		}
		joined[ifi.Index] = ifi
		m.log.Info("discovery: announcing on interface", "interface", ifi.Name,
			"group", net.JoinHostPort(m.opts.Group, strconv.Itoa(m.opts.Port)))
	}
	if len(joined) == 0 {
		m.limited.Warn("nointerface", "discovery: no multicast interface to announce on; peers cannot find this node until one is up",
			"interfaces", m.opts.Interfaces)
	}
}

// announce sends one signed announcement out of every joined interface.
func (m *Multicast) announce(pc *ipv4.PacketConn, joined map[int]net.Interface) {
	b := m.signer.Sign(m.payload)
	for idx, ifi := range joined {
		if _, err := pc.WriteTo(b, &ipv4.ControlMessage{IfIndex: idx}, m.group); err != nil {
			m.limited.Warn("send|"+ifi.Name, "discovery: cannot send announcement",
				"interface", ifi.Name, "err", err)
		}
	}
}

// readLoop receives datagrams until pc is closed.
func (m *Multicast) readLoop(ctx context.Context, pc *ipv4.PacketConn) {
	buf := make([]byte, maxDatagram)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			m.limited.Warn("read", "discovery: multicast receive failed", "err", err)
			select { // do not spin on an error that persists
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if cm != nil && cm.Dst != nil && !cm.Dst.Equal(m.group.IP) {
			continue // another group on the same port, or unicast
		}
		udp, ok := src.(*net.UDPAddr)
		if !ok {
			continue
		}
		m.receive(buf[:n], udp.IP)
	}
}
