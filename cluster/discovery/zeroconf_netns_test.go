package discovery

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestZeroconfBetweenHosts runs Zeroconf in separate network namespaces on
// two LANs (see lan_test.go), with the same expectations as the multicast
// test, and a laptop on LAN 1 that browses _http._tcp as an operator's
// tool would and must list the web console of every node on its LAN.
func TestZeroconfBetweenHosts(t *testing.T) {
	n := buildLANs(t)
	start := time.Now()
	c := startCast(t, n, "zeroconf", time.Second)
	laptop := startHelper(t, n, "laptop", helperSpec{Mode: "consoles", Interval: time.Second})
	c.converge(t, 20*time.Second)
	t.Logf("all nodes found their peers %v after start", time.Since(start).Round(time.Millisecond))

	eventually(t, 10*time.Second, func() error {
		cons := laptop.Consoles()
		for _, w := range []struct {
			instance string
			port     int
		}{{"Gantry gw-a", 9100}, {"Gantry gw-a2", 9101}, {"Gantry gw-b", 9100}} {
			i := slices.IndexFunc(cons, func(c console) bool { return c.Instance == w.instance })
			if i < 0 {
				return fmt.Errorf("laptop lists %v, no %q", cons, w.instance)
			}
			got := cons[i]
			if got.Port != w.port || !slices.Contains(got.Text, "path=/ui/") || len(got.Addrs) == 0 {
				return fmt.Errorf("console %+v, want port %d, TXT path=/ui/ and an address", got, w.port)
			}
		}
		return nil
	})

	time.Sleep(quietPeriod) // another browse round with the outsiders answering
	c.checkOutsidersNeverListed(t)
	if got := warnings(c.a, "bad signature"); got != 1 {
		t.Errorf("gw-a logged %d bad-signature warnings for gw-d answering every round, want 1 (rate-limited)", got)
	}

	stopped := time.Now()
	stopHelpers(t, c.c)
	eventually(t, 10*time.Second, func() error {
		for _, h := range []*helper{c.a, c.a2} {
			if slices.ContainsFunc(h.Peers(), func(p Peer) bool { return p.NodeName == "gw-c" }) {
				return fmt.Errorf("%s still lists gw-c", h.name)
			}
		}
		return nil
	})
	t.Logf("gw-a and gw-a2 dropped gw-c %v after it was told to stop", time.Since(stopped).Round(time.Millisecond))
	stopHelpers(t, c.a, c.a2, c.b, c.d, c.e, laptop)
}
