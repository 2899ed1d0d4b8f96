package broker_test

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/broker/packet/packettest"

	"github.com/eclipse/paho.golang/paho"
)

// truncated reports whether wire ends inside its packet (the header or
// the body is incomplete), so that the broker waits for more bytes.
func truncated(wire []byte) bool {
	h, n, err := packet.DecodeFixedHeader(wire)
	if errors.Is(err, packet.ErrShort) {
		return true
	}
	return err == nil && len(wire)-n < h.Remaining
}

// decodedByBroker reports whether the broker decodes packets of type t
// from a client, so that the fixture's reason code is the one it must
// send; for the other types (server-to-client packets, a second CONNECT,
// AUTH without an authentication method) the packet is a protocol error
// whatever its content, and a malformed header may be reported first.
func decodedByBroker(t packet.Type) bool {
	switch t {
	case packet.PUBLISH, packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP,
		packet.SUBSCRIBE, packet.UNSUBSCRIBE, packet.PINGREQ, packet.DISCONNECT:
		return true
	}
	return false
}

// readUntilClosed reads packets until the server closes the connection
// (or within fails the test), and returns them.
func readUntilClosed(t *testing.T, c *rawClient, within time.Duration) []any {
	t.Helper()
	deadline := time.Now().Add(within)
	var got []any
	for {
		p, err := c.read(time.Until(deadline))
		if err == nil {
			got = append(got, p)
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v (received %+v)", within, got)
		}
		return got
	}
}

// Every malformed fixture of packettest: CONNECT-level ones as the first
// packet, the others after a valid CONNECT in the fixture's version. The
// broker closes the connection; a v5 client gets the fixture's reason
// code in CONNACK or DISCONNECT; input that stops inside a packet is
// closed by the keep alive. The broker keeps serving.
func TestMalformedFixtures(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	n := 0
	for _, f := range packettest.Fixtures {
		if f.Valid() {
			continue
		}
		n++
		typ := packet.Type(f.Wire[0] >> 4)
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			readAs := f.Version
			if typ == packet.CONNECT && f.Err == packet.UnsupportedProtocolVersion {
				readAs = packet.V311 // the CONNACK every version can read
			}
			c := dialRaw(t, s.addr, readAs)
			if typ != packet.CONNECT {
				v := f.Version
				if v == packet.V31 {
					v = packet.V311
				}
				c.connect(packet.Connect{Version: v, CleanStart: true, KeepAlive: 1, ClientID: "mal-" + f.Name})
			}
			c.send(f.Wire)
			got := readUntilClosed(t, c, 4*time.Second)
			if typ == packet.CONNECT {
				checkConnectRefusal(t, f, got)
				return
			}
			if len(got) > 0 {
				if _, ok := got[0].(packet.Pingresp); ok && f.Name == "header/body-longer-than-remaining-length" {
					got = got[1:] // the PINGREQ before the stray byte is valid
				}
			}
			var want []packet.ReasonCode
			switch {
			case f.Version != packet.V5:
				want = nil // v3: closed without a word
			case truncated(f.Wire):
				want = []packet.ReasonCode{packet.KeepAliveTimeout}
			case decodedByBroker(typ):
				want = []packet.ReasonCode{f.Err}
			default:
				want = []packet.ReasonCode{packet.MalformedPacket, packet.ProtocolError}
			}
			switch {
			case want == nil && len(got) != 0:
				t.Fatalf("v3 connection got %+v before the close", got)
			case want == nil:
			case len(got) != 1:
				t.Fatalf("got %+v, want one DISCONNECT %v", got, want)
			default:
				d, ok := got[0].(*packet.Disconnect)
				if !ok || !slices.Contains(want, d.ReasonCode) {
					t.Fatalf("got %+v, want DISCONNECT %v", got[0], want)
				}
			}
		})
	}
	if n < 50 {
		t.Fatalf("only %d malformed fixtures", n)
	}
	t.Cleanup(func() {
		// Registered after the subtests' cleanups run: the broker is alive.
		if s.Stats().MalformedPackets.Load() == 0 {
			t.Error("Stats().MalformedPackets not counted")
		}
		c, _ := connectRaw(t, s.addr, v5Connect("after-malformed"))
		c.sendPackets(packet.Pingreq{})
		expectPacket[packet.Pingresp](c)
		c.nc.Close()
	})
}

// checkConnectRefusal checks the answer to a malformed CONNECT: return
// code 1 for an unsupported protocol, the fixture's code for a v5
// CONNECT, nothing for other v3 CONNECTs.
func checkConnectRefusal(t *testing.T, f packettest.Fixture, got []any) {
	t.Helper()
	var want packet.ReasonCode
	switch {
	case f.Err == packet.UnsupportedProtocolVersion:
		want = f.Err
	case f.Version == packet.V5 && f.Wire[0] == 0x10:
		want = f.Err
	}
	if want == 0 {
		if len(got) != 0 {
			t.Fatalf("got %+v, want the connection closed without CONNACK", got)
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("got %+v, want one CONNACK %v", got, want)
	}
	if ack, ok := got[0].(*packet.Connack); !ok || ack.ReasonCode != want || ack.SessionPresent {
		t.Fatalf("got %+v, want CONNACK %v", got[0], want)
	}
}

// A claimed Remaining Length above Options.MaxPacketSize is refused at
// once with 0x95, before any body arrives.
func TestClaimedHugePacketRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	c, _ := connectRaw(t, s.addr, v5Connect("huge"))
	c.send([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}) // PUBLISH of 268,435,455 bytes
	c.expectDisconnect(packet.PacketTooLarge)
}

// With MaxPacketSize at its maximum, a client claiming a 256 MB packet (268,435,450 bytes + 5 header bytes: at the limit)
// and sending a few bytes of it does not make the broker allocate 256 MB,
// and the keep alive still closes the connection. Not parallel: it
// measures the process's allocations.
func TestClaimedHugePacketDoesNotAllocate(t *testing.T) {
	s := startServer(t, broker.Options{MaxPacketSize: packet.MaxRemainingLength})
	cp := v5Connect("huge-slow")
	cp.KeepAlive = 1
	c, _ := connectRaw(t, s.addr, cp)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c.send(append([]byte{0x30, 0xFA, 0xFF, 0xFF, 0x7F, 0, 1, 'a'}, make([]byte, 1000)...))
	start := time.Now()
	if d := c.expectClosed(5 * time.Second); d == nil || d.ReasonCode != packet.KeepAliveTimeout {
		t.Fatalf("DISCONNECT %+v, want 0x8D", d)
	}
	if e := time.Since(start); e > 4*time.Second {
		t.Fatalf("closed after %v, want about 1.5 s", e)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("the broker allocated %d MB for a packet that never came", grew>>20)
	}

	// Large packets that do arrive are still read whole.
	w := watch(t, s, "huge-watch", "huge/#")
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "huge-pub", CleanStart: true, KeepAlive: 30})
	big := bytes.Repeat([]byte("abcdefgh"), 40000) // 320 KB: the buffer grows several times
	for i := range 2 {
		big[i] = 'X'
		pub.pub(t, &paho.Publish{Topic: "huge/t", QoS: 1, Payload: big})
		if m := recv(t, w.msgs, "large message"); !bytes.Equal(m.Payload, big) {
			t.Fatalf("large message %d corrupted (%d bytes)", i, len(m.Payload))
		}
	}
}
