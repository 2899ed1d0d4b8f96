package discovery

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The namespace tests run the same cast on two LANs:
//
//	LAN 1 (10.77.1.0/24): host a (.1), host b (.2), host d (.4), laptop (.9)
//	LAN 2 (10.77.2.0/24): host a (.1), host c (.3), host e (.5)
//
// Host a is a gateway with two NICs and runs two nodes, gw-a and gw-a2
// (several nodes on one machine). gw-b announces an explicit host name;
// the others leave the host empty, so peers use the address they see.
// gw-d has another SharedSecret and gw-e belongs to another cluster (same
// secret): nobody may list them, and they list nobody.
type cast struct {
	net                            *testNet
	a, a2, b, c, d, e              *helper
	members                        []*helper // a, a2, b, c
	outsiders                      []*helper // d, e
	hostA1, hostA2, hostB1, hostC2 string    // addresses
}

// castSpecs are the nodes' settings; mode and interval are filled in.
var castSpecs = map[string]helperSpec{
	"gw-a":  {ClusterID: "line-1", NodeName: "gw-a", Secret: "s3cret", RaftAddr: ":9200", OpsAddr: ":9100"},
	"gw-a2": {ClusterID: "line-1", NodeName: "gw-a2", Secret: "s3cret", RaftAddr: ":9300", OpsAddr: ":9101"},
	"gw-b":  {ClusterID: "line-1", NodeName: "gw-b", Secret: "s3cret", RaftAddr: "gw-b.plant.example:9200", OpsAddr: ":9100"},
	"gw-c":  {ClusterID: "line-1", NodeName: "gw-c", Secret: "s3cret", RaftAddr: ":9200"},
	"gw-d":  {ClusterID: "line-1", NodeName: "gw-d", Secret: "not-the-secret", RaftAddr: ":9200", OpsAddr: ":9100"},
	"gw-e":  {ClusterID: "line-2", NodeName: "gw-e", Secret: "s3cret", RaftAddr: ":9200"},
}

// buildLANs creates the namespaces of the cast, with a laptop host.
func buildLANs(t *testing.T) *testNet {
	n := newTestNet(t)
	n.LAN("lan1")
	n.LAN("lan2")
	for _, h := range []string{"a", "b", "c", "d", "e", "laptop"} {
		n.Host(h)
	}
	n.Connect("a", "lan1", "eth0", "10.77.1.1/24")
	n.Connect("a", "lan2", "eth1", "10.77.2.1/24")
	n.Connect("b", "lan1", "eth0", "10.77.1.2/24")
	n.Connect("d", "lan1", "eth0", "10.77.1.4/24")
	n.Connect("laptop", "lan1", "eth0", "10.77.1.9/24")
	n.Connect("c", "lan2", "eth0", "10.77.2.3/24")
	n.Connect("e", "lan2", "eth0", "10.77.2.5/24")
	return n
}

// startCast starts the six nodes in mode with interval.
func startCast(t *testing.T, n *testNet, mode string, interval time.Duration) *cast {
	start := func(host, node string) *helper {
		s := castSpecs[node]
		s.Mode, s.Interval = mode, interval
		return startHelper(t, n, host, s)
	}
	c := &cast{net: n,
		a: start("a", "gw-a"), a2: start("a", "gw-a2"), b: start("b", "gw-b"),
		c: start("c", "gw-c"), d: start("d", "gw-d"), e: start("e", "gw-e"),
		hostA1: "10.77.1.1", hostA2: "10.77.2.1", hostB1: "10.77.1.2", hostC2: "10.77.2.3",
	}
	c.members = []*helper{c.a, c.a2, c.b, c.c}
	c.outsiders = []*helper{c.d, c.e}
	return c
}

// want is what one node must list: name → accepted raft (and ops)
// addresses.
type want map[string][]Peer

// check compares peers with w: the same names, each with one of the
// accepted addresses.
func (w want) check(peers []Peer) error {
	var names []string
	for _, p := range peers {
		names = append(names, p.NodeName)
		ok := slices.ContainsFunc(w[p.NodeName], func(a Peer) bool {
			return a.RaftAddr == p.RaftAddr && a.OpsAddr == p.OpsAddr && p.ClusterID == "line-1"
		})
		if !ok {
			return fmt.Errorf("unexpected peer %+v", p)
		}
	}
	if len(names) != len(w) {
		return fmt.Errorf("peers %s, want %d: %s", peerSet(peers), len(w), strings.Join(mapKeys(w), " "))
	}
	return nil
}

func mapKeys(w want) []string {
	var out []string
	for k := range w {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// at is a Peer at host with the given raft and ops ports (ops 0 = none).
func at(host string, raft, ops int) Peer {
	p := Peer{RaftAddr: fmt.Sprintf("%s:%d", host, raft)}
	if ops != 0 {
		p.OpsAddr = fmt.Sprintf("%s:%d", host, ops)
	}
	return p
}

// expectations returns what each member must list.
func (c *cast) expectations() map[*helper]want {
	a, a2 := []Peer{at(c.hostA1, 9200, 9100), at(c.hostA2, 9200, 9100)}, []Peer{at(c.hostA1, 9300, 9101), at(c.hostA2, 9300, 9101)}
	b := []Peer{{RaftAddr: "gw-b.plant.example:9200", OpsAddr: c.hostB1 + ":9100"}}
	cc := []Peer{at(c.hostC2, 9200, 0)}
	return map[*helper]want{
		c.a:  {"gw-a2": a2, "gw-b": b, "gw-c": cc},
		c.a2: {"gw-a": a, "gw-b": b, "gw-c": cc},
		// b and c reach host a only through their own LAN.
		c.b: {"gw-a": a[:1], "gw-a2": a2[:1]},
		c.c: {"gw-a": a[1:], "gw-a2": a2[1:]},
	}
}

// converge waits until every member lists exactly its expected peers.
func (c *cast) converge(t *testing.T, timeout time.Duration) {
	t.Helper()
	exp := c.expectations()
	eventually(t, timeout, func() error {
		for _, h := range c.members {
			if err := exp[h].check(h.Peers()); err != nil {
				return fmt.Errorf("%s: %v", h.name, err)
			}
		}
		for _, h := range c.outsiders {
			if p := h.Peers(); len(p) != 0 {
				return fmt.Errorf("%s lists %s, want nobody", h.name, peerSet(p))
			}
		}
		return nil
	})
}

// checkOutsidersNeverListed fails t if any node ever listed gw-d or gw-e,
// or if they ever listed anyone.
func (c *cast) checkOutsidersNeverListed(t *testing.T) {
	t.Helper()
	for _, h := range append(slices.Clone(c.members), c.outsiders...) {
		for _, bad := range []string{"gw-d", "gw-e"} {
			if h.Ever(bad) {
				t.Errorf("%s listed %s at some point", h.name, bad)
			}
		}
	}
	for _, h := range c.outsiders {
		h.mu.Lock()
		ever := mapKeysBool(h.ever)
		h.mu.Unlock()
		if len(ever) != 0 {
			t.Errorf("%s listed %v at some point, want nobody", h.name, ever)
		}
	}
}

func mapKeysBool(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// warnings counts the warning lines in h's log containing substr.
func warnings(h *helper, substr string) int {
	n := 0
	for _, line := range strings.Split(h.stderr.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
