package dataplane

import (
	"fmt"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// TestInterestHeardIncremental: additions and snapshots change a peer's
// view one filter at a time; a snapshot removes what it no longer lists,
// shared subscriptions are counted as they come and go.
func TestInterestHeardIncremental(t *testing.T) {
	p := reviewPlane(t, "a", "", 64, nil, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	defer p.Stop()
	steps := []struct {
		name    string
		op      byte
		filters []string
		wants   map[string]bool
		shared  bool
	}{
		{"unknown peer gets everything", 0, nil, map[string]bool{"x/1": true, "y": true}, false},
		{"snapshot", wire.InterestSnapshot, []string{"x/+"}, map[string]bool{"x/1": true, "y": false}, false},
		{"addition", wire.InterestAdd, []string{"y", "$share/g/z/#"}, map[string]bool{"x/1": true, "y": true, "z/q": true}, true},
		{"snapshot drops", wire.InterestSnapshot, []string{"y"}, map[string]bool{"x/1": false, "y": true, "z/q": false}, false},
	}
	for _, s := range steps {
		if s.op != 0 {
			p.heard("b", s.op, s.filters)
		}
		for tp, want := range s.wants {
			if got := p.wants("b", tp); got != want {
				t.Fatalf("%s: wants(%q) = %v, want %v", s.name, tp, got, want)
			}
		}
		if got := p.sharedPeers.Load() == 1; got != s.shared {
			t.Fatalf("%s: a peer with shared subscriptions: %v, want %v", s.name, got, s.shared)
		}
	}
	ri := p.remote("b")
	if ri.tree.Count() != 1 || len(ri.filters) != 1 {
		t.Fatalf("after the last snapshot: %d in the tree, %d filters, want 1", ri.tree.Count(), len(ri.filters))
	}
}

// BenchmarkInterestAdd: one addition to a peer's view that holds b.N
// filters already costs one insertion (it rebuilt the whole tree).
func BenchmarkInterestAdd(b *testing.B) {
	p, err := New(Options{NodeName: "a", Username: "cluster", Broker: nopBroker{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	p.heard("b", wire.InterestSnapshot, nil)
	b.ResetTimer()
	for i := range b.N {
		p.heard("b", wire.InterestAdd, []string{fmt.Sprintf("many/%d/+", i)})
	}
}

// filtersBroker is a nopBroker whose sessions hold filters.
type filtersBroker struct {
	nopBroker
	filters []string
}

func (b filtersBroker) Filters() []string { return b.filters }

// confirmAll takes what is due for peer and confirms it, as the peer does.
func confirmAll(t *testing.T, p *Plane, peer string) {
	t.Helper()
	pid, _, _, _ := takeFor(p, peer)
	if pid == 0 {
		t.Fatalf("nothing to confirm for %s", peer)
	}
	p.out.confirm(peer, p.out.peers[peer], pid, false)
}

// TestInterestSecondSubscribeWaitsForAnnouncement: a SUBSCRIBE of a
// filter whose announcement is still in flight (another SUBSCRIBE's, or
// the periodic snapshot's) gets its SUBACK only once the peers confirmed
// that announcement, like the first one; once confirmed, a further
// SUBSCRIBE gets it at once.
func TestInterestSecondSubscribeWaitsForAnnouncement(t *testing.T) {
	p := reviewPlane(t, "a", "", 64, nil, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	defer p.Stop()
	retainedDone(t, p)
	var order []string
	doneAs := func(name string) func() { return func() { order = append(order, name) } }
	if !p.SubscriptionsAdded([]string{"f/#"}, doneAs("first")) {
		t.Fatal("the first SUBSCRIBE does not wait for the peers")
	}
	if !p.SubscriptionsAdded([]string{"f/#"}, doneAs("second")) {
		t.Fatal("the second SUBSCRIBE of a filter in flight gets its SUBACK at once")
	}
	confirmAll(t, p, "b")
	if len(order) != 0 {
		t.Fatalf("SUBACKs %v left before c confirmed", order)
	}
	confirmAll(t, p, "c")
	if fmt.Sprint(order) != "[first second]" {
		t.Fatalf("SUBACKs after both confirmed: %v", order)
	}
	if p.SubscriptionsAdded([]string{"f/#"}, doneAs("third")) {
		t.Fatal("a SUBSCRIBE of a confirmed filter waits")
	}

	// A filter a session holds before its SUBSCRIBE's hook ran, taken into
	// the periodic snapshot: the SUBACK waits for that snapshot.
	p.opts.Broker = filtersBroker{filters: []string{"f/#", "g"}}
	p.announce()
	if !p.SubscriptionsAdded([]string{"g"}, doneAs("g")) {
		t.Fatal("a SUBSCRIBE of a filter only in a snapshot in flight gets its SUBACK at once")
	}
	confirmAll(t, p, "b")
	confirmAll(t, p, "c")
	if order[len(order)-1] != "g" {
		t.Fatalf("SUBACKs: %v, want g's once the snapshot was confirmed", order)
	}

	// A link going down ends the wait for that peer.
	if !p.SubscriptionsAdded([]string{"h"}, doneAs("h")) || !p.SubscriptionsAdded([]string{"h"}, doneAs("h2")) {
		t.Fatal("SUBSCRIBE of h does not wait")
	}
	confirmAll(t, p, "b")
	p.out.setUp(p.out.peers["c"], false)
	if fmt.Sprint(order[len(order)-2:]) != "[h h2]" {
		t.Fatalf("SUBACKs: %v, want h and h2 once c's link went down", order)
	}
}

// TestInterestWaitsForPeerJustDown: a SUBSCRIBE while a peer's link has
// just gone down waits until the peer's broker has surely noticed (its
// keep alive after the last write), since until then the peer may still
// route by the old interest; once that has passed, nothing waits for it.
func TestInterestWaitsForPeerJustDown(t *testing.T) {
	p := reviewPlane(t, "a", "", 64, nil, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	defer p.Stop()
	retainedDone(t, p)
	l := p.links["b"]
	l.connected.Store(false)
	l.peerKeepAlive.Store(int64(linkKeepAlive))
	l.lastWrite.Store(time.Now().Add(-time.Minute).UnixNano())
	if p.SubscriptionsAdded([]string{"old/#"}, func() {}) {
		t.Fatal("a SUBSCRIBE waits for a peer down for a minute")
	}
	l.lastWrite.Store(time.Now().UnixNano())
	done := make(chan struct{})
	if !p.SubscriptionsAdded([]string{"new/#"}, func() { close(done) }) {
		t.Fatal("a SUBSCRIBE does not wait for a peer whose link went down just now")
	}
	select {
	case <-done:
	case <-time.After(ackWaitMax):
		t.Fatal("the SUBACK still waits past the peer's keep alive")
	}
}

// retainedDone marks p as holding the cluster's retained messages (a test
// plane's fake links never answer its question).
func retainedDone(t *testing.T, p *Plane) {
	p.rsync.answeredBy("b")
	p.rsync.answeredBy("c")
	p.peersKnown.Store(true)
	eventually(t, p.rsync.isComplete)
}

// TestRetainedQoS0KeepsOrderWithPlainQoS0: a retained QoS 0 message
// travels reliably, a plain one best effort; on one topic from one
// publisher they reach the peer in publish order (the best effort records
// went first in every frame, overtaking the retained ones before them).
func TestRetainedQoS0KeepsOrderWithPlainQoS0(t *testing.T) {
	p := reviewPlane(t, "a", "", 64, nil, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	defer p.Stop()
	p.gate = nil // no quorum: QoS 0 only here
	var want []string
	for i := range 6 {
		m := &broker.Message{Topic: "line/state", Payload: []byte(fmt.Sprint(i)), Retain: i%2 == 0}
		if err := p.InterceptPublish(m, nopResolver{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprint(i))
	}
	var got []string
	for {
		_, _, payloads, _ := takeFor(p, "b")
		if len(payloads) == 0 {
			break
		}
		got = append(got, payloads...)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the peer gets %v, want the publish order %v", got, want)
	}
}
