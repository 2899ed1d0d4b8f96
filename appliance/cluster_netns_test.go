package appliance_test

// End-to-end tests of clustering with no addresses configured: the real
// binary in network namespaces that share one LAN must find its peers
// (multicast, zeroconf), advertise a reachable address by itself and form
// exactly one cluster.
//
// Layout: a Linux bridge in the root namespace (IGMP snooping off, so it
// floods multicast like a plain switch) with the address .254 of a random
// 10.x.y.0/24, so the test process reaches every node's operations port;
// each gateway is a namespace with loopback up and one veth interface,
// eth0 = 10.x.y.N/24, its other end a port of the bridge (with
// netnsLAN.plantCIDR, a machine-cell interface plant0 comes before it).
// No default route and no multicast route: discovery must pick the
// interfaces itself.
// t.Cleanup kills every process, then deletes the namespaces (and with
// them the veth pairs) and the bridge, also when the test fails.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/cluster"
)

// netnsLAN is a bridge in the root namespace and the gateways on it.
type netnsLAN struct {
	t      *testing.T
	prefix string // random, for every name this LAN creates
	subnet string // "10.x.y."
	bridge string
	// plantCIDR, when set, gives every gateway a first interface, plant0,
	// with this address, on a link of its own (a machine cell's network,
	// cloned from one template, so the same address on every gateway).
	plantCIDR string
	hosts     []string // namespaces made, deleted at cleanup
}

// newNetnsLAN makes the bridge; it skips the test without root or ip.
func newNetnsLAN(t *testing.T) *netnsLAN {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns); run as root to test clustering with multicast and zeroconf discovery")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2) to create network namespaces; install iproute2")
	}
	var b [3]byte
	rand.Read(b[:])
	l := &netnsLAN{t: t, prefix: "gt" + hex.EncodeToString(b[:])}
	l.subnet = l.freeSubnet()
	l.bridge = l.prefix + "br"
	l.ip("link", "add", l.bridge, "type", "bridge", "mcast_snooping", "0")
	// Registered before any process starts, so it runs after every
	// process was killed: their connections close while the LAN is still
	// there, and no orphaned socket retransmitting a FIN into a deleted
	// namespace keeps another namespace alive for minutes.
	t.Cleanup(func() {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections() // clusterView's
		for _, ns := range l.hosts {
			l.cleanup("netns", "del", ns)
		}
		l.cleanup("link", "del", l.bridge)
	})
	l.ip("addr", "add", l.subnet+"254/24", "dev", l.bridge)
	l.ip("link", "set", l.bridge, "up")
	return l
}

// freeSubnet picks a 10.x.y.0/24 that no route of the root namespace
// covers yet.
func (l *netnsLAN) freeSubnet() string {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		l.t.Fatalf("ip route: %v\n%s", err, out)
	}
	for {
		s := fmt.Sprintf("10.%d.%d.", 100+mrand.IntN(150), mrand.IntN(256))
		if !strings.Contains(string(out), s) {
			return s
		}
	}
}

// ip runs the ip command and fails the test on error.
func (l *netnsLAN) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// cleanup runs the ip command at cleanup, reporting a failure.
func (l *netnsLAN) cleanup(args ...string) {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Errorf("cleanup: ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// host adds gateway number n (1..253) as a namespace on the LAN and
// returns the namespace and its address.
func (l *netnsLAN) host(n int) (ns, ip string) {
	l.t.Helper()
	ns, ip = fmt.Sprintf("%s-%d", l.prefix, n), fmt.Sprintf("%s%d", l.subnet, n)
	port := fmt.Sprintf("%sv%d", l.prefix, n)
	l.ip("netns", "add", ns)
	l.hosts = append(l.hosts, ns)
	l.ip("-n", ns, "link", "set", "lo", "up")
	if l.plantCIDR != "" { // made first, so listed first
		l.ip("-n", ns, "link", "add", "plant0", "type", "veth", "peer", "name", "plant0-cell")
		l.ip("-n", ns, "addr", "add", l.plantCIDR, "dev", "plant0")
		l.ip("-n", ns, "link", "set", "plant0-cell", "up")
		l.ip("-n", ns, "link", "set", "plant0", "up")
	}
	l.ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port)
	l.ip("link", "set", port, "master", l.bridge, "up")
	l.ip("-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
	l.ip("-n", ns, "link", "set", "eth0", "up")
	return ns, ip
}

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// lanGateway is a gantry process in its own namespace.
type lanGateway struct {
	name, ip string
	log      lockedBuffer // stdout and stderr
}

// startGateway runs gantry -dev as gateway n of l with clustering on and
// env on top; the cleanup kills it (ip netns exec execs, so the PID is
// gantry's) and, when the test failed, logs its output.
func startGateway(t *testing.T, l *netnsLAN, n int, env ...string) *lanGateway {
	t.Helper()
	ns, ip := l.host(n)
	g := &lanGateway{name: fmt.Sprintf("gw-%d", n), ip: ip}
	cmd := exec.Command("ip", "netns", "exec", ns, gantryBinary(t), "-dev")
	cmd.Env = append(append(os.Environ(),
		"COREFLUX_DATA_DIR="+t.TempDir(),
		"COREFLUX_CLUSTER_ENABLED=true",
		"COREFLUX_CLUSTER_NODE_NAME="+g.name,
		"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS=2",
	), env...)
	cmd.Stdout, cmd.Stderr = &g.log, &g.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(crashWait):
			t.Errorf("%s (pid %d) still running %v after SIGKILL", g.name, cmd.Process.Pid, crashWait)
		}
		if t.Failed() {
			t.Logf("%s (%s) output:\n%s", g.name, ip, g.log.String())
		}
	})
	return g
}

// views returns the gateways as agreeOnLeader takes them.
func views(gws ...*lanGateway) []*crashNode {
	out := make([]*crashNode, len(gws))
	for i, g := range gws {
		out[i] = &crashNode{ip: g.ip}
	}
	return out
}

// formCluster starts gateways 1..3 on l with env, waits up to timeout
// until they agree on a leader with three members alive, logs how long
// that took, and checks that every node lists each member at its LAN
// address.
func formCluster(t *testing.T, l *netnsLAN, timeout time.Duration, env ...string) []*lanGateway {
	t.Helper()
	gantryBinary(t) // build before the clock starts
	start := time.Now()
	var gws []*lanGateway
	for n := 1; n <= 3; n++ {
		gws = append(gws, startGateway(t, l, n, env...))
	}
	t.Cleanup(func() { // before the processes are killed
		if t.Failed() {
			for _, g := range gws {
				st, err := clusterView(g.ip)
				t.Logf("%s's view at the failure: leader %q, members %+v, err %v", g.name, st.Leadership.Leader, st.Members, err)
			}
		}
	})
	leader := agreeOnLeader(t, views(gws...), 3, timeout, "")
	t.Logf("three gateways agree on leader %s %v after start", leader, time.Since(start).Round(time.Millisecond))
	for _, g := range gws {
		st, err := clusterView(g.ip)
		if err != nil {
			t.Fatal(err)
		}
		if err := memberAddresses(st, gws); err != nil {
			t.Error(err)
		}
	}
	return gws
}

// memberAddresses checks that st lists exactly gws, each at its LAN
// address and the default cluster port.
func memberAddresses(st cluster.Status, gws []*lanGateway) error {
	var got, want []string
	for _, m := range st.Members {
		got = append(got, m.Name+"@"+m.Address)
	}
	for _, g := range gws {
		want = append(want, g.name+"@"+g.ip+":9200")
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s lists members %v, want %v", st.NodeName, got, want)
	}
	return nil
}

// holdsFor checks f every 100 ms for d and fails the test the first time
// it returns an error: a condition that must keep holding.
func holdsFor(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
}

// netnsClusterEnv is the environment of one cluster: discovery, a random
// ClusterId and SharedSecret, nothing else.
func netnsClusterEnv(discovery string) (clusterID string, env []string) {
	var b [4]byte
	rand.Read(b[:])
	clusterID = "line-" + hex.EncodeToString(b[:])
	return clusterID, []string{
		"COREFLUX_CLUSTER_DISCOVERY=" + discovery,
		"COREFLUX_CLUSTER_ID=" + clusterID,
		"COREFLUX_CLUSTER_SHARED_SECRET=secret-" + hex.EncodeToString(b[:]),
	}
}

// TestNetnsMulticastCluster: three gateways on one LAN, with multicast
// discovery and nothing but a ClusterId and a SharedSecret in common,
// form one cluster whose members are at their LAN addresses, although
// their node names do not resolve. A fourth gateway with another
// SharedSecret and a fifth with another ClusterId, on the same LAN, stay
// out of it and form their own.
func TestNetnsMulticastCluster(t *testing.T) {
	clusterID, env := netnsClusterEnv("multicast")
	l := newNetnsLAN(t)
	gws := formCluster(t, l, 30*time.Second, env...)

	foreignSecret := startGateway(t, l, 4, "COREFLUX_CLUSTER_DISCOVERY=multicast", "COREFLUX_CLUSTER_ID="+clusterID,
		"COREFLUX_CLUSTER_SHARED_SECRET=another-secret")
	otherCluster := startGateway(t, l, 5, append(slices.Clone(env), "COREFLUX_CLUSTER_ID=other-"+clusterID)...)
	for _, g := range []*lanGateway{foreignSecret, otherCluster} {
		if got := agreeOnLeader(t, views(g), 1, 15*time.Second, ""); got != g.name {
			t.Fatalf("%s follows %s, want a cluster of its own", g.name, got)
		}
	}
	// The three heard gw-4 and dropped its announcements.
	eventually(t, 10*time.Second, func() error {
		for _, g := range gws {
			if !slices.ContainsFunc(strings.Split(g.log.String(), "\n"), func(line string) bool {
				return strings.Contains(line, "bad signature") && strings.Contains(line, "claimedNode=gw-4")
			}) {
				return fmt.Errorf("%s logged no bad-signature warning for gw-4", g.name)
			}
		}
		return nil
	})
	// For several reconcile rounds (1 s each) the three list each other
	// only. The leader may change meanwhile: on a loaded machine the
	// 150 ms election timeout does expire now and then.
	holdsFor(t, 3*time.Second, func() error {
		for _, g := range gws {
			st, err := clusterView(g.ip)
			if err != nil {
				return err
			}
			if l := st.Leadership.Leader; l != "" && !slices.ContainsFunc(gws, func(m *lanGateway) bool { return m.name == l }) {
				return fmt.Errorf("%s follows %s", g.name, l)
			}
			if err := memberAddresses(st, gws); err != nil {
				return err
			}
		}
		return nil
	})
	agreeOnLeader(t, views(gws...), 3, 10*time.Second, "")
}

// TestNetnsZeroconfCluster: the same formation with zeroconf discovery.
func TestNetnsZeroconfCluster(t *testing.T) {
	_, env := netnsClusterEnv("zeroconf")
	formCluster(t, newNetnsLAN(t), 30*time.Second, env...)
}

// TestNetnsTwoNICCluster: gateways with two NICs, a machine cell's
// network first (the same 192.168.0.10/24 on each, as cells cloned from
// one template have) and the cabinet LAN second, form one cluster over
// the cabinet LAN with multicast and with zeroconf discovery: each must
// be reached at the address its announcements come from (see
// cluster/discovery's doc, "a source address is right for a gateway with
// several NICs"), not at its first interface's.
func TestNetnsTwoNICCluster(t *testing.T) {
	for _, discovery := range []string{"multicast", "zeroconf"} {
		t.Run(discovery, func(t *testing.T) {
			_, env := netnsClusterEnv(discovery)
			l := newNetnsLAN(t)
			l.plantCIDR = "192.168.0.10/24"
			formCluster(t, l, 15*time.Second, env...)
		})
	}
}
