package load

import (
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// startBroker serves an in-process Gantry broker on a loopback port.
func startBroker(t *testing.T) string {
	t.Helper()
	return startBrokerWith(t, broker.Options{})
}

// startBrokerWith serves an in-process broker with opts.
func startBrokerWith(t *testing.T, opts broker.Options) string {
	t.Helper()
	srv, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l, broker.ListenerConfig{Name: "tcp", AllowAnonymous: true})
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// smallScenarios are the standard scenarios with small client counts.
func smallScenarios() []Scenario {
	return []Scenario{
		{Name: "fanin", Topology: FanIn, Clients: 10, Window: 64},
		{Name: "fanout", Topology: FanOut, Clients: 20, Window: 64},
		{Name: "pairs", Topology: Pairs, Clients: 10, Window: 64},
		{Name: "latency", Topology: Pairs, Clients: 10, Rate: 2000},
		{Name: "overload", Topology: FanIn, Clients: 10, Rate: 4000, SubscriberRate: 1000, LossAllowed: true},
		{Name: "connections", Topology: Idle, Clients: 200, KeepAlive: 1},
		{Name: "durable", Topology: Offline, Clients: 10, Window: 16},
	}
}

// smokeConfig is a short run whose window holds some traffic however
// little a loaded machine runs the generator in 200 ms (MinMessages).
func smokeConfig(addr string, qos byte, size int) Config {
	return Config{Addr: addr, QoS: qos, PayloadSize: size, Warmup: 50 * time.Millisecond,
		Duration: 200 * time.Millisecond, MinMessages: 100, Drain: time.Second}
}

// TestScenariosSmoke runs every scenario briefly against an in-process
// broker and checks the generator's accounting.
func TestScenariosSmoke(t *testing.T) {
	// The durable scenario's offline session must queue every message.
	addr := startBrokerWith(t, broker.Options{MaxQueuedMessages: 1 << 22})
	variants := []struct {
		qos  byte
		size int
	}{{1, 16}, {0, 1024}}
	for _, sc := range smallScenarios() {
		for _, v := range variants {
			if (sc.Topology == Idle || sc.Topology == Offline) && v.qos == 0 {
				continue
			}
			t.Run(sc.Name+qosName(v.qos), func(t *testing.T) {
				res, err := Run(context.Background(), sc, smokeConfig(addr, v.qos, v.size))
				if err != nil {
					t.Fatal(err)
				}
				checkSmoke(t, sc, v.qos, res)
			})
		}
	}
}

func qosName(q byte) string { return "/qos" + string(rune('0'+q)) }

func checkSmoke(t *testing.T, sc Scenario, qos byte, res Result) {
	t.Helper()
	if sc.Topology == Idle {
		if res.Conns != sc.Clients || res.ConnectRate() <= 0 {
			t.Errorf("connections = %d at %.0f/s, want %d", res.Conns, res.ConnectRate(), sc.Clients)
		}
		return
	}
	t.Logf("sent %d acked %d received %d/%d lost %d reordered %d stalls %d; in %.0f/s (%d behind) out %.0f/s p50 %v p99 %v",
		res.Sent, res.Acked, res.Received, res.Expected, res.Lost, res.Reordered, res.Stalls,
		res.InRate, res.Backlog, res.OutRate, res.Latency.Quantile(0.5), res.Latency.Quantile(0.99))
	if res.Sent == 0 || res.OutRate <= 0 || res.Latency.Count() == 0 {
		t.Fatalf("no traffic: %+v", res)
	}
	if err := res.Verify(sc, qos); err != nil {
		t.Error(err)
	}
	if qos == 1 && res.Acked != res.Sent {
		t.Errorf("acked %d of %d publishes", res.Acked, res.Sent)
	}
	fanout := uint64(1)
	if sc.Topology == FanOut {
		fanout = uint64(sc.Clients)
	}
	if res.Expected != res.Sent*fanout {
		t.Errorf("expected %d deliveries of %d publishes, want %d", res.Expected, res.Sent, res.Sent*fanout)
	}
	if qos == 1 && !sc.LossAllowed && res.Received != res.Expected {
		t.Errorf("received %d of %d", res.Received, res.Expected)
	}
	if sc.LossAllowed && res.Received+res.Lost != res.Expected {
		t.Errorf("received %d + lost %d != expected %d", res.Received, res.Lost, res.Expected)
	}
	// A paced generator that fell behind before the window (a loaded
	// machine did not run it) catches up in it: what it may send there is
	// what came due in the window plus that backlog.
	if el := res.Elapsed.Seconds(); sc.Rate > 0 && res.InRate*el > 1.5*sc.Rate*el+float64(res.Backlog) {
		t.Errorf("offered %.0f msg/s with %d messages behind at the start of the %v window, sent %.0f msg/s",
			sc.Rate, res.Backlog, res.Elapsed, res.InRate)
	}
	if sc.Rate > 0 && (res.GeneratorLate == nil || res.GeneratorLate.Count() == 0) {
		t.Errorf("paced run recorded no timer lateness")
	}
	if sc.Rate > 0 && runtime.GOOS == "linux" && (res.GeneratorReadLag == nil || res.GeneratorReadLag.Count() == 0) {
		t.Errorf("paced run on Linux recorded no read lag: its subscribers did not read with kernel receive timestamps")
	}
}

// A paced message that came due while its publisher slept is stamped no
// earlier than the wake-up; one that came due while the publisher was
// busy keeps its due time.
func TestStampFloor(t *testing.T) {
	const slept, woke = 1000, 1800
	for _, c := range []struct{ first, want int64 }{
		{900, 0},     // due before the sleep: the publisher was behind
		{1000, 0},    // due as it went to sleep
		{1200, woke}, // due during the sleep: late by the timer
		{2000, woke}, // due after the wake-up: max(due, woke) is the due time
	} {
		if got := stampFloor(c.first, slept, woke); got != c.want {
			t.Errorf("stampFloor(%d, %d, %d) = %d, want %d", c.first, slept, woke, got, c.want)
		}
	}
}

// TestSinkCountsEveryPublish checks the generator against the sink: every
// publish is swallowed and, at QoS 1, acknowledged.
func TestSinkCountsEveryPublish(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var s Sink
	go s.Serve(l)
	for _, qos := range []byte{0, 1} {
		sc := Scenario{Name: "fanin", Topology: FanIn, Clients: 4, Window: 64}
		cfg := smokeConfig(l.Addr().String(), qos, 16)
		cfg.Sink = true
		before := s.Publishes()
		res, err := Run(context.Background(), sc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if qos == 1 && res.Acked != res.Sent {
			t.Errorf("QoS 1: acked %d of %d", res.Acked, res.Sent)
		}
		s.Wait()
		if got := s.Publishes() - before; got != res.Sent || res.InRate <= 0 {
			t.Errorf("QoS %d: sink swallowed %d, generator sent %d at %.0f/s", qos, got, res.Sent, res.InRate)
		}
	}
}

// TestSubscriberDetectsLossAndReordering feeds a subscriber a stream with
// a gap and a late message.
func TestSubscriberDetectsLossAndReordering(t *testing.T) {
	r := &run{epoch: time.Now(), progress: make(chan struct{}, 1)}
	r.pubs = []*publisher{{wake: make(chan struct{}, 1), recv: make([]atomic.Int64, 1)},
		{id: 1, wake: make(chan struct{}, 1), recv: make([]atomic.Int64, 1)}}
	s := newSubscriber(0, 0, &conn{}, "#", r, []int{0, 1}, 0)
	payload := make([]byte, StampSize)
	for _, m := range []struct{ pub, seq uint32 }{{0, 0}, {0, 1}, {0, 3}, {0, 2}, {1, 0}, {1, 1}} {
		stamp(payload, m.pub, m.seq, 0)
		p := packet.Publish{Topic: []byte("t"), Payload: payload}
		b := p.Append(nil, version)
		h, n, err := packet.DecodeFixedHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.handle(h, b[n:]); err != nil {
			t.Fatal(err)
		}
	}
	s.settle()
	r.pubs[0].sent.Store(5)
	r.pubs[1].sent.Store(2)
	if s.reordered != 1 || s.received.Load() != 6 || s.expected() != 7 {
		t.Errorf("reordered %d received %d expected %d, want 1, 6, 7", s.reordered, s.received.Load(), s.expected())
	}
	if got := r.pubs[0].recv[0].Load(); got != 4 {
		t.Errorf("publisher 0 credited %d deliveries, want 4 (0, 1, 2 as a gap, 3)", got)
	}
}

// TestHistogramQuantiles checks the bucket precision.
func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100000; v++ {
		h.Record(v * 1000) // 1 µs .. 100 ms
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {0.999, 99900 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if d := got - c.want; d < -c.want/64 || d > c.want/64 {
			t.Errorf("Quantile(%v) = %v, want %v ±1.6%%", c.q, got, c.want)
		}
	}
	var m Histogram
	m.Merge(&h)
	if m.Count() != h.Count() || m.Max() != 100*time.Millisecond {
		t.Errorf("merged count %d max %v", m.Count(), m.Max())
	}
}
