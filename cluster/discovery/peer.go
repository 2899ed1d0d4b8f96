package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"
)

// Peer is another node as discovery sees it.
type Peer struct {
	NodeName  string `json:"nodeName,omitempty"`  // "" when the mode cannot know it (seeds, kubernetes)
	RaftAddr  string `json:"raftAddr"`            // host:port of its cluster (Raft) port
	OpsAddr   string `json:"opsAddr,omitempty"`   // host:port of its operations HTTP port; "" when unknown
	ClusterID string `json:"clusterId,omitempty"` // "" when unknown
}

// Source finds peers. Seeds, Kubernetes, Multicast and Zeroconf implement
// it; see the package documentation for the contract.
type Source interface {
	// Peers returns the peers currently known, never this node itself
	// when the source can tell. A non-nil error with a non-empty list
	// means the list is partial.
	Peers(ctx context.Context) ([]Peer, error)
	// Run does the background work (announcing, listening, browsing,
	// re-resolving) until ctx ends, then returns nil; it returns early
	// only with an error that stops the source for good.
	Run(ctx context.Context) error
}

var (
	_ Source = (*Seeds)(nil)
	_ Source = (*Kubernetes)(nil)
	_ Source = (*Multicast)(nil)
	_ Source = (*Zeroconf)(nil)
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}

// lookupTimeout bounds one DNS lookup, so a dead resolver cannot hold a
// Peers call for the system's full retry schedule.
const lookupTimeout = 3 * time.Second

// DefaultProbeTimeout bounds Probe when ctx has no earlier deadline.
const DefaultProbeTimeout = 2 * time.Second

// Probe checks that something accepts TCP connections at addr (host:port),
// within DefaultProbeTimeout or ctx's deadline, whichever comes first. The
// leader uses it before removing a member that discovery no longer lists.
func Probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("discovery: probe %s: %w", addr, err)
	}
	return c.Close()
}

// ErrNotFound is wrapped by the error of a lookup that found no such host.
var ErrNotFound = errors.New("discovery: no such host")

// lookup resolves host through r, with lookupTimeout. An IP literal is
// returned as is, without asking r.
func lookup(ctx context.Context, r Resolver, host string) ([]string, error) {
	if ip := net.ParseIP(host); ip != nil {
		return []string{ip.String()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, host)
	if err != nil {
		if dnsErr, ok := errors.AsType[*net.DNSError](err); ok && dnsErr.IsNotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, host)
		}
		return nil, fmt.Errorf("discovery: look up %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, host)
	}
	return addrs, nil
}

// splitAddr splits and checks a host:port with a port in 1..65535; host
// may be empty only when emptyHost is set.
func splitAddr(addr string, emptyHost bool) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q, want 1..65535", p)
	}
	if host == "" && !emptyHost {
		return "", 0, fmt.Errorf("no host in %q", addr)
	}
	return host, port, nil
}

// localIPs returns the IP addresses of this machine's interfaces.
func localIPs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips, nil
}

func containsIP(ips []net.IP, ip net.IP) bool {
	return slices.ContainsFunc(ips, ip.Equal)
}

func sortPeers(ps []Peer) []Peer {
	slices.SortFunc(ps, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(a.NodeName, b.NodeName), cmp.Compare(a.RaftAddr, b.RaftAddr))
	})
	return ps
}

// componentLogger returns log (or a discarding logger) with the
// component attribute of this package.
func componentLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return log.With("component", "discovery")
}
