package appliance_test

// Tests of the interest routing and the retained replication between
// nodes (issue 13's review findings), with real processes and clients.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
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

// signal sends sig to nd's process (SIGSTOP freezes it: its kernel keeps
// its connections open, so its peers see a half-open link).
func signal(t *testing.T, nd *crashNode, sig syscall.Signal) {
	t.Helper()
	if err := nd.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// peerView is how nd's data plane sees peer.
func peerView(nd *crashNode, peer string) (dataplaneStatus, error) {
	dp, err := dataPlaneView(nd.ip)
	if err != nil {
		return dataplaneStatus{}, err
	}
	for _, p := range dp.Peers {
		if p.Name == peer {
			return dataplaneStatus{dp.InterestPending, p.Connected, p.InterestFresh}, nil
		}
	}
	return dataplaneStatus{}, fmt.Errorf("%s has no peer %s", nd.ip, peer)
}

type dataplaneStatus struct {
	pending          int
	connected, fresh bool
}

// TestInterestFrozenPeerGoesStale: a peer frozen with SIGSTOP (its
// connections stay open: half-open links) is soon taken for down by the
// others, its link closed and its interest stale (everything is kept for
// it, and no SUBACK waits for it), well before the 30 s keep alive of old;
// a SUBSCRIBE meanwhile waits for the frozen peer only until it can no
// longer route by the old interest, and a second SUBSCRIBE of the same
// filter gets its SUBACK only once that announcement is over. Resumed,
// the peer is linked and routed by its filters again.
func TestInterestFrozenPeerGoesStale(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	var onB collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "frozen/#", 1, &onB))
	eventually(t, 10*time.Second, func() error {
		v, err := peerView(a, "broker-b")
		if err != nil || !v.connected || !v.fresh {
			return fmt.Errorf("a's view of b: %+v %v", v, err)
		}
		return nil
	})
	signal(t, b, syscall.SIGSTOP)
	defer signal(t, b, syscall.SIGCONT)
	// Subscribed on a while b is frozen, twice the same filter: each
	// SUBACK leaves only once the announcement is over.
	subs := make(chan error, 2)
	for i := range 2 {
		go func() {
			var c collector
			cl, _, err := crashV5(a.addr(), fmt.Sprint("sub-a-", i), true, 0, c.add)
			if err != nil {
				subs <- err
				return
			}
			defer closeV5(cl)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "while-frozen/#", QoS: 1}}}); err != nil {
				subs <- err
				return
			}
			v, err := peerView(a, "broker-b")
			if err == nil && v.pending != 0 {
				err = fmt.Errorf("SUBACK %d left while a's announcement is still pending: %+v", i, v)
			}
			subs <- err
		}()
	}
	for range 2 {
		if err := <-subs; err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		v, err := peerView(a, "broker-b")
		if err != nil || v.connected || v.fresh {
			return fmt.Errorf("a's view of the frozen b: %+v %v, want the link down and the interest stale", v, err)
		}
		return nil
	})
	signal(t, b, syscall.SIGCONT)
	linksUp(t, nodes)
	eventually(t, 10*time.Second, func() error {
		v, err := peerView(a, "broker-b")
		if err != nil || !v.fresh {
			return fmt.Errorf("a's view of the resumed b: %+v %v", v, err)
		}
		return nil
	})
	publishV5(t, a.addr(), "frozen/x", "after-resume", 1)
	eventually(t, 10*time.Second, func() error { return onB.has("after-resume") })
}

// TestRetainedInMemoryNodeCatchesUp: a node restarted without durability
// (its data plane and retained store in memory) asks its peers for their
// retained messages and holds SUBACKs until they answered: the very first
// SUBSCRIBE after the restart reads the value published before it, and
// one published while it was down.
func TestRetainedInMemoryNodeCatchesUp(t *testing.T) {
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_DURABILITY_ENABLED=false")
	})
	a, c := nodes[0], nodes[2]
	pub := needTool(t, "mosquitto_pub")
	retain := func(topic, value string) {
		t.Helper()
		if out, err := exec.Command(pub, "-h", a.ip, "-t", topic, "-m", value, "-r", "-q", "1").CombinedOutput(); err != nil {
			t.Fatalf("retained publish: %v %s", err, out)
		}
	}
	read := func(nd *crashNode, topic string) string {
		out, _ := exec.Command(needTool(t, "mosquitto_sub"), "-h", nd.ip, "-t", topic, "-C", "1", "-W", "5").CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	retain("line/before", "v1")
	eventually(t, 10*time.Second, func() error {
		if v := read(c, "line/before"); v != "v1" {
			dp, _ := dataPlaneView(c.ip)
			return fmt.Errorf("c holds %q: %+v", v, dp)
		}
		return nil
	})
	c.kill()
	retain("line/while-down", "v2")
	c.start()
	// No retry: the first read after the restart must see both.
	if v := read(c, "line/before"); v != "v1" {
		t.Fatalf("the restarted in-memory node serves %q for line/before, want v1", v)
	}
	if v := read(c, "line/while-down"); v != "v2" {
		t.Fatalf("the restarted in-memory node serves %q for line/while-down, want v2", v)
	}
	dp, err := dataPlaneView(c.ip)
	if err != nil {
		t.Fatal(err)
	}
	// line/before came from a catch-up (line/while-down may have come with
	// the peers' backlog for it instead).
	if !dp.RetainedComplete || dp.Received.CaughtUp < 1 {
		t.Fatalf("the restarted node: retainedComplete %v, %d retained messages caught up, want line/before at least", dp.RetainedComplete, dp.Received.CaughtUp)
	}
}

// TestRetainedDeletionReachesNodeBeyondBound: a node down while a
// retained topic is deleted and more than ReplicationForwardQueueEntries
// messages pass gets, when it returns, a catch-up that carries the
// deletion (a tombstone): it stops serving the old value.
func TestRetainedDeletionReachesNodeBeyondBound(t *testing.T) {
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_REPLICATION_FORWARD_QUEUE_ENTRIES=64")
	})
	a, c := nodes[0], nodes[2]
	pub := needTool(t, "mosquitto_pub")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(pub, append([]string{"-h", a.ip}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub %v: %v %s", args, err, out)
		}
	}
	read := func(nd *crashNode, topic string) string {
		out, _ := exec.Command(needTool(t, "mosquitto_sub"), "-h", nd.ip, "-t", topic, "-C", "1", "-W", "2").CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	run("-t", "line/setpoint", "-m", "42", "-r", "-q", "1")
	eventually(t, 10*time.Second, func() error {
		if v := read(c, "line/setpoint"); v != "42" {
			return fmt.Errorf("c holds %q", v)
		}
		return nil
	})
	c.kill()
	run("-t", "line/setpoint", "-n", "-r", "-q", "1") // deleted
	for i := range 100 {
		run("-t", "line/other", "-m", fmt.Sprint(i), "-q", "1")
	}
	c.start()
	linksUp(t, nodes)
	eventually(t, 15*time.Second, func() error {
		if v := read(c, "line/setpoint"); v != "Timed out" && v != "" {
			return fmt.Errorf("c still serves %q for the deleted line/setpoint", v)
		}
		return nil
	})
}

// TestRetainedQoS0OrderAcrossNodes: one publisher's QoS 0 messages on one
// topic, every other one retained, reach a subscriber on another node in
// publish order (retained ones travel reliably, plain ones best effort).
func TestRetainedQoS0OrderAcrossNodes(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	var got collector
	defer closeV5(subscribeV5(t, b.addr(), "order-sub", 0, "order/x", 0, &got))
	interestKnown(t, a, "broker-b")
	cl, _, err := crashV5(a.addr(), "order-pub", true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	const n = 400
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), crashWait)
		_, err := cl.Publish(ctx, &paho.Publish{Topic: "order/x", Payload: []byte(fmt.Sprint(i)), Retain: i%2 == 0})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error { return got.has(fmt.Sprint(n - 1)) })
	got.mu.Lock()
	defer got.mu.Unlock()
	last := -1
	for _, p := range got.got {
		var v int
		fmt.Sscan(p, &v)
		if v <= last {
			t.Fatalf("received %s after %d: out of publish order", p, last)
		}
		last = v
	}
}
