package packet_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"gantry/broker/packet"
	"gantry/broker/packet/packettest"
)

func TestFixturesDecode(t *testing.T) {
	for _, f := range packettest.Fixtures {
		t.Run(f.Name, func(t *testing.T) {
			got, err := packettest.DecodeWire(f.Wire, f.Version)
			if !f.Valid() {
				if !errors.Is(err, f.Err) {
					t.Fatalf("err = %v, want %v", err, f.Err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(got, f.Packet) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, f.Packet)
			}
		})
	}
}

// TestFixturesEncodeToWire checks encode(decode(wire)) == wire.
func TestFixturesEncodeToWire(t *testing.T) {
	for _, f := range packettest.Fixtures {
		if !f.Valid() || f.Noncanonical {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			got, err := packettest.DecodeWire(f.Wire, f.Version)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if enc := packettest.Encode(got, f.Version); !bytes.Equal(enc, f.Wire) {
				t.Fatalf("encoded\n% X\nwant\n% X", enc, f.Wire)
			}
		})
	}
}

// TestFixturesRoundTrip checks decode(encode(p)) == p, that Size is exact
// and that Append keeps what dst held.
func TestFixturesRoundTrip(t *testing.T) {
	for _, f := range packettest.Fixtures {
		if !f.Valid() {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			prefix := []byte("prefix")
			enc := packettest.Append(append([]byte(nil), prefix...), f.Packet, f.Version)
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatalf("Append overwrote dst: % X", enc)
			}
			enc = enc[len(prefix):]
			if size := packettest.Size(f.Packet, f.Version); size != len(enc) {
				t.Errorf("Size = %d, encoded %d bytes", size, len(enc))
			}
			got, err := packettest.DecodeWire(enc, f.Version)
			if err != nil {
				t.Fatalf("decode(encode(p)): %v; wire % X", err, enc)
			}
			if !reflect.DeepEqual(got, f.Packet) {
				t.Fatalf("decode(encode(p))\n%#v\nwant\n%#v", got, f.Packet)
			}
		})
	}
}

// TestFixturesDecodeWithDirectDecoders checks that the per-type decoders
// agree with Decode.
func TestFixturesDecodeWithDirectDecoders(t *testing.T) {
	for _, f := range packettest.Fixtures {
		h, n, err := packet.DecodeFixedHeader(f.Wire)
		if err != nil || len(f.Wire)-n != h.Remaining {
			continue
		}
		viaDecode, wantErr := packet.Decode(h, f.Wire[n:], f.Version)
		got, err := decodeDirect(h, f.Wire[n:], f.Version)
		if !errors.Is(err, wantErr) && !(err == nil && wantErr == nil) {
			t.Errorf("%s: direct err %v, Decode err %v", f.Name, err, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got, viaDecode) {
			t.Errorf("%s: direct %#v, Decode %#v", f.Name, got, viaDecode)
		}
	}
}

func decodeDirect(h packet.FixedHeader, body []byte, v packet.Version) (any, error) {
	switch h.Type {
	case packet.CONNECT:
		var c packet.Connect
		return &c, packet.DecodeConnect(body, &c)
	case packet.CONNACK:
		var c packet.Connack
		return &c, packet.DecodeConnack(h, body, v, &c)
	case packet.PUBLISH:
		var p packet.Publish
		return &p, packet.DecodePublish(h, body, v, &p)
	case packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP:
		var a packet.Ack
		return &a, packet.DecodeAck(h, body, v, &a)
	case packet.SUBSCRIBE:
		var s packet.Subscribe
		return &s, packet.DecodeSubscribe(h, body, v, &s)
	case packet.SUBACK:
		var s packet.Suback
		return &s, packet.DecodeSuback(h, body, v, &s)
	case packet.UNSUBSCRIBE:
		var u packet.Unsubscribe
		return &u, packet.DecodeUnsubscribe(h, body, v, &u)
	case packet.UNSUBACK:
		var u packet.Unsuback
		return &u, packet.DecodeUnsuback(h, body, v, &u)
	case packet.DISCONNECT:
		var d packet.Disconnect
		return &d, packet.DecodeDisconnect(h, body, v, &d)
	case packet.AUTH:
		var a packet.Auth
		return &a, packet.DecodeAuth(h, body, v, &a)
	}
	return packet.Decode(h, body, v)
}

func TestDecodeConnectUnsupportedVersionKeepsVersion(t *testing.T) {
	cases := []struct {
		fixture string
		name    string
		version packet.Version
	}{
		{"v311/connect/protocol-name-unknown", "MQTX", packet.V311},
		{"v311/connect/mqtt-level-3", "MQTT", packet.V31},
		{"v5/connect/mqtt-level-6", "MQTT", 6},
	}
	for _, tc := range cases {
		got, err := packettest.DecodeWire(packettest.Get(tc.fixture).Wire, packet.V311)
		c, ok := got.(*packet.Connect)
		if err != packet.UnsupportedProtocolVersion || !ok {
			t.Fatalf("%s: got %#v, %v", tc.fixture, got, err)
		}
		if c.ProtocolName != tc.name || c.Version != tc.version {
			t.Errorf("%s: ProtocolName %q Version %d, want %q %d", tc.fixture, c.ProtocolName, c.Version,
				tc.name, tc.version)
		}
	}
}

func TestDecodedPublishReferencesBody(t *testing.T) {
	wire := bytes.Clone(packettest.Get("v5/publish/qos0-no-properties").Wire)
	h, n, _ := packet.DecodeFixedHeader(wire)
	var p packet.Publish
	if err := packet.DecodePublish(h, wire[n:], packet.V5, &p); err != nil {
		t.Fatal(err)
	}
	wire[len(wire)-1] = '!'
	if string(p.Payload) != "hell!" {
		t.Errorf("Payload %q does not reference the body", p.Payload)
	}
	p.Topic = append(p.Topic, 'X') // capacity is capped: must not clobber the body
	if wire[n+2+3] != 0 {
		t.Errorf("appending to Topic overwrote the property length: % X", wire)
	}
}

func TestDecodedOwnedFieldsAreCopies(t *testing.T) {
	wire := bytes.Clone(packettest.Get("v5/connect/all-properties-and-will-properties").Wire)
	got, err := packettest.DecodeWire(wire, packet.V5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range wire {
		wire[i] = 0xAA
	}
	want := packettest.Get("v5/connect/all-properties-and-will-properties").Packet
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded CONNECT changed with its buffer: %#v", got)
	}
}

func TestDecodeResetsDestination(t *testing.T) {
	p := packet.Publish{Dup: true, PacketID: 9, Props: packet.Properties{Has: 1 << packet.PropTopicAlias, TopicAlias: 4}}
	h := packet.FixedHeader{Type: packet.PUBLISH}
	if err := packet.DecodePublish(h, []byte{0, 1, 'a', 0}, packet.V5, &p); err != nil {
		t.Fatal(err)
	}
	want := packet.Publish{Topic: []byte("a")}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %#v, want %#v", p, want)
	}
}

func TestDecodeRejectsHeaderOfAnotherType(t *testing.T) {
	var s packet.Subscribe
	h := packet.FixedHeader{Type: packet.UNSUBSCRIBE, Flags: 2}
	if err := packet.DecodeSubscribe(h, []byte{0, 1, 0, 1, 'a', 0}, packet.V311, &s); err != packet.MalformedPacket {
		t.Errorf("DecodeSubscribe with UNSUBSCRIBE header: %v", err)
	}
	var a packet.Ack
	if err := packet.DecodeAck(packet.FixedHeader{Type: packet.PUBLISH}, []byte{0, 1}, packet.V311, &a); err != packet.MalformedPacket {
		t.Errorf("DecodeAck with PUBLISH header: %v", err)
	}
	if _, err := packet.Decode(packet.FixedHeader{Type: packet.PUBREL}, []byte{0, 1}, packet.V311); err != packet.MalformedPacket {
		t.Errorf("Decode PUBREL with flags 0: %v", err)
	}
}
