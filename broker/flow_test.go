package broker_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// A packet larger than Options.MaxPacketSize closes the connection, with
// DISCONNECT 0x95 for a v5 client; the limit is advertised in CONNACK.
func TestMaxPacketSizeInbound(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxPacketSize: 1024})
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c, ack := connectRaw(t, s.addr, packet.Connect{Version: v, CleanStart: true, KeepAlive: 30, ClientID: "big-in"})
			if v == packet.V5 && (!ack.Props.IsSet(packet.PropMaximumPacketSize) || ack.Props.MaximumPacketSize != 1024) {
				t.Fatalf("CONNACK Maximum Packet Size %d", ack.Props.MaximumPacketSize)
			}
			// Exactly at the limit is fine.
			p := rawPublish("big/in", 1, 1, "")
			p.Payload = make([]byte, 1024-p.Size(v))
			for p.Size(v) > 1024 { // the Remaining Length may have grown a byte
				p.Payload = p.Payload[1:]
			}
			c.sendPackets(p)
			c.expectAck(packet.PUBACK)
			p.Payload = append(p.Payload, 0)
			c.sendPackets(p)
			d := c.expectClosed(waitTimeout)
			switch {
			case v == packet.V5 && (d == nil || d.ReasonCode != packet.PacketTooLarge):
				t.Fatalf("DISCONNECT %+v, want 0x95", d)
			case v != packet.V5 && d != nil:
				t.Fatalf("v3 client got DISCONNECT %+v", d)
			}
		})
	}
}

// A message larger than a client's Maximum Packet Size is not sent to
// that client (and does not hold one of its Receive Maximum slots),
// while a client without a limit receives it.
func TestMaxPacketSizeOutbound(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("small")
	cp.Props.MaximumPacketSize = 200
	cp.Props.ReceiveMaximum = 1
	cp.Props.Set(packet.PropMaximumPacketSize)
	cp.Props.Set(packet.PropReceiveMaximum)
	small, _ := connectRaw(t, s.addr, cp)
	small.subscribe(1, 0, sub("mps/#", 1))
	unlimited := connectV5(t, s.addr, &paho.Connect{ClientID: "unlimited", CleanStart: true, KeepAlive: 30})
	unlimited.sub(t, "mps/#", 1)

	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "mps-pub", CleanStart: true, KeepAlive: 30})
	dropped := s.Stats().Dropped.Load()
	big := strings.Repeat("B", 500)
	pub.pub(t, &paho.Publish{Topic: "mps/big", QoS: 1, Payload: []byte(big)})
	pub.pub(t, &paho.Publish{Topic: "mps/small", QoS: 1, Payload: []byte("s")})
	pub.pub(t, &paho.Publish{Topic: "mps/big0", QoS: 0, Payload: []byte(big)})
	pub.pub(t, &paho.Publish{Topic: "mps/small2", QoS: 0, Payload: []byte("s2")})

	for _, want := range []string{"mps/big", "mps/small", "mps/big0", "mps/small2"} {
		if m := recv(t, unlimited.msgs, want); m.Topic != want {
			t.Fatalf("unlimited client got %s, want %s", m.Topic, want)
		}
	}
	m := small.expectPublish()
	if string(m.Topic) != "mps/small" {
		t.Fatalf("limited client got %s (%d bytes), want mps/small", m.Topic, len(m.Payload))
	}
	small.sendPackets(ack(packet.PUBACK, m.PacketID))
	if m := small.expectPublish(); string(m.Topic) != "mps/small2" {
		t.Fatalf("limited client got %s, want mps/small2", m.Topic)
	}
	small.expectSilence()
	if got := s.Stats().Dropped.Load() - dropped; got != 2 {
		t.Fatalf("Stats().Dropped grew by %d, want 2", got)
	}
}

// The broker never has more QoS 1 messages unacknowledged towards a
// client than the client's Receive Maximum (or Options.MaxInflight when
// lower); the others wait and follow, in order, as acks come back.
func TestReceiveMaximumOutbound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		clientMax   uint16
		maxInflight uint16
		window      int
	}{
		{"client receive maximum 3", 3, 0, 3},
		{"server max inflight 2", 100, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, broker.Options{MaxInflight: tc.maxInflight})
			cp := v5Connect("rm-out")
			cp.Props.ReceiveMaximum = tc.clientMax
			cp.Props.Set(packet.PropReceiveMaximum)
			c, _ := connectRaw(t, s.addr, cp)
			c.subscribe(1, 0, sub("rm/#", 1))
			pub := connectV5(t, s.addr, &paho.Connect{ClientID: "rm-pub", CleanStart: true, KeepAlive: 30})
			const n = 10
			for i := range n {
				pub.pub(t, &paho.Publish{Topic: fmt.Sprintf("rm/%d", i), QoS: 1, Payload: []byte("x")})
			}
			var unacked []uint16
			next := 0
			receive := func(k int) {
				t.Helper()
				for range k {
					m := c.expectPublish()
					if len(unacked) >= tc.window {
						t.Fatalf("message %d arrived with %d unacknowledged", next, len(unacked))
					}
					if want := fmt.Sprintf("rm/%d", next); string(m.Topic) != want {
						t.Fatalf("got %s, want %s", m.Topic, want)
					}
					unacked = append(unacked, m.PacketID)
					next++
				}
			}
			receive(tc.window)
			c.expectSilence() // the window is full: the rest waits
			c.sendPackets(ack(packet.PUBACK, unacked[0]))
			unacked = unacked[1:]
			receive(1)
			c.expectSilence()
			for next < n {
				c.sendPackets(ack(packet.PUBACK, unacked[0]))
				unacked = unacked[1:]
				receive(1)
			}
		})
	}
}

// A client with more QoS 2 (or deferred QoS 1) publishes unacknowledged
// than the broker's Receive Maximum is disconnected with 0x93.
func TestReceiveMaximumInboundExceeded(t *testing.T) {
	t.Parallel()
	never := hookFunc(func(m *broker.Message, r broker.Resolver) error {
		if strings.HasPrefix(m.Topic, "hold/") {
			return broker.ErrDeferred // never resolved
		}
		return nil
	})
	s := startServer(t, broker.Options{ReceiveMaximum: 2}, func(s *broker.Server) { s.AddPublishHook(never) })
	for _, tc := range []struct {
		name  string
		topic string
		qos   byte
		ack   packet.Type // per admitted publish; 0: none
	}{
		{"QoS 2 without PUBREL", "rmin/2", 2, packet.PUBREC},
		{"QoS 1 held by a hook", "hold/1", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ack := connectRaw(t, s.addr, v5Connect("rm-in"))
			if ack.Props.ReceiveMaximum != 2 {
				t.Fatalf("CONNACK Receive Maximum %d, want 2", ack.Props.ReceiveMaximum)
			}
			c.sendPackets(rawPublish(tc.topic, tc.qos, 1, "a"), rawPublish(tc.topic, tc.qos, 2, "b"))
			if tc.ack != 0 {
				c.expectAck(tc.ack)
				c.expectAck(tc.ack)
			} else {
				c.expectSilence()
			}
			c.sendPackets(rawPublish(tc.topic, tc.qos, 3, "c"))
			c.expectDisconnect(packet.ReceiveMaximumExceeded)
		})
	}
}

// With MaxQueuedMessages 5, ten QoS 1 messages for an offline session
// leave the newest five, and the five others are counted as dropped.
func TestOfflineQueueBounded(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxQueuedMessages: 5})
	cp := &paho.Connect{ClientID: "oq", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(60)}}
	c := connectV5(t, s.addr, cp)
	c.sub(t, "oq/t", 1)
	c.close()
	// Only an offline session drops: wait until the close has detached it
	// (a connected one keeps the messages and pauses the publisher).
	eventually(t, waitTimeout, func() error {
		if n := s.Stats().Connections.Load(); n != 0 {
			return fmt.Errorf("%d connections, want 0", n)
		}
		return nil
	})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "oq-pub", CleanStart: true, KeepAlive: 30})
	for i := range 10 {
		pub.pub(t, &paho.Publish{Topic: "oq/t", QoS: 1, Payload: fmt.Appendf(nil, "m%d", i)})
	}
	if d := s.Stats().Dropped.Load(); d != 5 {
		t.Fatalf("Stats().Dropped = %d, want 5", d)
	}
	cp.CleanStart = false
	c = connectV5(t, s.addr, cp)
	for i := 5; i < 10; i++ {
		if m := recv(t, c.msgs, "queued message"); string(m.Payload) != fmt.Sprintf("m%d", i) {
			t.Fatalf("got %s, want m%d", m.Payload, i)
		}
	}
	noRecv(t, c.msgs, "a dropped message")
}

type hookFunc func(m *broker.Message, r broker.Resolver) error

func (f hookFunc) InterceptPublish(m *broker.Message, r broker.Resolver) error { return f(m, r) }

// A hook defers the first QoS 1 message and lets the second pass: the
// connection keeps reading (the second publish reaches the hook while
// the first is unresolved), and the PUBACKs and deliveries still follow
// arrival order once the first is resolved - from the test goroutine, or
// from inside the hook call for the second message.
func TestPublishHookDeferredKeepsOrder(t *testing.T) {
	t.Parallel()
	for _, fromHook := range []bool{false, true} {
		t.Run(fmt.Sprintf("resolved from hook %v", fromHook), func(t *testing.T) {
			t.Parallel()
			var (
				mu       sync.Mutex
				held     broker.Resolver
				calls    []string
				resolved = make(chan struct{})
				second   = make(chan struct{})
			)
			hook := hookFunc(func(m *broker.Message, r broker.Resolver) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, m.Topic)
				switch m.Topic {
				case "defer/first":
					held = r
					return broker.ErrDeferred
				case "defer/second":
					select {
					case <-resolved:
						t.Error("second publish reached the hook after the first was resolved")
					default:
					}
					if fromHook {
						held.Resolve(nil)
						close(resolved)
					}
					close(second)
				}
				return nil
			})
			s := startServer(t, broker.Options{}, func(s *broker.Server) { s.AddPublishHook(hook) })
			subr := connectV5(t, s.addr, &paho.Connect{ClientID: "defer-sub", CleanStart: true, KeepAlive: 30})
			subr.sub(t, "defer/#", 1)
			c, _ := connectRaw(t, s.addr, v5Connect("defer-pub"))
			c.sendPackets(rawPublish("defer/first", 1, 1, "1"), rawPublish("defer/second", 1, 2, "2"))
			recv(t, second, "the second publish at the hook")
			if !fromHook {
				c.expectSilence() // no PUBACK for the second before the first
				noRecv(t, subr.msgs, "a delivery before the first is resolved")
				mu.Lock()
				held.Resolve(nil)
				close(resolved)
				mu.Unlock()
			}
			for _, pid := range []uint16{1, 2} {
				if a := c.expectAck(packet.PUBACK); a.PacketID != pid || a.ReasonCode != packet.Success {
					t.Fatalf("PUBACK %d (%v), want %d", a.PacketID, a.ReasonCode, pid)
				}
			}
			for _, want := range []string{"defer/first", "defer/second"} {
				if m := recv(t, subr.msgs, want); m.Topic != want {
					t.Fatalf("delivered %s, want %s", m.Topic, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 2 {
				t.Fatalf("hook calls %v", calls)
			}
		})
	}
}

// A hook refusing with QuotaExceeded: the v5 publisher gets PUBACK 0x97
// and stays connected; the v3.1.1 publisher, which has no way to learn
// of a refusal, is disconnected without PUBACK.
func TestPublishHookRefusalV5PubackV311Closes(t *testing.T) {
	t.Parallel()
	refuse := hookFunc(func(m *broker.Message, r broker.Resolver) error {
		if strings.HasPrefix(m.Topic, "quota/") {
			return packet.QuotaExceeded
		}
		return nil
	})
	s := startServer(t, broker.Options{}, func(s *broker.Server) { s.AddPublishHook(refuse) })
	subr := connectV5(t, s.addr, &paho.Connect{ClientID: "quota-sub", CleanStart: true, KeepAlive: 30})
	subr.sub(t, "#", 1)

	c5, _ := connectRaw(t, s.addr, v5Connect("quota5"))
	c5.sendPackets(rawPublish("quota/a", 1, 1, "x"))
	if a := c5.expectAck(packet.PUBACK); a.ReasonCode != packet.QuotaExceeded {
		t.Fatalf("v5 PUBACK %v, want 0x97", a.ReasonCode)
	}
	c5.sendPackets(rawPublish("fine/a", 1, 2, "y"))
	if a := c5.expectAck(packet.PUBACK); a.ReasonCode != packet.Success {
		t.Fatalf("v5 PUBACK %v after a refusal", a.ReasonCode)
	}
	if m := recv(t, subr.msgs, "accepted message"); m.Topic != "fine/a" {
		t.Fatalf("delivered %s", m.Topic)
	}

	c3, _ := connectRaw(t, s.addr, packet.Connect{Version: packet.V311, CleanStart: true, KeepAlive: 30, ClientID: "quota3"})
	c3.sendPackets(rawPublish("quota/b", 1, 1, "x"))
	c3.expectClosed(waitTimeout) // fails on a PUBACK
	noRecv(t, subr.msgs, "refused message")
}
