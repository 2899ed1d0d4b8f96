package discovery

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// quietPeriod is a bounded wait proving that something does NOT happen.
const quietPeriod = time.Second

// TestMulticastBetweenHosts runs Multicast in separate network namespaces
// on two LANs (see lan_test.go): every node finds the others it shares a
// LAN with, with its name and the address it is reachable at, including
// the two nodes on one host; a node with another secret and one of
// another cluster are ignored (and forgeries logged once, not every
// second); a stopped node expires; every process stops without leaving a
// goroutine.
func TestMulticastBetweenHosts(t *testing.T) {
	n := buildLANs(t)
	start := time.Now()
	c := startCast(t, n, "multicast", 200*time.Millisecond)
	c.converge(t, 15*time.Second)
	t.Logf("all nodes found their peers %v after start", time.Since(start).Round(time.Millisecond))

	time.Sleep(quietPeriod) // several more announcements of the outsiders
	c.checkOutsidersNeverListed(t)
	if got := warnings(c.a, "bad signature"); got != 1 {
		t.Errorf("gw-a logged %d bad-signature warnings for gw-d's announcements every 200 ms, want 1 (rate-limited)", got)
	}
	if got := warnings(c.a, "another cluster"); got != 0 {
		t.Errorf("gw-a warned %d times about gw-e's cluster; a neighbouring cluster is not a problem", got)
	}

	stopped := time.Now()
	stopHelpers(t, c.c)
	eventually(t, 5*time.Second, func() error {
		for _, h := range []*helper{c.a, c.a2} {
			if slices.ContainsFunc(h.Peers(), func(p Peer) bool { return p.NodeName == "gw-c" }) {
				return fmt.Errorf("%s still lists gw-c", h.name)
			}
		}
		return nil
	})
	t.Logf("gw-a and gw-a2 dropped gw-c %v after it was told to stop", time.Since(stopped).Round(time.Millisecond))
	if err := c.expectations()[c.b].check(c.b.Peers()); err != nil {
		t.Errorf("gw-b after gw-c stopped: %v", err)
	}
	stopHelpers(t, c.a, c.a2, c.b, c.d, c.e)
}
