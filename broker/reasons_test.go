package broker_test

import (
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// The reason codes of MQTT 5 as the specification distinguishes them,
// each case sent as raw bytes after a valid CONNECT: Malformed Packet
// (0x81) only where the bytes cannot be parsed, Protocol Error (0x82)
// where a well-formed packet is not allowed there.
func TestDisconnectReasonCodes(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cases := []struct {
		name string
		wire []byte
		want packet.ReasonCode
	}{
		{"reserved packet type 0", []byte{0x00, 0x00}, packet.MalformedPacket},
		{"PINGREQ with reserved flags set", []byte{0xC1, 0x00}, packet.MalformedPacket},
		{"PUBLISH with QoS 3", []byte{0x36, 0x06, 0x00, 0x01, 'a', 0x00, 0x01, 0x00}, packet.MalformedPacket},
		{"SUBSCRIBE with flags 0", []byte{0x80, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, 'a'}, packet.MalformedPacket},
		{"CONNACK from a client", []byte{0x20, 0x03, 0x00, 0x00, 0x00}, packet.ProtocolError},
		{"SUBACK from a client", []byte{0x90, 0x04, 0x00, 0x01, 0x00, 0x00}, packet.ProtocolError},
		{"UNSUBACK from a client", []byte{0xB0, 0x04, 0x00, 0x01, 0x00, 0x00}, packet.ProtocolError},
		{"PINGRESP from a client", []byte{0xD0, 0x00}, packet.ProtocolError},
		{"second CONNECT", func() []byte { cp := v5Connect("again"); return cp.Append(nil) }(), packet.ProtocolError},
		{"AUTH without an authentication method", []byte{0xF0, 0x00}, packet.ProtocolError},
		{"PUBLISH without topic or alias", []byte{0x30, 0x03, 0x00, 0x00, 0x00}, packet.ProtocolError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := connectRaw(t, s.addr, v5Connect("rc-"+tc.name))
			c.send(tc.wire)
			c.expectDisconnect(tc.want)
		})
	}
}

// An acknowledgement of the wrong type for a delivery is a protocol
// error: a PUBCOMP or PUBREC answering QoS 1, a PUBACK answering QoS 2, a
// PUBCOMP before the PUBREL.
func TestWrongAcknowledgementType(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	for _, tc := range []struct {
		name string
		qos  byte
		send func(c *rawClient, pid uint16)
	}{
		{"PUBCOMP answering QoS 1", 1, func(c *rawClient, pid uint16) { c.sendPackets(ack(packet.PUBCOMP, pid)) }},
		{"PUBREC answering QoS 1", 1, func(c *rawClient, pid uint16) { c.sendPackets(ack(packet.PUBREC, pid)) }},
		{"PUBACK answering QoS 2", 2, func(c *rawClient, pid uint16) { c.sendPackets(ack(packet.PUBACK, pid)) }},
		{"PUBCOMP before PUBREL", 2, func(c *rawClient, pid uint16) { c.sendPackets(ack(packet.PUBCOMP, pid)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "wrong-ack-" + tc.name
			c, _ := connectRaw(t, s.addr, v5Connect(id))
			c.subscribe(1, 0, sub("wa/"+id, tc.qos))
			s.Deliver(&broker.Message{Topic: "wa/" + id, Payload: []byte("x"), QoS: tc.qos})
			p := c.expectPublish()
			tc.send(c, p.PacketID)
			c.expectDisconnect(packet.ProtocolError)
		})
	}
	// The right types still complete the flows.
	c, _ := connectRaw(t, s.addr, v5Connect("right-acks"))
	c.subscribe(1, 0, sub("wa/right/+", 2))
	s.Deliver(&broker.Message{Topic: "wa/right/2", Payload: []byte("x"), QoS: 2})
	p := c.expectPublish()
	c.sendPackets(ack(packet.PUBREC, p.PacketID))
	c.expectAck(packet.PUBREL)
	c.sendPackets(ack(packet.PUBCOMP, p.PacketID))
	c.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](c)
}

// The informative codes: 0x10 when a message reaches no subscriber, 0x92
// for an unknown packet identifier.
func TestInformativeReasonCodes(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	c, _ := connectRaw(t, s.addr, v5Connect("informative"))
	want := func(what string, a *packet.Ack, rc packet.ReasonCode) {
		t.Helper()
		if a.ReasonCode != rc {
			t.Errorf("%s: %v %v, want %v", what, a.Type, a.ReasonCode, rc)
		}
	}
	c.sendPackets(rawPublish("nobody/here", 1, 1, "x"))
	want("QoS 1 to no subscriber", c.expectAck(packet.PUBACK), packet.NoMatchingSubscribers)
	c.sendPackets(rawPublish("nobody/here", 2, 2, "x"))
	want("QoS 2 to no subscriber", c.expectAck(packet.PUBREC), packet.NoMatchingSubscribers)
	c.sendPackets(ack(packet.PUBREL, 2))
	want("its PUBREL", c.expectAck(packet.PUBCOMP), packet.Success)
	retained := rawPublish("nobody/retained", 1, 3, "x")
	retained.Retain = true
	c.sendPackets(retained)
	want("retained QoS 1 to no subscriber", c.expectAck(packet.PUBACK), packet.Success)
	c.subscribe(4, 0, sub("some/+", 0))
	c.sendPackets(rawPublish("some/one", 1, 5, "x"))
	for range 2 { // the delivery to itself and the PUBACK, in either order
		p, err := c.read(waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := p.(*packet.Ack); ok {
			want("QoS 1 to a subscriber", a, packet.Success)
		}
	}
	c.sendPackets(ack(packet.PUBREL, 77))
	want("PUBREL of an unknown identifier", c.expectAck(packet.PUBCOMP), packet.PacketIdentifierNotFound)
	c.sendPackets(ack(packet.PUBREC, 78))
	want("PUBREC of an unknown identifier", c.expectAck(packet.PUBREL), packet.PacketIdentifierNotFound)
	c.sendPackets(ack(packet.PUBACK, 79)) // unknown PUBACK: ignored
	c.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](c)
}

// MQTT 3.1.1 has no DISCONNECT from the server: where the specification
// says the server must not answer, the connection is closed without a
// CONNACK; where it says to answer, the CONNACK carries the return code.
func TestV311ClosesWithoutConnack(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	connect := func(flags byte, payload ...byte) []byte {
		body := append([]byte{0, 4, 'M', 'Q', 'T', 'T', 4, flags, 0, 30}, payload...)
		return append([]byte{0x10, byte(len(body))}, body...)
	}
	for _, tc := range []struct {
		name    string
		wire    []byte
		connack int // expected CONNACK code as decoded (the v3 return code's v5 equivalent), -1: none
	}{
		{"first packet not CONNECT", []byte{0xC0, 0x00}, -1},
		{"reserved CONNECT flag", connect(0x03, 0, 0), -1},
		{"password without user name", connect(0x42, 0, 1, 'c', 0, 1, 'p'), -1},
		{"will QoS 3", connect(0x1E, 0, 1, 'c', 0, 1, 'w', 0, 1, 'x'), -1},
		{"empty client id without clean session", connect(0x00, 0, 0), int(packet.ClientIdentifierNotValid)}, // return code 2
		{"protocol level 6", rawConnect("MQTT", 6), int(packet.UnsupportedProtocolVersion)},                  // return code 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialRaw(t, s.addr, packet.V311)
			c.send(tc.wire)
			got := readUntilClosed(t, c, 4*time.Second)
			switch {
			case tc.connack < 0 && len(got) != 0:
				t.Fatalf("got %+v, want the connection closed without a word", got)
			case tc.connack >= 0 && len(got) != 1:
				t.Fatalf("got %+v, want one CONNACK %#x", got, tc.connack)
			case tc.connack >= 0:
				if a, ok := got[0].(*packet.Connack); !ok || int(a.ReasonCode) != tc.connack {
					t.Fatalf("got %+v, want CONNACK %#x", got[0], tc.connack)
				}
			}
		})
	}
	// After CONNECT, a packet a server never receives closes silently.
	c, _ := connectRaw(t, s.addr, packet.Connect{Version: packet.V311, CleanStart: true, ClientID: "v3-connack"})
	c.send([]byte{0x20, 0x02, 0x00, 0x00})
	if got := readUntilClosed(t, c, 4*time.Second); len(got) != 0 {
		t.Fatalf("v3 CONNACK from a client: got %+v, want the connection closed", got)
	}
}
