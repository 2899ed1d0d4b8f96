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
	"sync"
	"time"
)

// KubernetesOptions configure a Kubernetes source.
type KubernetesOptions struct {
	ServiceDNS string // DNS name of the headless Service (KubernetesServiceDns)
	PeerPort   int    // cluster port of the pods behind it (KubernetesPeerPort)
	// Interval is how often Run looks the Service up, which bounds how
	// late an absence starts being counted; 0 means 5 s.
	Interval time.Duration
	Resolver Resolver     // nil means net.DefaultResolver
	Logger   *slog.Logger // nil discards
}

// Validate checks the options, naming the bad one.
func (o *KubernetesOptions) Validate() error {
	var errs []error
	if o.ServiceDNS == "" {
		errs = append(errs, errors.New("discovery: KubernetesServiceDns is empty, want the headless Service's DNS name"))
	}
	if o.PeerPort < 1 || o.PeerPort > 65535 {
		errs = append(errs, fmt.Errorf("discovery: KubernetesPeerPort = %d, want 1..65535", o.PeerPort))
	}
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("discovery: Kubernetes interval %v, want 0 (default) or more", o.Interval))
	}
	return errors.Join(errs...)
}

// forgetAbsentAfter is how long an absence is remembered. Forgetting is
// safe: AbsentSince then answers with the first successful lookup, an
// earlier time, so any threshold up to it (the reference allows 24 h)
// is still met.
const forgetAbsentAfter = 48 * time.Hour

// Kubernetes finds the pods behind a headless Service: one peer per A
// record, at PeerPort. It also remembers when each address stopped being
// listed, for the leader's removal of members absent from DNS.
type Kubernetes struct {
	opts     KubernetesOptions
	resolver Resolver
	log      *limitedLog
	now      func() time.Time         // replaced by tests
	localIPs func() ([]net.IP, error) // replaced by tests

	mu          sync.Mutex           // guards the fields below; never held across a lookup
	firstLookup time.Time            // first successful lookup; zero before
	listed      map[string]bool      // addresses (ip:port) of the last successful lookup
	missing     map[string]time.Time // addresses listed once, not now: since the first lookup without them
}

// NewKubernetes returns a Kubernetes source for opts.
func NewKubernetes(opts KubernetesOptions) (*Kubernetes, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Second
	}
	k := &Kubernetes{
		opts:     opts,
		resolver: opts.Resolver,
		log:      newLimitedLog(componentLogger(opts.Logger)),
		now:      time.Now,
		localIPs: localIPs,
		listed:   map[string]bool{},
		missing:  map[string]time.Time{},
	}
	if k.resolver == nil {
		k.resolver = net.DefaultResolver
	}
	return k, nil
}

// Run looks the Service up every Interval until ctx ends, so that
// absences are timed even when nobody calls Peers.
func (k *Kubernetes) Run(ctx context.Context) error {
	t := time.NewTicker(k.opts.Interval)
	defer t.Stop()
	for {
		if _, err := k.Peers(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("lookup", "discovery: cannot look up the Kubernetes Service; keeping the last list",
				"service", k.opts.ServiceDNS, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Peers looks the Service up and returns its pods, this one excluded
// (an address of this machine). A Service without any ready pod
// ("no such host") is an empty list, and starts the absence of every
// address listed before; any other lookup failure returns the error and
// changes nothing, so a DNS outage never looks like departed pods.
func (k *Kubernetes) Peers(ctx context.Context) ([]Peer, error) {
	ips, err := lookup(ctx, k.resolver, k.opts.ServiceDNS)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	local, _ := k.localIPs()
	port := strconv.Itoa(k.opts.PeerPort)
	addrs := make([]string, 0, len(ips))
	var peers []Peer
	for _, a := range ips {
		ip := net.ParseIP(a)
		if ip == nil {
			continue
		}
		addr := net.JoinHostPort(ip.String(), port)
		addrs = append(addrs, addr)
		if !containsIP(local, ip) && !slices.ContainsFunc(peers, func(p Peer) bool { return p.RaftAddr == addr }) {
			peers = append(peers, Peer{RaftAddr: addr})
		}
	}
	k.record(addrs)
	return sortPeers(peers), nil
}

// record updates the absence bookkeeping with a successful lookup.
func (k *Kubernetes) record(addrs []string) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.firstLookup.IsZero() {
		k.firstLookup = now
	}
	listed := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		listed[a] = true
		delete(k.missing, a)
	}
	for a := range k.listed {
		if !listed[a] {
			k.missing[a] = now
		}
	}
	for a, since := range k.missing {
		if now.Sub(since) > forgetAbsentAfter {
			delete(k.missing, a)
		}
	}
	k.listed = listed
}

// Absence is an address DNS listed before and no longer lists.
type Absence struct {
	RaftAddr string
	Since    time.Time // the first lookup that did not list it
}

// Absent returns the addresses an earlier lookup listed and the latest
// successful one did not, oldest absence first.
func (k *Kubernetes) Absent() []Absence {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Absence, 0, len(k.missing))
	for a, since := range k.missing {
		out = append(out, Absence{RaftAddr: a, Since: since})
	}
	slices.SortFunc(out, func(a, b Absence) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.RaftAddr, b.RaftAddr))
	})
	return out
}

// AbsentSince tells whether raftAddr (ip:port, as a member's address) is
// missing from the Service and since when: since the first lookup that
// missed it when this node saw it listed, otherwise since this node's
// first successful lookup (it has been absent at least that long, which
// lets a new leader act on members that left before it started). ok is
// false while it is listed, or before any lookup succeeded.
func (k *Kubernetes) AbsentSince(raftAddr string) (since time.Time, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.firstLookup.IsZero() || k.listed[raftAddr] {
		return time.Time{}, false
	}
	if s, found := k.missing[raftAddr]; found {
		return s, true
	}
	return k.firstLookup, true
}
