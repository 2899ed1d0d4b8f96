package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// SeedsOptions configure a Seeds source.
type SeedsOptions struct {
	// Seeds are the configured peer addresses, host:port each. This node
	// may be among them.
	Seeds []string
	// AdvertiseAddr is this node's advertised host:port; a seed equal to
	// it, or resolving to the same address and port, is this node.
	AdvertiseAddr string
	// BindAddr is the ip:port this node's cluster listener binds: a seed
	// resolving to an address that listener accepts on, with its port, is
	// this node. With an unspecified ip (0.0.0.0), that is every local
	// address.
	BindAddr string
	// Resolver looks host names up; nil means net.DefaultResolver.
	Resolver Resolver
}

// Validate checks the seed and own addresses, naming the bad one.
func (o *SeedsOptions) Validate() error {
	var errs []error
	if len(o.Seeds) == 0 {
		errs = append(errs, errors.New("discovery: Seeds is empty, want host:port of the peers"))
	}
	for _, s := range o.Seeds {
		if _, _, err := splitAddr(s, false); err != nil {
			errs = append(errs, fmt.Errorf("discovery: seed %q: %v, want host:port", s, err))
		}
	}
	if o.AdvertiseAddr != "" {
		if _, _, err := splitAddr(o.AdvertiseAddr, false); err != nil {
			errs = append(errs, fmt.Errorf("discovery: advertised address %q: %v", o.AdvertiseAddr, err))
		}
	}
	if o.BindAddr != "" {
		if host, _, err := splitAddr(o.BindAddr, true); err != nil || (host != "" && net.ParseIP(host) == nil) {
			errs = append(errs, fmt.Errorf("discovery: bind address %q: want ip:port", o.BindAddr))
		}
	}
	return errors.Join(errs...)
}

// Seeds finds peers in the configured list of addresses. Host names are
// resolved on every Peers call, so a name that does not resolve yet (a
// peer whose DNS record is not published at first boot) is retried each
// time, and a peer that moved is found at its new address.
type Seeds struct {
	opts     SeedsOptions
	resolver Resolver
	localIPs func() ([]net.IP, error) // this machine's addresses; replaced by tests
}

// NewSeeds returns a Seeds source for opts.
func NewSeeds(opts SeedsOptions) (*Seeds, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Seeds{opts: opts, resolver: opts.Resolver, localIPs: localIPs}
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	return s, nil
}

// Run returns when ctx ends: the seeds need no background work.
func (s *Seeds) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Peers resolves every seed and returns one peer per address found
// (ip:port), this node excluded, in a stable order. Seeds that do not
// resolve are left out of this call's list and reported together in the
// error; the others are still returned.
func (s *Seeds) Peers(ctx context.Context) ([]Peer, error) {
	self := s.self()
	type result struct {
		addrs []string
		err   error
	}
	results := make([]result, len(s.opts.Seeds))
	var wg sync.WaitGroup
	var advIPs []net.IP
	wg.Go(func() { advIPs = s.advertisedIPs(ctx) })
	for i, seed := range s.opts.Seeds {
		if self.isSeed(seed) {
			continue
		}
		wg.Go(func() {
			host, _, _ := net.SplitHostPort(seed) // checked by Validate
			results[i].addrs, results[i].err = lookup(ctx, s.resolver, host)
		})
	}
	wg.Wait()
	self.advIPs = advIPs

	var peers []Peer
	var errs []error
	seen := map[string]bool{}
	for i, seed := range s.opts.Seeds {
		r := results[i]
		if r.err != nil {
			errs = append(errs, fmt.Errorf("seed %s: %w", seed, r.err))
			continue
		}
		_, port, _ := splitAddr(seed, false)
		for _, a := range r.addrs {
			ip := net.ParseIP(a)
			addr := net.JoinHostPort(a, fmt.Sprint(port))
			if ip == nil || seen[addr] || self.isAddr(ip, port) {
				continue
			}
			seen[addr] = true
			peers = append(peers, Peer{RaftAddr: addr})
		}
	}
	return sortPeers(peers), errors.Join(errs...)
}

// selfAddrs is what identifies this node among the resolved seeds.
type selfAddrs struct {
	advHost  string   // advertised host as configured, lower case
	advPort  int      // 0 when no advertised address is set
	advIPs   []net.IP // what advHost resolves to now (may be empty)
	bindIP   net.IP   // nil when unspecified: every local address
	bindPort int      // 0 when no bind address is set
	local    []net.IP // this machine's addresses
}

// self gathers this node's addresses for one Peers call, except advIPs
// (advertisedIPs, looked up concurrently with the seeds). Failures leave
// fields empty: the node then recognises itself by the parts it knows.
func (s *Seeds) self() selfAddrs {
	var me selfAddrs
	if host, port, err := splitAddr(s.opts.AdvertiseAddr, false); err == nil {
		me.advHost, me.advPort = strings.ToLower(host), port
	}
	if host, port, err := splitAddr(s.opts.BindAddr, true); err == nil {
		me.bindPort = port
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			me.bindIP = ip
		} else {
			me.local, _ = s.localIPs()
		}
	}
	return me
}

// advertisedIPs resolves the advertised host; nil when it does not
// resolve (the default advertised host, the node name, often does not).
func (s *Seeds) advertisedIPs(ctx context.Context) []net.IP {
	host, _, err := splitAddr(s.opts.AdvertiseAddr, false)
	if err != nil {
		return nil
	}
	addrs, err := lookup(ctx, s.resolver, host)
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// isSeed reports whether a configured seed names this node literally.
func (me selfAddrs) isSeed(seed string) bool {
	host, port, err := splitAddr(seed, false)
	return err == nil && port == me.advPort && strings.ToLower(host) == me.advHost
}

// isAddr reports whether ip:port reaches this node's cluster listener.
func (me selfAddrs) isAddr(ip net.IP, port int) bool {
	if port == me.advPort && containsIP(me.advIPs, ip) {
		return true
	}
	if port != me.bindPort {
		return false
	}
	if me.bindIP != nil {
		return ip.Equal(me.bindIP)
	}
	return ip.IsLoopback() || containsIP(me.local, ip)
}
