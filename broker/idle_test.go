package broker_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// idleConnBudget bounds the Go memory (heap in use plus goroutine stacks)
// an idle MQTT 3.1.1 connection may cost, measured here at about 4.9 KiB:
// the reader goroutine's 2 KiB stack (see idleProbe), its runtime g, the
// conn and its session with their entries in the server's maps, and both
// ends' netFD and poller descriptor (about 0.5 KiB: the client end lives
// in this process too). No writer goroutine, read buffer or writer
// scratch space: any of them brought back (each 2 KiB or more) fails the
// test. The resident size the benchmark measures adds what the allocator
// keeps beyond what is in use (about 5.2 KiB per connection against the
// 10 KB the broker is held to); the kernel's socket buffers are not part
// of it. Before the idle-memory pass a connection cost about 21 KiB here:
// two goroutines with 4 KiB stacks, a 4 KiB bufio.Reader and a 5 KiB
// conn.
const idleConnBudget = 6 << 10

// TestIdleConnectionMemory: thousands of idle clients (MQTT 3.1.1, keep
// alive 60 s, one PINGREQ each) cost the broker little Go memory each.
// GANTRY_IDLE_CONNS sets the number of clients, GANTRY_IDLE_HEAPPROFILE a
// file for a heap profile of them.
func TestIdleConnectionMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates memory: run this test without -race")
	}
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	n := 2000
	if s := os.Getenv("GANTRY_IDLE_CONNS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	srv := startServer(t, broker.Options{})
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	connect := packet.Connect{Version: packet.V311, CleanStart: true, KeepAlive: 60}
	var buf []byte
	var ack [4]byte
	// Warm up: the listener, pools and the runtime's own structures.
	for i := range 50 {
		connect.ClientID = fmt.Sprintf("idle-warm-%d", i)
		conns = append(conns, idleConnect(t, srv.addr, connect.Append(buf[:0]), ack[:]))
	}
	before := settledMem()
	for i := range n {
		connect.ClientID = fmt.Sprintf("idle-%d", i)
		conns = append(conns, idleConnect(t, srv.addr, connect.Append(buf[:0]), ack[:]))
	}
	// A keep-alive exchange on every connection: what it takes (read
	// buffer, writer) must be given back once it is done.
	ping := packet.AppendPingreq(nil)
	for _, nc := range conns[50:] {
		nc.SetDeadline(time.Now().Add(waitTimeout))
		if _, err := nc.Write(ping); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, ack[:2]); err != nil || ack[0] != 0xD0 {
			t.Fatalf("PINGRESP: % x, %v", ack[:2], err)
		}
	}
	eventually(t, waitTimeout, func() error {
		if got := srv.Stats().Connections.Load(); got != int64(len(conns)) {
			return fmt.Errorf("%d connections, want %d", got, len(conns))
		}
		// The writers that sent the PINGRESPs exit.
		if got, want := runtime.NumGoroutine(), before.goroutines+n; got > want {
			return fmt.Errorf("%d goroutines, want at most %d (one per connection)", got, want)
		}
		return nil
	})
	after := settledMem()
	perConn := func(after, before uint64) float64 { return float64(int64(after)-int64(before)) / float64(n) }
	heap := perConn(after.HeapInuse, before.HeapInuse)
	stack := perConn(after.StackInuse, before.StackInuse)
	goroutines := float64(after.goroutines-before.goroutines) / float64(n)
	allocated := perConn(after.TotalAlloc, before.TotalAlloc)
	t.Logf("%d idle connections: %.0f B heap + %.0f B stack = %.2f KiB each, %.2f goroutines each (%.0f B allocated each)",
		n, heap, stack, (heap+stack)/1024, goroutines, allocated)
	if path := os.Getenv("GANTRY_IDLE_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	if heap+stack > idleConnBudget {
		t.Fatalf("an idle connection costs %.0f B of heap and stack, over the budget of %d B", heap+stack, idleConnBudget)
	}
	runtime.KeepAlive(conns)
}

// idleConnect dials, sends the encoded CONNECT and reads the CONNACK,
// without a reader of its own: the client end costs only its socket.
func idleConnect(t *testing.T, addr string, connect, ack []byte) net.Conn {
	t.Helper()
	nc := dial(t, addr)
	nc.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := nc.Write(connect); err != nil {
		nc.Close()
		t.Fatal(err)
	}
	if _, err := io.ReadFull(nc, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		nc.Close()
		t.Fatalf("CONNACK: % x, %v", ack, err)
	}
	nc.SetDeadline(time.Time{})
	return nc
}

type memSample struct {
	runtime.MemStats
	goroutines int
}

// settledMem returns the memory statistics after a collection.
func settledMem() memSample {
	runtime.GC()
	runtime.GC()
	var m memSample
	runtime.ReadMemStats(&m.MemStats)
	m.goroutines = runtime.NumGoroutine()
	return m
}

// TestWriterWakeupsNotLost: the writer goroutine exits whenever it has
// sent everything, so every delivery must either be seen by the running
// writer or start a new one. Bursts from two goroutines hit the moment
// the writer decides to exit; a lost wake-up leaves messages unsent, as
// nothing else wakes the writer before the check.
func TestWriterWakeupsNotLost(t *testing.T) {
	t.Parallel()
	srv := startServer(t, broker.Options{MaxQueuedMessages: 1 << 16})
	c, _ := connectRaw(t, srv.addr, packet.Connect{Version: packet.V311, CleanStart: true, ClientID: "wake-sub", KeepAlive: 60})
	c.subscribe(1, 0, sub("wake/#", 0))
	m := &broker.Message{Topic: "wake/x", Payload: []byte("12345678")}
	size := (&packet.Publish{Topic: []byte(m.Topic), Payload: m.Payload}).Size(packet.V311)
	got := make([]byte, 8*size)
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	for round := range rounds {
		n := 1 + round%4 // messages from each of two goroutines
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range n {
				srv.Deliver(m)
			}
		}()
		for range n {
			srv.Deliver(m)
		}
		<-done
		c.nc.SetReadDeadline(time.Now().Add(waitTimeout))
		if _, err := io.ReadFull(c.br, got[:2*n*size]); err != nil {
			t.Fatalf("round %d: %d messages not received: %v", round, 2*n, err)
		}
	}
}

// TestReadBufferSplits: packets that arrive cut anywhere, small ones and
// ones larger than a read buffer, are read whole and in order.
func TestReadBufferSplits(t *testing.T) {
	t.Parallel()
	srv := startServer(t, broker.Options{})
	msgs := make(chan *broker.Message, 100)
	ic := srv.NewClient("split-sub", broker.OriginConnector, func(m *broker.Message) { msgs <- m })
	t.Cleanup(ic.Close)
	if err := ic.Subscribe("split/#", 0); err != nil {
		t.Fatal(err)
	}
	pub, _ := connectRaw(t, srv.addr, v5Connect("split-pub"))
	sizes := []int{0, 1, 5, 100, 4000, 4096, 5000, 70000, 3, 9000, 0}
	var stream []byte
	for i, n := range sizes {
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(i + j)
		}
		stream = (&packet.Publish{Topic: []byte(fmt.Sprintf("split/%d", i)), Payload: payload}).Append(stream, packet.V5)
		stream = packet.AppendPingreq(stream)
	}
	// Cut the stream in pieces of 1, 2, 3, ... 17 bytes, then larger ones.
	for off, cut := 0, 1; off < len(stream); cut++ {
		n := min(cut%18+cut/18*997, len(stream)-off)
		pub.send(stream[off : off+n])
		off += n
		time.Sleep(time.Millisecond) // let the reader see the piece alone
	}
	for i, n := range sizes {
		m := recv(t, msgs, fmt.Sprintf("message %d", i))
		if m.Topic != fmt.Sprintf("split/%d", i) || len(m.Payload) != n {
			t.Fatalf("message %d: %s with %d bytes, want split/%d with %d", i, m.Topic, len(m.Payload), i, n)
		}
		for j, b := range m.Payload {
			if b != byte(i+j) {
				t.Fatalf("message %d: byte %d is %d, want %d", i, j, b, byte(i+j))
			}
		}
	}
	for range sizes {
		expectPacket[packet.Pingresp](pub)
	}
}

// idleProbeWait outlasts the broker's idle probe (2 s): a reader idle for
// that long has handed the wait for the next packet to a new goroutine.
const idleProbeWait = 2500 * time.Millisecond

// TestIdleReaderHandOff: a connection idle past the idle probe, whose
// reader goroutine has been replaced, still gets its messages, answers
// pings, takes publishes, keeps its keep-alive deadline and can be taken
// over.
func TestIdleReaderHandOff(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("handoff-ka")
	cp.KeepAlive = 2 // deadline 3 s after the last packet: past the probe
	ka, _ := connectRaw(t, s.addr, cp)
	ka.subscribe(1, 0, sub("handoff/a", 1))
	zero, _ := connectRaw(t, s.addr, v5Connect("handoff-zero")) // keep alive 0
	zero.subscribe(1, 0, sub("handoff/#", 0))

	time.Sleep(idleProbeWait) // idle, the point of the test
	s.Deliver(&broker.Message{Topic: "handoff/a", Payload: []byte("a")})
	if p := ka.expectPublish(); string(p.Payload) != "a" {
		t.Fatalf("payload %q", p.Payload)
	}
	ka.sendPackets(&packet.Ack{Type: packet.PUBACK, PacketID: 1})
	if p := zero.expectPublish(); string(p.Payload) != "a" {
		t.Fatalf("payload %q", p.Payload)
	}
	ka.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](ka)
	ka.sendPackets(rawPublish("handoff/b", 1, 7, "b"))
	if a := ka.expectAck(packet.PUBACK); a.PacketID != 7 {
		t.Fatalf("PUBACK %d, want 7", a.PacketID)
	}
	last := time.Now()
	if p := zero.expectPublish(); string(p.Payload) != "b" {
		t.Fatalf("payload %q", p.Payload)
	}

	// The keep-alive deadline holds across the hand-off: closed 1.5 keep
	// alives after the last packet.
	d := ka.expectClosed(5 * time.Second)
	if e := time.Since(last); e < 2900*time.Millisecond || e > 4500*time.Millisecond {
		t.Fatalf("closed %v after the last packet, want about 3 s", e)
	}
	if d == nil || d.ReasonCode != packet.KeepAliveTimeout {
		t.Fatalf("DISCONNECT %+v, want 0x8D", d)
	}

	// Keep alive 0: still open however long it idles, and taken over.
	zero.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](zero)
	connectRaw(t, s.addr, v5Connect("handoff-zero"))
	zero.expectDisconnect(packet.SessionTakenOver)
}
