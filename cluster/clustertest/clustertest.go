package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/discovery"
)

// Cluster is N in-process nodes on their own loopback addresses, joined by
// a Network that can cut them apart.
type Cluster struct {
	t   testing.TB
	Net *Network
	// Options is applied to every node's options before each start.
	Options func(i int, o *cluster.Options)

	// mu guards the fields of Members that the nodes' goroutines read
	// (Node, IP, RaftPort, OpsAddr); the test goroutine, the only writer,
	// reads them without it.
	mu      sync.Mutex
	Members []*Member
	prefix  string // "127.a.b."
	nextIP  int
}

// Member is one node of the harness. Node is nil while it is down.
type Member struct {
	Name     string
	IP       string
	Dir      string
	RaftPort int
	Node     *cluster.Node
	OpsAddr  string
	opsSrv   *http.Server
}

// RaftAddr is where the member's cluster port is.
func (m *Member) RaftAddr() string { return net.JoinHostPort(m.IP, strconv.Itoa(m.RaftPort)) }

// New makes n members named node-1..node-n, each on its own loopback
// address; none is started. Stop is registered with t.Cleanup.
func New(t testing.TB, n int) *Cluster {
	c := &Cluster{t: t, Net: NewNetwork(),
		prefix: fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), 1+rand.IntN(250)), nextIP: 1}
	for i := range n {
		c.Members = append(c.Members, &Member{Name: "node-" + strconv.Itoa(i+1), IP: c.newIP(),
			Dir: filepath.Join(t.TempDir(), "node-"+strconv.Itoa(i+1))})
	}
	t.Cleanup(c.Stop)
	return c
}

func (c *Cluster) newIP() string {
	ip := c.prefix + strconv.Itoa(c.nextIP)
	c.nextIP++
	return ip
}

// Options returns the options member i starts with: fast timings for
// tests, discovery of every member, the harness's network.
func (c *Cluster) options(i int) cluster.Options {
	m := c.Members[i]
	o := cluster.DefaultOptions()
	o.ClusterID = "test-cluster"
	o.NodeName = m.Name
	o.BindAddr = net.JoinHostPort(m.IP, strconv.Itoa(m.RaftPort))
	o.AdvertiseAddr = o.BindAddr
	o.OpsAddr = m.OpsAddr
	o.DataDir = m.Dir
	o.BootstrapGrace = 500 * time.Millisecond
	o.ReconcileInterval = 200 * time.Millisecond
	o.FailoverDelay = time.Second
	o.PartitionCount = 16
	o.SharedSecret = []byte("clustertest-secret")
	o.Discovery = source{c}
	o.Listen = c.Net.Listen
	o.Dial = c.Net.Dialer(m.IP)
	o.HTTPClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return c.Net.DialContext(ctx, m.IP, addr)
		}, DisableKeepAlives: true}}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{c.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if c.Options != nil {
		c.Options(i, &o)
	}
	return o
}

// StartAll starts every member at once.
func (c *Cluster) StartAll() {
	for i := range c.Members {
		c.Start(i)
	}
}

// Start starts member i (again), with the state in its directory.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	m := c.Members[i]
	if m.opsSrv == nil {
		l, err := c.Net.Listen(net.JoinHostPort(m.IP, "0"))
		if err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		m.OpsAddr = l.Addr().String()
		c.mu.Unlock()
		m.opsSrv = &http.Server{Handler: c.opsHandler(m)}
		go m.opsSrv.Serve(l)
	}
	n, err := cluster.New(c.options(i))
	if err != nil {
		c.t.Fatalf("start %s: %v", m.Name, err)
	}
	c.mu.Lock()
	if m.RaftPort == 0 {
		_, port, _ := net.SplitHostPort(n.RaftAddr())
		m.RaftPort, _ = strconv.Atoi(port)
	}
	m.Node = n
	c.mu.Unlock()
	n.Start()
}

func (c *Cluster) opsHandler(m *Member) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, r *http.Request) {
		n := c.node(m)
		if n == nil {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(n.Status())
	})
	peer := func(w http.ResponseWriter, r *http.Request) {
		if n := c.node(m); n != nil {
			n.PeerHandler().ServeHTTP(w, r)
			return
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}
	mux.HandleFunc(cluster.PeerPath, peer)
	mux.HandleFunc(cluster.JoinPath, peer)
	mux.HandleFunc(cluster.UsersPath, peer)
	mux.HandleFunc(cluster.LoTPath, peer)
	return mux
}

func (c *Cluster) node(m *Member) *cluster.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.Node
}

// Kill stops member i at once, as a crash would (its state stays on disk).
func (c *Cluster) Kill(i int) {
	m := c.Members[i]
	c.mu.Lock()
	n := m.Node
	m.Node = nil
	c.mu.Unlock()
	if n != nil {
		n.Shutdown()
	}
}

// Crash kills member i as the death of its process would: its
// operations port closes too, so that a peer's request to it is refused
// rather than answered "down" (Kill leaves the port answering). Start
// brings it back, on another operations port.
func (c *Cluster) Crash(i int) {
	c.Kill(i)
	if m := c.Members[i]; m.opsSrv != nil {
		m.opsSrv.Close()
		m.opsSrv = nil
	}
}

// Restart kills member i and starts it again on the same address.
func (c *Cluster) Restart(i int) {
	c.Kill(i)
	c.Start(i)
}

// MoveTo kills member i and starts it again on a new address (and a new
// raft port), as a gateway that got another DHCP lease. ip "" picks a new
// one; it may be another member's old address.
func (c *Cluster) MoveTo(i int, ip string) {
	c.Kill(i)
	m := c.Members[i]
	if ip == "" {
		ip = c.newIP()
	}
	c.mu.Lock()
	m.IP, m.RaftPort = ip, 0
	c.mu.Unlock()
	if m.opsSrv != nil {
		m.opsSrv.Close()
		m.opsSrv = nil
	}
	c.Start(i)
}

// Partition cuts the members into groups: traffic flows only inside a group.
func (c *Cluster) Partition(groups ...[]int) {
	group := map[int]int{}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	for i, a := range c.Members {
		for j, b := range c.Members {
			if i < j && group[i] != group[j] {
				c.Net.Cut(a.IP, b.IP)
			}
		}
	}
}

// Pause freezes member i as the others see it: every connection to and
// from it stalls without resetting, as with a SIGSTOPped process or a
// pulled cable (the member itself goes on running, cut off). Resume ends it.
func (c *Cluster) Pause(i int) {
	for j, b := range c.Members {
		if j != i {
			c.Net.Cut(c.Members[i].IP, b.IP)
		}
	}
}

// Resume lets member i's traffic flow again after Pause.
func (c *Cluster) Resume(i int) {
	for j, b := range c.Members {
		if j != i {
			c.Net.Mend(c.Members[i].IP, b.IP)
		}
	}
}

// Heal removes every cut.
func (c *Cluster) Heal() { c.Net.MendAll() }

// Stop shuts every member down.
func (c *Cluster) Stop() {
	for i, m := range c.Members {
		c.Kill(i)
		if m.opsSrv != nil {
			m.opsSrv.Close()
			m.opsSrv = nil
		}
	}
}

// Leaders returns the members that consider themselves leader.
func (c *Cluster) Leaders() []*Member {
	var ls []*Member
	for _, m := range c.Members {
		if n := c.node(m); n != nil && n.IsLeader() {
			ls = append(ls, m)
		}
	}
	return ls
}

// WaitLeader waits until exactly one of the members in among (all when
// empty) leads and every other running one of them names it, and returns it.
func (c *Cluster) WaitLeader(timeout time.Duration, among ...int) *Member {
	c.t.Helper()
	if len(among) == 0 {
		for i := range c.Members {
			among = append(among, i)
		}
	}
	var leader *Member
	Eventually(c.t, timeout, func() error {
		leader = nil
		for _, i := range among {
			m := c.Members[i]
			n := c.node(m)
			if n == nil {
				continue
			}
			if n.IsLeader() {
				if leader != nil {
					return fmt.Errorf("two leaders: %s and %s", leader.Name, m.Name)
				}
				leader = m
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		for _, i := range among {
			if n := c.node(c.Members[i]); n != nil && n.Leader() != leader.Name {
				return fmt.Errorf("%s follows %q, not %s", c.Members[i].Name, n.Leader(), leader.Name)
			}
		}
		return nil
	})
	return leader
}

// Index returns the index of m.
func (c *Cluster) Index(m *Member) int {
	for i, x := range c.Members {
		if x == m {
			return i
		}
	}
	return -1
}

// Eventually retries f every 20 ms until it returns nil, or fails t with
// f's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// source is discovery that lists every member, with its name, the way
// multicast discovery would.
type source struct{ c *Cluster }

func (s source) Peers(context.Context) ([]discovery.Peer, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	var ps []discovery.Peer
	for _, m := range s.c.Members {
		if m.RaftPort == 0 {
			continue
		}
		ps = append(ps, discovery.Peer{NodeName: m.Name, RaftAddr: m.RaftAddr(), OpsAddr: m.OpsAddr, ClusterID: "test-cluster"})
	}
	return ps, nil
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("CLUSTERTEST_QUIET") == "" {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}
