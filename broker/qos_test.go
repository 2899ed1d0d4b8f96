package broker_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// Every publish QoS against every subscription QoS, both directions
// between a v5 and a v3.1.1 client: the message arrives once, at
// min(publish QoS, subscription QoS).
func TestQoSBetweenV5AndV311Clients(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	c5 := connectV5(t, s.addr, &paho.Connect{ClientID: "qos-v5", CleanStart: true, KeepAlive: 30})
	c3 := connectV3(t, s.addr, "qos-v3")
	for pq := byte(0); pq <= 2; pq++ {
		for sq := byte(0); sq <= 2; sq++ {
			want := min(pq, sq)
			t.Run(fmt.Sprintf("v5 pub %d to v3 sub %d", pq, sq), func(t *testing.T) {
				tp := fmt.Sprintf("q53/%d/%d", pq, sq)
				c3.sub(t, tp, sq)
				c5.pub(t, &paho.Publish{Topic: tp, QoS: pq, Payload: []byte(tp)})
				m := recv(t, c3.msgs, "message at the v3 client")
				if m.Topic() != tp || string(m.Payload()) != tp || m.Qos() != want {
					t.Fatalf("got %s %q QoS %d, want QoS %d", m.Topic(), m.Payload(), m.Qos(), want)
				}
				noRecv(t, c3.msgs, "second copy")
			})
			t.Run(fmt.Sprintf("v3 pub %d to v5 sub %d", pq, sq), func(t *testing.T) {
				tp := fmt.Sprintf("q35/%d/%d", pq, sq)
				c5.sub(t, tp, sq)
				c3.pub(t, tp, pq, false, tp)
				m := recv(t, c5.msgs, "message at the v5 client")
				if m.Topic != tp || string(m.Payload) != tp || m.QoS != want {
					t.Fatalf("got %s %q QoS %d, want QoS %d", m.Topic, m.Payload, m.QoS, want)
				}
				noRecv(t, c5.msgs, "second copy")
			})
		}
	}
}

// The same QoS 2 PUBLISH sent twice before PUBREL is one message; once
// PUBREL/PUBCOMP released the identifier, its reuse is a new message.
func TestInboundQoS2ExactlyOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	subr := connectV5(t, s.addr, &paho.Connect{ClientID: "eo-sub", CleanStart: true, KeepAlive: 30})
	subr.sub(t, "eo/t", 2)
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c, _ := connectRaw(t, s.addr, packet.Connect{Version: v, CleanStart: true, KeepAlive: 30, ClientID: "eo-pub"})
			first := rawPublish("eo/t", 2, 7, "first")
			c.sendPackets(first)
			c.expectAck(packet.PUBREC)
			dup := rawPublish("eo/t", 2, 7, "first")
			dup.Dup = true
			c.sendPackets(dup, dup)
			if a := c.expectAck(packet.PUBREC); a.PacketID != 7 || a.ReasonCode != packet.Success {
				t.Fatalf("PUBREC for the duplicate: %+v", a)
			}
			c.expectAck(packet.PUBREC)
			if m := recv(t, subr.msgs, "the message"); string(m.Payload) != "first" {
				t.Fatalf("payload %q", m.Payload)
			}
			noRecv(t, subr.msgs, "duplicate delivery")
			c.sendPackets(ack(packet.PUBREL, 7))
			if a := c.expectAck(packet.PUBCOMP); a.PacketID != 7 || a.ReasonCode != packet.Success {
				t.Fatalf("PUBCOMP %+v", a)
			}
			c.sendPackets(rawPublish("eo/t", 2, 7, "second"))
			c.expectAck(packet.PUBREC)
			if m := recv(t, subr.msgs, "the reused identifier's message"); string(m.Payload) != "second" {
				t.Fatalf("payload %q", m.Payload)
			}
			c.sendPackets(ack(packet.PUBREL, 7))
			c.expectAck(packet.PUBCOMP)
		})
	}
}

// Messages in flight when a persistent session's connection drops are
// sent again on reconnect, in their original order, with their original
// packet identifiers: PUBLISH with DUP=1, or PUBREL for a QoS 2 message
// whose PUBREC the client had sent.
func TestOutboundInflightRedelivery(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("redeliver")
	cp.Props.SessionExpiry = 60
	cp.Props.Set(packet.PropSessionExpiry)
	c, _ := connectRaw(t, s.addr, cp)
	c.subscribe(1, 0, sub("rd/#", 2))

	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "rd-pub", CleanStart: true, KeepAlive: 30})
	plan := []struct {
		topic string
		qos   byte
	}{{"rd/1", 1}, {"rd/2", 2}, {"rd/3", 1}, {"rd/4", 2}, {"rd/5", 2}}
	for _, p := range plan {
		pub.pub(t, &paho.Publish{Topic: p.topic, QoS: p.qos, Payload: []byte(p.topic)})
	}
	ids := make([]uint16, len(plan))
	for i, p := range plan {
		m := c.expectPublish()
		if string(m.Topic) != p.topic || m.QoS != p.qos || m.Dup {
			t.Fatalf("first delivery %d: %s QoS %d dup %v", i, m.Topic, m.QoS, m.Dup)
		}
		ids[i] = m.PacketID
	}
	// Acknowledge nothing but the PUBREC of rd/2; read the PUBREL.
	c.sendPackets(ack(packet.PUBREC, ids[1]))
	if a := c.expectAck(packet.PUBREL); a.PacketID != ids[1] {
		t.Fatalf("PUBREL %d, want %d", a.PacketID, ids[1])
	}
	c.nc.Close()

	cp.CleanStart = false
	for round := range 2 { // twice: redelivered messages are redelivered again
		c, ack1 := connectRaw(t, s.addr, cp)
		if !ack1.SessionPresent {
			t.Fatal("session not present")
		}
		for i, p := range plan {
			if i == 1 {
				a := c.expectAck(packet.PUBREL)
				if a.PacketID != ids[i] {
					t.Fatalf("round %d: PUBREL %d, want %d", round, a.PacketID, ids[i])
				}
				continue
			}
			m := c.expectPublish()
			if string(m.Topic) != p.topic || m.QoS != p.qos || !m.Dup || m.PacketID != ids[i] {
				t.Fatalf("round %d redelivery %d: %s QoS %d dup %v id %d, want %s QoS %d dup id %d",
					round, i, m.Topic, m.QoS, m.Dup, m.PacketID, p.topic, p.qos, ids[i])
			}
		}
		if round == 0 {
			c.nc.Close()
			continue
		}
		// Complete everything; nothing more is resent.
		c.sendPackets(ack(packet.PUBACK, ids[0]), ack(packet.PUBCOMP, ids[1]), ack(packet.PUBACK, ids[2]),
			ack(packet.PUBREC, ids[3]), ack(packet.PUBREC, ids[4]))
		c.expectAck(packet.PUBREL)
		c.expectAck(packet.PUBREL)
		c.sendPackets(ack(packet.PUBCOMP, ids[3]), ack(packet.PUBCOMP, ids[4]))
		c.sendPackets(&packet.Disconnect{})
		c.expectClosed(waitTimeout)
	}
	c, _ = connectRaw(t, s.addr, cp)
	c.expectSilence()
}

// deferAll defers every QoS 1/2 publish and resolves them from other
// goroutines in a random order.
type deferAll struct {
	mu      sync.Mutex
	pending []broker.Resolver
	batch   int
	wg      sync.WaitGroup
}

func (h *deferAll) InterceptPublish(m *broker.Message, r broker.Resolver) error {
	if m.QoS == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, r)
	if len(h.pending) == h.batch {
		batch := h.pending
		h.pending = nil
		rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, r := range batch {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				r.Resolve(nil)
			}()
		}
	}
	return broker.ErrDeferred
}

// A client pipelining publishes gets the acknowledgements in the order
// it sent the publishes, also when hooks complete them out of order.
func TestAcksInArrivalOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hook  *deferAll
		mixed bool // alternate QoS 1 and 2
	}{
		{"no hooks QoS 1", nil, false},
		{"no hooks QoS 1 and 2", nil, true},
		{"deferred and resolved in random order", &deferAll{batch: 10}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, broker.Options{}, func(s *broker.Server) {
				if tc.hook != nil {
					s.AddPublishHook(tc.hook)
				}
			})
			subr, _ := connectRaw(t, s.addr, v5Connect("order-sub"))
			subr.subscribe(1, 0, sub("order/#", 0))
			c, _ := connectRaw(t, s.addr, v5Connect("order-pub"))
			const n = 100
			var ps []any
			for i := range n {
				q := byte(1)
				if tc.mixed && i%2 == 1 {
					q = 2
				}
				ps = append(ps, rawPublish(fmt.Sprintf("order/%d", i), q, uint16(1000+i), "x"))
			}
			c.sendPackets(ps...)
			for i := range n {
				want := packet.PUBACK
				if tc.mixed && i%2 == 1 {
					want = packet.PUBREC
				}
				a := expectPacket[*packet.Ack](c)
				if a.Type != want || a.PacketID != uint16(1000+i) || a.ReasonCode != packet.Success {
					t.Fatalf("ack %d: %v %d (%v), want %v %d", i, a.Type, a.PacketID, a.ReasonCode, want, 1000+i)
				}
			}
			// Routed in arrival order too.
			for i := range n {
				if m := subr.expectPublish(); string(m.Topic) != fmt.Sprintf("order/%d", i) {
					t.Fatalf("delivery %d: %s", i, m.Topic)
				}
			}
			if tc.hook != nil {
				tc.hook.wg.Wait()
			}
		})
	}
}

// The identifiers of inbound QoS 2 messages awaiting PUBREL are session
// state: a publisher that reconnects to its session and sends the
// PUBLISH again (it never saw the PUBREC) does not cause a second
// delivery, and its PUBREL completes normally.
func TestInboundQoS2ExactlyOnceAcrossReconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	subr := connectV5(t, s.addr, &paho.Connect{ClientID: "eor-sub", CleanStart: true, KeepAlive: 30})
	subr.sub(t, "eor/t", 2)
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			// v3.1.1: Clean Session 0 from the start makes the session persistent.
			cp := packet.Connect{Version: v, CleanStart: v == packet.V5, KeepAlive: 30, ClientID: fmt.Sprintf("eor-pub-%d", v)}
			if v == packet.V5 {
				cp.Props.SessionExpiry = 60
				cp.Props.Set(packet.PropSessionExpiry)
			}
			c, _ := connectRaw(t, s.addr, cp)
			c.sendPackets(rawPublish("eor/t", 2, 5, "once"))
			c.expectAck(packet.PUBREC)
			recv(t, subr.msgs, "the message")
			c.nc.Close()

			cp.CleanStart = false
			c, ca := connectRaw(t, s.addr, cp)
			if !ca.SessionPresent {
				t.Fatal("session not present")
			}
			dup := rawPublish("eor/t", 2, 5, "once")
			dup.Dup = true
			c.sendPackets(dup)
			c.expectAck(packet.PUBREC)
			noRecv(t, subr.msgs, "a second delivery after the reconnect")
			c.sendPackets(ack(packet.PUBREL, 5))
			if a := c.expectAck(packet.PUBCOMP); a.ReasonCode != packet.Success {
				t.Fatalf("PUBCOMP %v, want success", a.ReasonCode)
			}
			// Released: the identifier starts a new message.
			c.sendPackets(rawPublish("eor/t", 2, 5, "again"))
			c.expectAck(packet.PUBREC)
			if m := recv(t, subr.msgs, "the new message"); string(m.Payload) != "again" {
				t.Fatalf("payload %q", m.Payload)
			}
			c.sendPackets(ack(packet.PUBREL, 5))
			c.expectAck(packet.PUBCOMP)
		})
	}
}
