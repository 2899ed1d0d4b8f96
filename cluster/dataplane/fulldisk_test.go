package dataplane

// A full disk on the receiving node: the local broker's store fails the
// writes of a peer's records for an offline persistent session, the node
// does not confirm them, and the peer sends them again. Each subscriber
// must get each QoS 2 message once: the offline one on its return (from
// the resend, written once the disk has room), a connected one that had
// it from the first delivery not again.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	brokerstore "gantry/broker/store"
	"gantry/cluster/partition"
	"gantry/cluster/wire"

	"github.com/eclipse/paho.golang/paho"
)

// fullDiskStore is the broker's real store behind a switch: while full,
// every call writes nothing and its done gets errDiskFull.
type fullDiskStore struct {
	*brokerstore.Store
	full atomic.Bool
	mu   sync.Mutex // held while forwarding, so that calls keep their order
}

var errDiskFull = errors.New("no space left on device (injected)")

func (f *fullDiskStore) Persist(ops []broker.PersistOp, done func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.full.Load() {
		f.Store.Persist(ops, done)
		return
	}
	var fail func(error)
	if done != nil {
		fail = func(error) { done(errDiskFull) }
	}
	f.Store.Persist(nil, fail)
}

// fullDiskBroker is a real broker on a store in t.TempDir(), serving
// anonymous MQTT on a loopback port once serve is called (publish hooks
// are added before it: the broker reads them unlocked).
func fullDiskBroker(t *testing.T) (srv *broker.Server, fd *fullDiskStore, addr string, serve func()) {
	t.Helper()
	st, err := brokerstore.Open(filepath.Join(t.TempDir(), "gantry.db"), brokerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err = broker.New(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fd = &fullDiskStore{Store: st}
	srv.SetPersister(fd)
	if err := srv.Restore(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		st.Close()
	})
	serve = func() { go srv.Serve(l, broker.ListenerConfig{Name: "tcp", AllowAnonymous: true}) }
	return srv, fd, l.Addr().String(), serve
}

// mqttSub is a paho MQTT 5 client subscribed to a filter at QoS 2.
type mqttSub struct {
	*paho.Client
	msgs chan *paho.Publish
}

func subscribeQoS2(t *testing.T, addr, id string, expiry uint32, fresh bool, filter string) *mqttSub {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &mqttSub{msgs: make(chan *paho.Publish, 64)}
	s.Client = paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) { s.msgs <- pr.Packet; return true, nil },
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: fresh, KeepAlive: 30}
	if expiry > 0 {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	if _, err := s.Connect(ctx, cp); err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	t.Cleanup(s.close)
	if fresh {
		if _, err := s.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 2}}}); err != nil {
			t.Fatalf("subscribe %s: %v", id, err)
		}
	}
	return s
}

func (s *mqttSub) close() {
	s.Disconnect(&paho.Disconnect{})
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
	}
}

// exactly fails unless the subscriber receives want, in order, and then
// nothing for 300 ms (a bounded wait: proving absence).
func (s *mqttSub) exactly(t *testing.T, who string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case m := <-s.msgs:
			if string(m.Payload) != w || m.QoS != 2 {
				t.Fatalf("%s got %q QoS %d, want %q QoS 2", who, m.Payload, m.QoS, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not get %q", who, w)
		}
	}
	select {
	case m := <-s.msgs:
		t.Fatalf("%s got %q again (QoS %d): delivered twice", who, m.Payload, m.QoS)
	case <-time.After(300 * time.Millisecond):
	}
}

// peerFrame is a frame of sender "a" (boot 1) with its decisions and QoS 2
// records on topic fd/t numbered from first; held makes them partition
// copies whose delivery waits for the decision (Copy, Decide).
func peerFrame(p *Plane, decided uint64, held bool, first uint64, payloads ...string) *broker.Message {
	f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), decided, nil)
	for i, pl := range payloads {
		msg := wire.AppendMessage(nil, &broker.Message{Topic: "fd/t", Payload: []byte(pl), QoS: 2, ClientID: "pub"})
		var rep *wire.Rep
		if held {
			rep = &wire.Rep{Copy: true, Partition: 0, Epoch: 1, Decide: true}
		}
		f = wire.AppendRecordRep(f, first+uint64(i), msg, nil, rep)
	}
	time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
	return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
}

// answer receives m and returns the frame's answer.
func answer(t *testing.T, p *Plane, m *broker.Message) error {
	t.Helper()
	r := make(chanResolver, 1)
	err := p.receive(m, r)
	if err == broker.ErrDeferred {
		select {
		case err = <-r:
		case <-time.After(5 * time.Second):
			t.Fatal("the frame was not answered")
		}
	}
	return err
}

func TestFullDiskPeerRecordsDeliveredOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		held bool // copies of a partition, delivered on their origin's decision
	}{
		{"delivered at once", false},
		{"held copies released", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, fd, addr, serve := fullDiskBroker(t)
			opts := Options{NodeName: "b", Username: "cluster", Broker: srv, BestEffort: true, Reliable: true,
				ForwardQueueEntries: 8192, DataDir: t.TempDir()}
			if tc.held {
				opts.Replication = &Replication{Gate: true, Timeout: time.Minute}
			}
			p, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			if tc.held {
				p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1}}})
			}
			serve()
			off := subscribeQoS2(t, addr, "fd-off", 3600, true, "fd/#")
			off.close()
			eventuallyT(t, func() bool { return srv.Stats().Connections.Load() == 0 })
			online := subscribeQoS2(t, addr, "fd-online", 0, true, "fd/#")

			fd.full.Store(true)
			frame := func() *broker.Message { return peerFrame(p, 0, false, 1, "m1", "m2") }
			if tc.held {
				frame = func() *broker.Message { return peerFrame(p, 2, false, 0) } // the decisions alone
				if err := answer(t, p, peerFrame(p, 0, true, 1, "m1", "m2")); err != nil {
					t.Fatalf("the copies answered %v (the copy log is not on the full disk here)", err)
				}
			}
			if err := answer(t, p, frame()); err == nil {
				t.Fatal("a frame whose writes failed was confirmed: the peer would drop what this node could not store")
			}
			online.exactly(t, "the connected subscriber", "m1", "m2")
			if tc.held {
				eventuallyT(t, func() bool { return p.recv.held.Load() == 2 }) // held again, for the next decision
			} else {
				s := p.recv.sender("a")
				eventuallyT(t, func() bool { return s.seen.Load() == 0 }) // the resend is taken
			}

			// Room again; the peer sends the frame again.
			fd.full.Store(false)
			reconnect()
			if err := answer(t, p, frame()); err != nil {
				t.Fatalf("the resend answered %v", err)
			}
			online.exactly(t, "the connected subscriber, after the resend")
			back := subscribeQoS2(t, addr, "fd-off", 3600, false, "fd/#")
			back.exactly(t, "the persistent subscriber back", "m1", "m2")
		})
	}
}

// gatedBroker records what it is given at once, as recordingBroker, but
// while gated answers each DeliverBatch only when the test takes its done
// from dones: the test decides when, and in which order, frames' deliveries
// finish.
type gatedBroker struct {
	recordingBroker
	gated atomic.Bool
	dones chan func(error)
}

func (b *gatedBroker) DeliverBatch(ms []*broker.Message, done func(error)) bool {
	b.recordingBroker.DeliverBatch(ms, done)
	if !b.gated.Load() {
		return false
	}
	b.dones <- done
	return true
}

// TestFramesInFlightOnFullDiskDeliveredOnce: two frames of one sender are
// in flight when the copy log's disk fills, their messages delivered, and
// the first fails (its copy could not be written). The sender sends both
// again, in one frame; neither message may be delivered a second time,
// whether the second frame failed too ("both copies failed") or was
// written whole ("the second written"), and whichever finished first.
// The receiver rewound to the first frame and remembered at most one run
// of records not to deliver again (the last frame that failed): the other
// frame's messages were delivered twice (the full disk's QoS 2 twice on 3
// nodes, in runs of a frame's consecutive messages).
func TestFramesInFlightOnFullDiskDeliveredOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		secondFails bool // the second frame's copy fails too
		secondFirst bool // the second frame's deliveries finish first
		wantAnswer3 bool // the second frame is confirmed
	}{
		{"both copies failed", true, false, false},
		{"both copies failed, second finished first", true, true, false},
		{"the second written", false, false, true},
		{"the second written, finished first", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := &gatedBroker{dones: make(chan func(error), 4)}
			opts := Options{NodeName: "n", Username: "cluster", Broker: br, BestEffort: true, Reliable: true,
				ForwardQueueEntries: 8192, DataDir: t.TempDir(), Replication: &Replication{Gate: true, Timeout: time.Minute}}
			p, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{{Owner: "a", Replicas: []string{"a", "n"}, Epoch: 1}}})
			frame := func(first uint64, payloads ...string) *broker.Message {
				f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), first+uint64(len(payloads))-1, nil)
				for i, pl := range payloads {
					msg := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(pl), QoS: 2, ClientID: "pub"})
					f = wire.AppendRecordRep(f, first+uint64(i), msg, nil, &wire.Rep{Copy: true, Partition: 0, Epoch: 1})
				}
				time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
				return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
			}
			receiveOK(t, p, frame(1, "m1")) // the log's first segment exists now
			p.store.settle()                // and what m1's frame wrote after its answer (what was received) is logged: the next write is m2's copy

			br.gated.Store(true)
			if tc.secondFails {
				p.store.log.full.Store(true)
			} else {
				p.store.log.failNext.Store(true)
			}
			r2, r3 := make(chanResolver, 1), make(chanResolver, 1)
			if err := p.receive(frame(2, "m2"), r2); err != broker.ErrDeferred {
				t.Fatalf("the second frame answered %v at once", err)
			}
			// The first frame's copy write is over before the second's
			// begins (or the two could share one write).
			eventuallyT(t, func() bool { return !p.store.log.failNext.Load() })
			if err := p.receive(frame(3, "m3"), r3); err != broker.ErrDeferred {
				t.Fatalf("the third frame answered %v at once", err)
			}
			d2, d3 := <-br.dones, <-br.dones
			if tc.secondFirst {
				d3(nil)
				d2(nil)
			} else {
				d2(nil)
				d3(nil)
			}
			wait := func(r chanResolver) error {
				select {
				case err := <-r:
					return err
				case <-time.After(5 * time.Second):
					t.Fatal("a frame was not answered")
					return nil
				}
			}
			if err := wait(r2); err == nil {
				t.Fatal("a frame whose copy could not be written was confirmed")
			}
			if err := wait(r3); (err == nil) != tc.wantAnswer3 {
				t.Fatalf("the third frame answered %v", err)
			}
			s := p.recv.sender("a")
			eventuallyT(t, func() bool { return s.seen.Load() == 1 }) // rewound to the failed frame

			// Room again; the sender sends what it has not had confirmed.
			p.store.log.full.Store(false)
			br.gated.Store(false)
			reconnect()
			receiveOK(t, p, frame(2, "m2", "m3"))
			if got := br.delivered(); fmt.Sprint(got) != "[m1 m2 m3]" {
				t.Fatalf("delivered %q, want m1, m2 and m3 once each", got)
			}
			// In the order written: m3 before m2 when the second frame's
			// copy was written and the first's only by the resend.
			if got := copiesHeld(p); fmt.Sprint(slices.Sorted(slices.Values(got))) != "[m1 m2 m3]" {
				t.Fatalf("copies %q after the resend, want m1, m2 and m3 once each", got)
			}
		})
	}
}

// TestHeldCopyOfFailedFrameHeldOnce: a frame holds copy m2 (two-phase
// delivery) and fails because the delivery it released (m1) could not be
// written; the frame behind it, in flight meanwhile, releases m2, which is
// delivered. The resend of both must not hold m2 again: it was held, and
// released, by the first frame's taking (held again, the next decision
// delivered it a second time, and the broker, whose write of it had
// succeeded, took that for a new message).
func TestHeldCopyOfFailedFrameHeldOnce(t *testing.T) {
	br := &gatedBroker{dones: make(chan func(error), 4)}
	opts := Options{NodeName: "b", Username: "cluster", Broker: br, BestEffort: true, Reliable: true,
		ForwardQueueEntries: 8192, DataDir: t.TempDir(), Replication: &Replication{Gate: true, Timeout: time.Minute}}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1}}})
	receiveOK(t, p, frameFrom(p, 0, nil, 1, "m1")) // held

	br.gated.Store(true)
	r2, r3 := make(chanResolver, 1), make(chanResolver, 1)
	if err := p.receive(frameFrom(p, 1, nil, 2, "m2"), r2); err != broker.ErrDeferred { // releases m1, holds m2
		t.Fatalf("the second frame answered %v at once", err)
	}
	if err := p.receive(frameFrom(p, 2, nil, 3, "m3"), r3); err != broker.ErrDeferred { // releases m2, holds m3
		t.Fatalf("the third frame answered %v at once", err)
	}
	d2, d3 := <-br.dones, <-br.dones
	d2(errDiskFull) // m1 not written: held again, for the next decision
	d3(nil)
	for _, r := range []chanResolver{r2, r3} {
		select {
		case <-r:
		case <-time.After(5 * time.Second):
			t.Fatal("a frame was not answered")
		}
	}
	s := p.recv.sender("a")
	eventuallyT(t, func() bool { return s.seen.Load() == 1 && p.recv.held.Load() == 2 }) // rewound; m1 and m3 held

	br.gated.Store(false)
	reconnect()
	receiveOK(t, p, frameFrom(p, 3, nil, 2, "m2", "m3")) // the resend, with the decisions
	if got := br.delivered(); fmt.Sprint(got) != "[m1 m2 m1 m3]" {
		t.Fatalf("delivered %q, want m1 (failed), m2, m1 and m3", got)
	}
	if n := p.recv.held.Load(); n != 0 {
		t.Fatalf("%d copies still held", n)
	}
}

// TestHeldCopyWrittenAgainRefused: a held copy whose first write failed
// (a full disk) is written again by its frame's resend, under a new key;
// its refusal then deletes that copy, not the key of the write that
// failed (the refused copy stayed, for a fill or a replay to deliver).
func TestHeldCopyWrittenAgainRefused(t *testing.T) {
	br := &recordingBroker{}
	p := twoPhasePlane(t, "b", t.TempDir(), br, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	receiveOK(t, p, frameFrom(p, 0, nil, 1, "m1"))
	p.store.log.full.Store(true)
	r := make(chanResolver, 1)
	err := p.receive(frameFrom(p, 0, nil, 2, "m2"), r)
	if err == broker.ErrDeferred {
		err = <-r
	}
	if err == nil {
		t.Fatal("a frame whose copy could not be written was confirmed")
	}
	s := p.recv.sender("a")
	eventuallyT(t, func() bool { return s.seen.Load() == 1 })
	p.store.log.full.Store(false)
	reconnect()
	receiveOK(t, p, frameFrom(p, 0, nil, 2, "m2"))   // written again
	receiveOK(t, p, frameFrom(p, 2, []uint64{2}, 3)) // m1 acknowledged, m2 refused
	if got := br.delivered(); fmt.Sprint(got) != "[m1]" {
		t.Fatalf("delivered %q, want m1", got)
	}
	if got := copiesHeld(p); fmt.Sprint(got) != "[m1]" {
		t.Fatalf("copies %q, want m1 alone: m2 was refused", got)
	}
}

// TestFullDiskOriginRefusalNotDelivered: the publisher's node has a full
// disk (its broker's store fails) but its data plane's log has room (it
// reserves it ahead), so the quorum write of a QoS 1 publish gets its
// majority; the write of the queue entry for the offline subscriber here
// fails, and the publisher gets 0x80. Nobody else may then deliver it: the
// copy b is told it is refused, and c, which is not a copy, is never sent
// it. Before, the write was decided on its majority alone, b delivered it
// and c was sent it (make chaos, full disk: every refused publish of the
// full node reached the subscribers of the other nodes).
func TestFullDiskOriginRefusalNotDelivered(t *testing.T) {
	t.Run("c not a copy", func(t *testing.T) { testFullDiskOriginRefusal(t, false) })
	// Both peers copies, both confirm before the decision: the stream
	// then trimmed the record, and the refusal, finding it gone, named it
	// to nobody.
	t.Run("every peer a copy", func(t *testing.T) { testFullDiskOriginRefusal(t, true) })
}

func testFullDiskOriginRefusal(t *testing.T, cCopy bool) {
	srv, fd, addr, serve := fullDiskBroker(t)
	p, err := New(Options{NodeName: "a", Username: "cluster", Broker: srv, BestEffort: true, Reliable: true,
		ForwardQueueEntries: 8192, DataDir: t.TempDir(), Replication: &Replication{Gate: true, Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for _, n := range []string{"b", "c"} {
		ps, _ := p.out.addPeer(n)
		p.out.setUp(ps, true)
		l := &link{p: p, peer: n, ps: ps, done: make(chan struct{})}
		l.connected.Store(true)
		close(l.done)
		p.links[n] = l
	}
	replicas := []string{"a", "b"}
	if cCopy {
		replicas = append(replicas, "c")
	}
	p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{{Owner: "a", Replicas: replicas, Epoch: 1}}})
	srv.AddPublishHook(p)
	serve()

	off := subscribeQoS2(t, addr, "fd-off", 3600, true, "fd/#")
	off.close()
	eventuallyT(t, func() bool { return srv.Stats().Connections.Load() == 0 })

	pub := func(payload string) <-chan *paho.PublishResponse {
		t.Helper()
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := paho.NewClient(paho.ClientConfig{Conn: nc})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		if _, err := c.Connect(ctx, &paho.Connect{ClientID: "fd-pub-" + payload, CleanStart: true, KeepAlive: 30}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
		got := make(chan *paho.PublishResponse, 1)
		go func() {
			pr, _ := c.Publish(ctx, &paho.Publish{Topic: "fd/t", Payload: []byte(payload), QoS: 1})
			got <- pr
		}()
		return got
	}
	// The copy b (and c when a copy) confirms the record: its majority
	// (a's log and b).
	confirmB := func() uint64 {
		t.Helper()
		var seq uint64
		peers := []string{"b"}
		if cCopy {
			peers = append(peers, "c")
		}
		for _, n := range peers {
			eventuallyT(t, func() bool {
				pid, _, _, seqs, _ := takeHead(p, n)
				if len(seqs) == 0 {
					return false
				}
				seq = seqs[0]
				p.out.confirm(n, p.out.peers[n], pid, false)
				return true
			})
		}
		return seq
	}
	ack := func(got <-chan *paho.PublishResponse) byte {
		t.Helper()
		select {
		case pr := <-got:
			if pr == nil {
				t.Fatal("no PUBACK")
			}
			return pr.ReasonCode
		case <-time.After(10 * time.Second):
			t.Fatal("no PUBACK in 10 s")
			return 0
		}
	}

	fd.full.Store(true)
	got := pub("refused")
	m1 := confirmB()
	if rc := ack(got); rc != 0x80 {
		t.Fatalf("PUBACK %#x with the disk full, want 0x80", rc)
	}
	_, decided, refused, _, _ := takeHead(p, "b")
	if !slices.Contains(refused, m1) {
		t.Fatalf("b's header: decided %d refused %v; want record %d named refused (b would deliver it)", decided, refused, m1)
	}
	if _, _, refused, seqs, _ := takeHead(p, "c"); slices.Contains(seqs, m1) || cCopy && !slices.Contains(refused, m1) {
		t.Fatalf("c (a copy: %v) was sent %v, refused %v; record %d was refused with 0x80", cCopy, seqs, refused, m1)
	}

	fd.full.Store(false)
	got = pub("stored")
	m2 := confirmB()
	if rc := ack(got); rc != 0 {
		t.Fatalf("PUBACK %#x with room again, want success", rc)
	}
	if _, decided, _, _, _ := takeHead(p, "b"); decided < m2 {
		t.Fatalf("b's header decides up to %d after the acknowledgement of record %d", decided, m2)
	}
	if !cCopy {
		if _, _, _, seqs, _ := takeHead(p, "c"); !slices.Equal(seqs, []uint64{m2}) {
			t.Fatalf("c was sent %v, want only record %d", seqs, m2)
		}
	}
	if rs := p.ReplicationStatus(); rs.Failures[failDisk] != 1 {
		t.Fatalf("failures %v, want one %s", rs.Failures, failDisk)
	}
}
