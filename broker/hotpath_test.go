package broker_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"
)

// drainingSubscribers connects n raw v5 clients subscribed to filter at
// QoS 0 whose sockets are read and discarded, so that the writers run as
// they would against fast clients.
func drainingSubscribers(t testing.TB, srv *testServer, n int, filter string) {
	t.Helper()
	for i := range n {
		c, _ := connectRaw(t, srv.addr, v5Connect(fmt.Sprintf("sub-%d", i)))
		c.subscribe(1, 0, sub(filter, 0))
		go io.Copy(io.Discard, c.nc)
	}
}

// TestRoutingDoesNotAllocatePerSubscriber: delivering one QoS 0 message
// to 500 subscribers allocates no more than delivering it to one.
//
// A session's queue grows (once) to the most its writer fell behind, and
// on a loaded machine the writers fall behind the test's Deliver loop by
// more in one round than in the warm-up: 500 queues growing a few times
// each made 1 allocation per message in 1 run of 5. So each count is the
// least of several rounds, each begun with every queue drained: a
// round's growth only raises the capacity the next ones find, while an
// allocation per delivery shows in every round.
func TestRoutingDoesNotAllocatePerSubscriber(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector (sync.Pool drops items); make test runs this test without -race too")
	}
	const rounds, runs = 3, 2000
	allocs := map[int]float64{}
	for _, n := range []int{1, 500} {
		srv := startServer(t, broker.Options{MaxQueuedMessages: 1 << 20})
		drainingSubscribers(t, srv, n, "plant/+/temp")
		m := &broker.Message{Topic: "plant/l1/temp", Payload: []byte("21.5")}
		delivered := uint64(0)
		deliver := func() { srv.Deliver(m); delivered++ }
		for range 1000 { // warm up queues, buffers and pools
			deliver()
		}
		for r := range rounds {
			drained(t, srv, delivered*uint64(n))
			a := testing.AllocsPerRun(runs, deliver)
			if r == 0 || a < allocs[n] {
				allocs[n] = a
			}
		}
	}
	t.Logf("allocations per message: 1 subscriber %.2f, 500 subscribers %.2f", allocs[1], allocs[500])
	if allocs[500] > allocs[1]+0.5 {
		t.Fatalf("routing to 500 subscribers allocates %.2f per message, to 1 subscriber %.2f: allocation per subscriber", allocs[500], allocs[1])
	}
}

// drained waits until the server has sent, or dropped, want messages in
// all: its sessions' queues are empty. A million messages to 500
// subscribers take a while on a loaded machine: the bound is generous.
func drained(t testing.TB, srv *testServer, want uint64) {
	t.Helper()
	eventually(t, 6*waitTimeout, func() error {
		st := srv.Stats()
		if got := st.MessagesOut.Load() + st.Dropped.Load(); got < want {
			return fmt.Errorf("%d of %d messages sent or dropped", got, want)
		}
		return nil
	})
}

// countingListener counts the Write calls of every accepted connection.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestWriterCoalesces: messages routed faster than a socket write takes
// leave in far fewer write calls than messages.
func TestWriterCoalesces(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	srv := serveOn(t, broker.Options{MaxQueuedMessages: 1 << 20}, l, anonymousTCP)
	drainingSubscribers(t, srv, 1, "c/#")
	before := l.writes.Load()
	const n = 5000
	m := &broker.Message{Topic: "c/x", Payload: make([]byte, 64)}
	for range n {
		srv.Deliver(m)
	}
	eventually(t, waitTimeout, func() error {
		if got := srv.Stats().MessagesOut.Load(); got < n {
			return fmt.Errorf("%d of %d messages sent", got, n)
		}
		return nil
	})
	writes := l.writes.Load() - before
	t.Logf("%d messages in %d write calls", n, writes)
	if writes > n/5 {
		t.Fatalf("%d messages took %d write calls: the writer does not coalesce", n, writes)
	}
}

func benchmarkFanout(b *testing.B, subscribers int) {
	srv := startServer(b, broker.Options{MaxQueuedMessages: 1 << 20})
	drainingSubscribers(b, srv, subscribers, "bench/#")
	m := &broker.Message{Topic: "bench/line1/temp", Payload: make([]byte, 16)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		srv.Deliver(m)
	}
}

func BenchmarkRouteFanout1(b *testing.B)    { benchmarkFanout(b, 1) }
func BenchmarkRouteFanout100(b *testing.B)  { benchmarkFanout(b, 100) }
func BenchmarkRouteFanout1000(b *testing.B) { benchmarkFanout(b, 1000) }

// BenchmarkPublishDecodeRoute measures the inbound path of one QoS 0
// PUBLISH from a network client to one subscriber: decode, copy, route.
func BenchmarkPublishDecodeRoute(b *testing.B) {
	srv := startServer(b, broker.Options{MaxQueuedMessages: 1 << 20})
	drainingSubscribers(b, srv, 1, "bench/#")
	pub, _ := connectRaw(b, srv.addr, v5Connect("bench-pub"))
	p := &packet.Publish{Topic: []byte("bench/line1/temp"), Payload: make([]byte, 16)}
	batch := make([]byte, 0, 64*1024)
	for len(batch)+p.Size(packet.V5) <= cap(batch) {
		batch = p.Append(batch, packet.V5)
	}
	perBatch := int64(len(batch) / p.Size(packet.V5))
	b.ReportAllocs()
	b.ResetTimer()
	sent := int64(0)
	for sent < int64(b.N) {
		pub.send(batch)
		sent += perBatch
	}
	eventually(b, waitTimeout, func() error {
		if got := srv.Stats().MessagesIn.Load(); got < uint64(sent) {
			return fmt.Errorf("%d of %d in", got, sent)
		}
		return nil
	})
}

// A reader delivers what it routed before it reads on (see
// conn.deferWake); one that stops right after, on a DISCONNECT in the same
// read or a broken stream, still has every routed message delivered.
func TestReaderThatStopsStillDelivers(t *testing.T) {
	srv := startServer(t, broker.Options{})
	subc, _ := connectRaw(t, srv.addr, v5Connect("stop-sub"))
	subc.subscribe(1, 0, sub("stop/#", 1))
	for i, end := range []any{&packet.Disconnect{}, []byte{0xF0, 0x05}} { // a DISCONNECT; a malformed packet
		pubc, _ := connectRaw(t, srv.addr, v5Connect(fmt.Sprint("stop-pub", i)))
		var b []byte
		b = pubc.encode(b, rawPublish("stop/a", 0, 0, fmt.Sprint("q0-", i)))
		b = pubc.encode(b, rawPublish("stop/b", 1, 1, fmt.Sprint("q1-", i)))
		if raw, ok := end.([]byte); ok {
			b = append(b, raw...)
		} else {
			b = pubc.encode(b, end)
		}
		pubc.send(b) // one write: the broker reads them at once
		for _, want := range []string{fmt.Sprint("q0-", i), fmt.Sprint("q1-", i)} {
			p := subc.expectPublish()
			if string(p.Payload) != want {
				t.Fatalf("subscriber got %q, want %q", p.Payload, want)
			}
			if p.QoS == 1 {
				subc.sendPackets(ack(packet.PUBACK, p.PacketID))
			}
		}
	}
}

// blockingHook holds QoS 1 publishes until release is closed.
type blockingHook struct{ release chan struct{} }

func (h blockingHook) InterceptPublish(m *broker.Message, _ broker.Resolver) error {
	if m.QoS == 1 {
		<-h.release
	}
	return nil
}

// blockingSubscribe holds a SUBSCRIBE to "z/#" until release is closed.
type blockingSubscribe struct{ release chan struct{} }

func (blockingSubscribe) CanPublish(*broker.ConnInfo, string) bool { return true }
func (a blockingSubscribe) CanSubscribe(_ *broker.ConnInfo, filter string) bool {
	if filter == "z/#" {
		<-a.release
	}
	return true
}

// What a reader routed and acknowledged does not wait for a later packet
// of the same read that waits in a hook or the authorizer: it is sent
// before that packet is handled.
func TestDeferredSendsDoNotWaitForABlockingCall(t *testing.T) {
	t.Run("publish hook", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		srv := startServer(t, broker.Options{}, func(s *broker.Server) { s.AddPublishHook(blockingHook{release}) })
		subc, _ := connectRaw(t, srv.addr, v5Connect("hook-sub"))
		subc.subscribe(1, 0, sub("hb/#", 0))
		pubc, _ := connectRaw(t, srv.addr, v5Connect("hook-pub"))
		var b []byte
		b = pubc.encode(b, rawPublish("hb/a", 0, 0, "q0"))
		b = pubc.encode(b, rawPublish("hb/b", 1, 1, "held"))
		pubc.send(b)
		if p := subc.expectPublish(); string(p.Payload) != "q0" {
			t.Fatalf("subscriber got %q, want q0 while the next publish waits in its hook", p.Payload)
		}
	})
	t.Run("authorizer on subscribe", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		srv := startServer(t, broker.Options{}, func(s *broker.Server) { s.SetAuthorizer(blockingSubscribe{release}) })
		subc, _ := connectRaw(t, srv.addr, v5Connect("authz-sub"))
		subc.subscribe(1, 0, sub("ab/#", 1))
		pubc, _ := connectRaw(t, srv.addr, v5Connect("authz-pub"))
		// The publisher subscribes after publishing, in the same write:
		// its SUBSCRIBE waits in the authorizer.
		var b []byte
		b = pubc.encode(b, rawPublish("ab/c", 1, 7, "m"))
		b = pubc.encode(b, &packet.Subscribe{PacketID: 2, Subscriptions: []packet.Subscription{sub("z/#", 0)}})
		pubc.send(b)
		if p := subc.expectPublish(); string(p.Payload) != "m" {
			t.Fatalf("subscriber got %q, want m while the SUBSCRIBE after it waits", p.Payload)
		}
		if a := pubc.expectAck(packet.PUBACK); a.PacketID != 7 {
			t.Fatalf("PUBACK %d, want 7", a.PacketID)
		}
	})
}

// writeCalls returns the write system calls this process has made, from
// /proc/self/io (Linux), and false where that file is missing.
func writeCalls(t *testing.T) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/io: %q", l)
			}
			return n, true
		}
	}
	return 0, false
}

// TestFanOutBurstLeavesInFewWrites: a publisher that sends a burst of
// messages to many subscribers gets them delivered several per write
// call. A reader that yielded before sending what it deferred after every
// socket read, although more was waiting, let the writers it woke run
// after each few messages: fan-out of 1 KB messages fell to a sixth.
func TestFanOutBurstLeavesInFewWrites(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes how the writers interleave; make test runs this test without -race")
	}
	srv := startServer(t, broker.Options{MaxQueuedMessages: 1 << 20})
	const subscribers, n = 20, 2000
	drainingSubscribers(t, srv, subscribers, "burst")
	pub, _ := connectRaw(t, srv.addr, v5Connect("burst-pub"))
	pkt := pub.encode(nil, &packet.Publish{Topic: []byte("burst"), Payload: make([]byte, 1024)})
	burst := bytes.Repeat(pkt, n)
	before, ok := writeCalls(t)
	if !ok {
		t.Skip("no /proc/self/io")
	}
	out0 := srv.Stats().MessagesOut.Load()
	pub.send(burst)
	eventually(t, waitTimeout, func() error {
		if got := srv.Stats().MessagesOut.Load() - out0; got < subscribers*n {
			return fmt.Errorf("%d of %d deliveries sent", got, subscribers*n)
		}
		return nil
	})
	after, _ := writeCalls(t)
	writes := after - before - 1 // the publisher's
	t.Logf("%d deliveries in %d write calls", subscribers*n, writes)
	if writes > subscribers*n/5 {
		t.Fatalf("%d deliveries took %d write calls: the writers do not batch a burst", subscribers*n, writes)
	}
}
