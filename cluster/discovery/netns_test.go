package discovery

// Network namespaces for tests that need separate hosts on real LANs
// (multicast, mDNS). Self-contained so that another test suite can copy
// or reuse it: it depends only on the standard library and the ip command
// of iproute2, and needs root.
//
// Layout: one "switch" namespace holds a Linux bridge per LAN (IGMP
// snooping off, so the bridge floods multicast like a plain switch); each
// host is a namespace with loopback up and one veth interface per LAN it
// is on, its other end a port of that LAN's bridge. Every name carries a
// random prefix, so concurrent runs do not collide, and t.Cleanup deletes
// the namespaces, and with them every interface, even when the test fails.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// testNet is a set of hosts (network namespaces) and LANs (bridges).
type testNet struct {
	t      *testing.T
	prefix string // random, for namespace names

	mu     sync.Mutex        // guards the fields below
	sw     string            // namespace of the bridges
	hosts  map[string]string // host name → namespace
	lans   map[string]string // LAN name → bridge device in sw
	ports  int               // bridge ports made so far
	routed map[string]bool   // hosts with a multicast route
}

// requireNetns skips the test when network namespaces cannot be made
// here: not root, or no ip command.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns); run the tests as root to cover multicast and zeroconf between hosts")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2) to create network namespaces; install iproute2")
	}
}

// newTestNet returns an empty network; it skips the test as
// requireNetns does.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	requireNetns(t)
	var b [3]byte
	rand.Read(b[:])
	n := &testNet{t: t, prefix: "gt" + hex.EncodeToString(b[:]), hosts: map[string]string{}, lans: map[string]string{}, routed: map[string]bool{}}
	n.sw = n.addNamespace("sw")
	return n
}

// ip runs the ip command and fails the test on error.
func (n *testNet) ip(args ...string) {
	n.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addNamespace creates namespace prefix-name with loopback up, deleted at
// cleanup.
func (n *testNet) addNamespace(name string) string {
	n.t.Helper()
	ns := n.prefix + "-" + name
	n.ip("netns", "add", ns)
	n.t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			n.t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	n.ip("-n", ns, "link", "set", "lo", "up")
	return ns
}

// LAN adds a LAN (a bridge) called name.
func (n *testNet) LAN(name string) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	br := fmt.Sprintf("br%d", len(n.lans))
	n.ip("-n", n.sw, "link", "add", br, "type", "bridge", "mcast_snooping", "0")
	n.ip("-n", n.sw, "link", "set", br, "up")
	n.lans[name] = br
}

// Host adds a host (a namespace) called name and returns its namespace.
func (n *testNet) Host(name string) string {
	n.t.Helper()
	ns := n.addNamespace(name)
	n.mu.Lock()
	n.hosts[name] = ns
	n.mu.Unlock()
	return ns
}

// Connect puts host on lan through a new interface ifname with address
// cidr (like "10.77.1.2/24"), multicast on. The host's first interface
// also gets the multicast route (224.0.0.0/4), for programs that let the
// kernel choose the interface.
func (n *testNet) Connect(host, lan, ifname, cidr string) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	ns, br := n.hosts[host], n.lans[lan]
	if ns == "" || br == "" {
		n.t.Fatalf("Connect(%q, %q): unknown host or LAN", host, lan)
	}
	port := fmt.Sprintf("p%d", n.ports)
	n.ports++
	n.ip("link", "add", ifname, "netns", ns, "type", "veth", "peer", "name", port, "netns", n.sw)
	n.ip("-n", n.sw, "link", "set", port, "master", br, "up")
	n.ip("-n", ns, "addr", "add", cidr, "dev", ifname)
	n.ip("-n", ns, "link", "set", ifname, "multicast", "on", "up")
	if !n.routed[host] {
		n.ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", ifname)
		n.routed[host] = true
	}
}

// Command returns a command that runs name with args inside host.
func (n *testNet) Command(ctx context.Context, host, name string, args ...string) *exec.Cmd {
	n.mu.Lock()
	ns := n.hosts[host]
	n.mu.Unlock()
	if ns == "" {
		n.t.Fatalf("Command: unknown host %q", host)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}
