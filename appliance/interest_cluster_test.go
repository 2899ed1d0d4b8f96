package appliance_test

// Tests of the interest routing and the retained replication between
// nodes (issue 13's review findings), with real processes and clients.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// TestInterestManySubscribesIncremental: 5000 SUBSCRIBEs of one filter
// each, one after another, on one node; each SUBACK waits for the peers,
// and each addition is applied to the peers' view incrementally (a
// rebuild of the whole filter tree per addition made this quadratic:
// 24 s for 5000). The last filter is routed: a message published on
// another node reaches it.
func TestInterestManySubscribesIncremental(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	var got collector
	cl, _, err := crashV5(b.addr(), "many", true, 0, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	const n = 5000
	start := time.Now()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), crashWait)
		_, err := cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: fmt.Sprintf("many/%d/+", i), QoS: 0}}})
		cancel()
		if err != nil {
			t.Fatalf("subscribe %d: %v", i, err)
		}
	}
	t.Logf("%d SUBSCRIBEs of one filter each, each SUBACK after the peers confirmed: %v", n, time.Since(start))
	publishV5(t, a.addr(), fmt.Sprintf("many/%d/x", n-1), "last", 0)
	eventually(t, 10*time.Second, func() error { return got.has("last") })
	dp, err := dataPlaneView(a.ip)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dp.Peers {
		if p.Name == "broker-b" && (!p.InterestFresh || p.InterestFilters < n) {
			t.Fatalf("a's view of b: %+v, want %d filters, fresh", p, n)
		}
	}
}
