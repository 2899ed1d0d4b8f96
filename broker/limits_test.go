package broker_test

// Tests of the client-protection limits: connections per listener and per
// server, connect rate, server keep alive, topic levels, slow consumers
// (MaxOutboundBytes, StuckTimeout), the connect timeout, and the counters
// and log lines that show them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// serveAlso serves a second listener with lc on srv and returns its
// address; the listener ends with the server.
func serveAlso(t *testing.T, srv *testServer, lc broker.ListenerConfig) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, lc) }()
	t.Cleanup(func() {
		// Runs before serveOn's clean-up, which then finds the server shut.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; !errors.Is(err, broker.ErrServerClosed) {
			t.Errorf("second Serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

// expectRefused connects with cp and checks that the CONNACK carries want
// and that the connection is then closed.
func expectRefused(t *testing.T, addr string, cp packet.Connect, want packet.ReasonCode) {
	t.Helper()
	c := dialRaw(t, addr, cp.Version)
	ack := c.connect(cp)
	if ack.ReasonCode != want {
		t.Fatalf("CONNACK %v for %q (MQTT level %d), want %v", ack.ReasonCode, cp.ClientID, cp.Version, want)
	}
	c.expectClosed(waitTimeout)
}

func v3Connect(id string) packet.Connect {
	return packet.Connect{Version: packet.V311, CleanStart: true, ClientID: id, KeepAlive: 60}
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// ListenerConfig.MaxConnections bounds one listener: beyond it a v5 client
// gets CONNACK 0x97, a v3 client return code 3; another listener is not
// affected, and a closed connection frees its slot.
func TestListenerMaxConnections(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s := serveOn(t, broker.Options{Logger: logs.logger()}, l, broker.ListenerConfig{Name: "tcp", AllowAnonymous: true, MaxConnections: 2})
	other := serveAlso(t, s, broker.ListenerConfig{Name: "other", AllowAnonymous: true})

	a, _ := connectRaw(t, s.addr, v5Connect("a"))
	connectRaw(t, s.addr, v5Connect("b"))
	expectRefused(t, s.addr, v5Connect("c"), packet.QuotaExceeded)
	expectRefused(t, s.addr, v3Connect("c3"), packet.ServerUnavailable)
	connectRaw(t, other, v5Connect("d"))
	connectRaw(t, other, v5Connect("e"))
	if got := s.Stats().ConnectionsRefused.Load(); got != 2 {
		t.Fatalf("ConnectionsRefused = %d, want 2", got)
	}
	if n := logs.count("listener connection limit reached"); n != 1 {
		t.Fatalf("%d log lines for two refusals within 10 s, want 1:\n%s", n, logs.b.String())
	}

	a.sendPackets(&packet.Disconnect{})
	a.expectClosed(waitTimeout)
	eventually(t, waitTimeout, func() error {
		if n := s.Stats().Connections.Load(); n != 3 {
			return fmt.Errorf("%d connections, want 3", n)
		}
		return nil
	})
	connectRaw(t, s.addr, v5Connect("f")) // a's slot
	expectRefused(t, s.addr, v5Connect("g"), packet.QuotaExceeded)
}

// Options.MaxConnections bounds the connections of all listeners together.
func TestGlobalMaxConnections(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxConnections: 2})
	other := serveAlso(t, s, anonymousTCP)
	connectRaw(t, s.addr, v5Connect("a"))
	connectRaw(t, other, v5Connect("b"))
	expectRefused(t, other, v5Connect("c"), packet.QuotaExceeded)
	expectRefused(t, s.addr, v3Connect("c3"), packet.ServerUnavailable)
	if got := s.Stats().ConnectionsRefused.Load(); got != 2 {
		t.Fatalf("ConnectionsRefused = %d, want 2", got)
	}
	if n := s.Stats().Connections.Load(); n != 2 {
		t.Fatalf("Connections = %d, want 2", n)
	}
}

// Options.MaxConnectRate: a burst of CONNECTs beyond the bucket gets
// CONNACK 0x9F (v3: return code 3); once tokens are back, clients get in.
func TestConnectRate(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	// 2 per second: a token every 500 ms, far longer than the few
	// milliseconds the burst below takes.
	s := startServer(t, broker.Options{MaxConnectRate: 2, Logger: logs.logger()})
	connectRaw(t, s.addr, v5Connect("a"))
	connectRaw(t, s.addr, v5Connect("b"))
	expectRefused(t, s.addr, v5Connect("c"), packet.ConnectionRateExceeded)
	expectRefused(t, s.addr, v3Connect("c3"), packet.ServerUnavailable)
	if got := s.Stats().ConnectRateRefused.Load(); got != 2 {
		t.Fatalf("ConnectRateRefused = %d, want 2", got)
	}
	if n := logs.count("connect rate exceeded"); n != 1 {
		t.Fatalf("%d log lines for two refusals within 10 s, want 1", n)
	}
	// Refused CONNECTs take no token: the next one gets in after a refill.
	eventually(t, waitTimeout, func() error {
		c := dialRaw(t, s.addr, packet.V5)
		if ack := c.connect(v5Connect("later")); ack.ReasonCode != packet.Success {
			c.nc.Close()
			return fmt.Errorf("CONNACK %v", ack.ReasonCode)
		}
		return nil
	})
}

// Options.ServerKeepAlive replaces every v5 client's keep alive, is
// returned in CONNACK and enforced at 1.5 times; v3 clients keep theirs.
func TestServerKeepAliveImposed(t *testing.T) {
	t.Parallel()
	if _, err := broker.New(broker.Options{MaxKeepAlive: 10, ServerKeepAlive: 20}); err == nil {
		t.Fatal("ServerKeepAlive above MaxKeepAlive accepted")
	}
	s := startServer(t, broker.Options{ServerKeepAlive: 1})
	v3, _ := connectRaw(t, s.addr, v3Connect("v3"))
	for _, asked := range []uint16{0, 1, 60} {
		cp := v5Connect(fmt.Sprint("ka-", asked))
		cp.KeepAlive = asked
		_, ack := connectRaw(t, s.addr, cp)
		if !ack.Props.IsSet(packet.PropServerKeepAlive) || ack.Props.ServerKeepAlive != 1 {
			t.Fatalf("keep alive %d: Server Keep Alive set=%v value=%d, want 1", asked,
				ack.Props.IsSet(packet.PropServerKeepAlive), ack.Props.ServerKeepAlive)
		}
	}
	cp := v5Connect("silent")
	cp.KeepAlive = 60
	c, _ := connectRaw(t, s.addr, cp)
	start := time.Now()
	d := c.expectClosed(4 * time.Second)
	if d == nil || d.ReasonCode != packet.KeepAliveTimeout {
		t.Fatalf("DISCONNECT %+v, want 0x8D", d)
	}
	if e := time.Since(start); e < 1200*time.Millisecond {
		t.Fatalf("closed after %v, before 1.5 × the server keep alive", e)
	}
	// The v3 client, as silent as long, still has its 60 s.
	v3.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](v3)
}

// Options.MaxTopicLevels: deeper will topics, PUBLISH topics and filters
// are refused and counted; the $share prefix does not count.
func TestMaxTopicLevels(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	s := startServer(t, broker.Options{MaxTopicLevels: 3, Logger: logs.logger()})

	t.Run("will", func(t *testing.T) {
		cp := v5Connect("deep-will")
		cp.WillFlag, cp.WillTopic, cp.WillPayload = true, "a/b/c/d", []byte("x")
		expectRefused(t, s.addr, cp, packet.TopicNameInvalid)
		cp.ClientID, cp.WillTopic = "ok-will", "a/b/c"
		okc, _ := connectRaw(t, s.addr, cp)
		// A normal DISCONNECT: its will must not reach the subscriber
		// of the publish subtest below.
		defer okc.sendPackets(&packet.Disconnect{})
		if got := s.Stats().TopicLevelsExceeded.Load(); got != 1 {
			t.Fatalf("TopicLevelsExceeded = %d, want 1", got)
		}
		if logs.count("too many levels") != 1 {
			t.Fatalf("no log line for the refused topic:\n%s", logs.b.String())
		}
	})

	t.Run("subscribe", func(t *testing.T) {
		c, _ := connectRaw(t, s.addr, v5Connect("deep-sub"))
		sa := c.subscribe(1, 0, sub("a/b/c/#", 0), sub("a/+/c", 0), sub("$share/g/a/b/c", 0), sub("$share/g/a/b/c/d", 0))
		want := []packet.ReasonCode{packet.TopicFilterInvalid, 0, 0, packet.TopicFilterInvalid}
		if fmt.Sprint(sa.ReasonCodes) != fmt.Sprint(want) {
			t.Fatalf("SUBACK %v, want %v", sa.ReasonCodes, want)
		}
	})

	t.Run("publish", func(t *testing.T) {
		sub3, _ := connectRaw(t, s.addr, v5Connect("sub3"))
		sub3.subscribe(1, 0, sub("#", 0))
		c, _ := connectRaw(t, s.addr, v5Connect("deep-pub"))
		c.sendPackets(rawPublish("a/b/c", 0, 0, "fits"))
		if p := sub3.expectPublish(); string(p.Topic) != "a/b/c" || string(p.Payload) != "fits" {
			t.Fatalf("got %q %q", p.Topic, p.Payload)
		}
		c.sendPackets(rawPublish("a/b/c/d", 0, 0, "too deep"))
		c.expectDisconnect(packet.TopicNameInvalid)
		sub3.expectSilence()
	})
}

// The MessagesInByQoS and MessagesOutByQoS counters split MessagesIn and
// MessagesOut by QoS.
func TestMessagesByQoS(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	sub2, _ := connectRaw(t, s.addr, v5Connect("sub"))
	sub2.subscribe(1, 0, sub("q/#", 2))
	pub, _ := connectRaw(t, s.addr, v5Connect("pub"))
	pub.sendPackets(rawPublish("q/0", 0, 0, "x"))
	pub.sendPackets(rawPublish("q/1", 1, 1, "x"))
	pub.expectAck(packet.PUBACK)
	pub.sendPackets(rawPublish("q/2", 2, 2, "x"))
	pub.expectAck(packet.PUBREC)
	for range 3 {
		sub2.expectPublish()
	}
	st := s.Stats()
	for q := range 3 {
		if got := st.MessagesOutByQoS[q].Load(); got != 1 {
			t.Errorf("MessagesOutByQoS[%d] = %d, want 1", q, got)
		}
	}
	if st.MessagesOut.Load() != 3 {
		t.Errorf("MessagesOut = %d, want 3", st.MessagesOut.Load())
	}
	t.Run("in", func(t *testing.T) {
		for q := range 3 {
			if got := st.MessagesInByQoS[q].Load(); got != 1 {
				t.Errorf("MessagesInByQoS[%d] = %d, want 1", q, got)
			}
		}
	})
}

// smallBuffers makes the kernel buffers of accepted connections small, so
// that a client that does not read blocks the broker's writes after a few
// kilobytes rather than megabytes. The connections stay *net.TCPConn.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// stalledSubscriber connects a raw v5 client with a small receive buffer,
// subscribes it to filter at QoS 0 and never reads from it again.
func stalledSubscriber(t *testing.T, addr, id, filter string) *rawClient {
	t.Helper()
	c := dialRaw(t, addr, packet.V5)
	c.nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	if ack := c.connect(v5Connect(id)); ack.ReasonCode != packet.Success {
		t.Fatalf("connect %s: %v", id, ack.ReasonCode)
	}
	c.subscribe(1, 0, sub(filter, 0))
	return c
}

// countReceived counts the messages a paho client receives, acknowledging
// them as they come.
func countReceived(t *testing.T, c *v5Client) *atomic.Int64 {
	var n atomic.Int64
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-c.msgs:
				n.Add(1)
			case <-stop:
				return
			}
		}
	}()
	return &n
}

func startSmallBufferServer(t *testing.T, opts broker.Options) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, opts, smallBuffers{l}, anonymousTCP)
}

// fillUntilBlocked publishes 16 KiB at a time on topic, each batch once
// the previous one was written, until the broker's writes stop making
// progress: the socket of the only subscriber, which does not read, is
// full.
func fillUntilBlocked(t *testing.T, s *testServer, topic string) {
	t.Helper()
	payload := bytes.Repeat([]byte("f"), 1024)
	for deadline := time.Now().Add(2 * waitTimeout); time.Now().Before(deadline); {
		before := s.Stats().BytesOut.Load()
		for range 16 {
			s.Deliver(&broker.Message{Topic: topic, Payload: payload})
		}
		written := false
		for wait := time.Now().Add(quietPeriod); !written && time.Now().Before(wait); {
			written = s.Stats().BytesOut.Load() >= before+16*1024
			time.Sleep(2 * time.Millisecond) // polling interval
		}
		if !written {
			return
		}
	}
	t.Fatal("the broker's writes to a client that does not read never blocked")
}

// A client that stopped reading: while its socket takes nothing, the QoS 0
// messages for it beyond MaxOutboundBytes are dropped and counted instead
// of filling its session queue, and a healthy subscriber of the same
// messages receives every one.
func TestSlowConsumerDropsQoS0(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	s := startSmallBufferServer(t, broker.Options{MaxOutboundBytes: 64 << 10, StuckTimeout: 30 * time.Second, Logger: logs.logger()})
	stalledSubscriber(t, s.addr, "stalled", "load/#")
	fillUntilBlocked(t, s, "load/fill")
	if d := s.Stats().SlowConsumerDrops.Load(); d != 0 {
		t.Fatalf("%d messages dropped while the client's socket still took them", d)
	}
	healthy := connectV5(t, s.addr, &paho.Connect{ClientID: "healthy", CleanStart: true, KeepAlive: 30})
	healthy.sub(t, "load/#", 1)
	received := countReceived(t, healthy)

	const n = 3000 // < MaxQueuedMessages: the healthy session's queue never drops
	payload := bytes.Repeat([]byte("x"), 1024)
	for range n {
		// QoS 1 for the healthy subscriber, 0 for the stalled one.
		s.Deliver(&broker.Message{Topic: "load/m", Payload: payload, QoS: 1})
	}
	eventually(t, 2*waitTimeout, func() error {
		if got := received.Load(); got != n {
			return fmt.Errorf("healthy subscriber received %d of %d", got, n)
		}
		return nil
	})
	// The stalled session's queue does not hold the messages until the
	// stuck timeout: its writer, waiting on the socket, takes them and
	// drops what would pass MaxOutboundBytes.
	eventually(t, waitTimeout, func() error {
		if q, _ := s.QueueCounts(); q != 0 {
			return fmt.Errorf("%d messages still queued", q)
		}
		return nil
	})
	st := s.Stats()
	if drops := st.SlowConsumerDrops.Load(); drops < n-100 {
		t.Fatalf("SlowConsumerDrops = %d of %d messages to a client whose socket is full, want all but what fits in 64 KiB", drops, n)
	}
	if st.Dropped.Load() < st.SlowConsumerDrops.Load() {
		t.Fatalf("Dropped %d < SlowConsumerDrops %d", st.Dropped.Load(), st.SlowConsumerDrops.Load())
	}
	if st.SlowConsumerDisconnects.Load() != 0 || st.Connections.Load() != 2 {
		t.Fatalf("stalled client disconnected before StuckTimeout (%d disconnects, %d connections)",
			st.SlowConsumerDisconnects.Load(), st.Connections.Load())
	}
	if n := logs.count("slow consumer: QoS 0 messages dropped"); n != 1 {
		t.Fatalf("%d drop log lines within 10 s, want 1", n)
	}
}

// A client whose socket takes nothing for StuckTimeout is disconnected and
// counted; a client that reads is not.
func TestStuckClientDisconnected(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	s := startSmallBufferServer(t, broker.Options{StuckTimeout: time.Second, Logger: logs.logger()})
	stalledSubscriber(t, s.addr, "stalled", "load/#")
	drainingSubscribers(t, s, 1, "load/#")
	payload := bytes.Repeat([]byte("x"), 1024)
	start := time.Now()
	eventually(t, 4*waitTimeout, func() error {
		for range 64 {
			s.Deliver(&broker.Message{Topic: "load/m", Payload: payload})
		}
		if got := s.Stats().SlowConsumerDisconnects.Load(); got != 1 {
			return fmt.Errorf("SlowConsumerDisconnects = %d, want 1", got)
		}
		return nil
	})
	if e := time.Since(start); e < time.Second {
		t.Fatalf("disconnected after %v, within StuckTimeout", e)
	}
	eventually(t, waitTimeout, func() error {
		if got := s.Stats().Connections.Load(); got != 1 {
			return fmt.Errorf("%d connections, want 1 (the draining subscriber)", got)
		}
		return nil
	})
	if logs.count("slow consumer disconnected") != 1 {
		t.Fatalf("no log line for the stuck client:\n%s", logs.b.String())
	}
}

// A connection that sends no CONNECT within ConnectTimeout is closed and
// counted; one that closes first is not counted.
func TestConnectTimeoutCounted(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{ConnectTimeout: 200 * time.Millisecond})
	c := dialRaw(t, s.addr, packet.V5)
	c.expectClosed(3 * time.Second)
	half := dialRaw(t, s.addr, packet.V5)
	cp := v5Connect("half")
	half.send(cp.Append(nil)[:5])
	half.expectClosed(3 * time.Second)
	quitter := dialRaw(t, s.addr, packet.V5)
	quitter.nc.Close()
	connectRaw(t, s.addr, v5Connect("prompt"))
	eventually(t, waitTimeout, func() error {
		if got := s.Stats().ConnectTimeouts.Load(); got != 2 {
			return fmt.Errorf("ConnectTimeouts = %d, want 2", got)
		}
		return nil
	})
	// The quitter's close is seen at once; it must not be counted later.
	time.Sleep(quietPeriod) // bounded wait: proving absence
	if got := s.Stats().ConnectTimeouts.Load(); got != 2 {
		t.Fatalf("ConnectTimeouts = %d, want 2", got)
	}
}
