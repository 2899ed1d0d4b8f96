package packet_test

import (
	"bytes"
	"testing"

	"gantry/broker/packet"
)

// someProps has a property allowed in every packet and ones allowed in few.
var someProps = packet.Properties{
	Has:            1<<packet.PropReasonString | 1<<packet.PropTopicAlias | 1<<packet.PropUserProperty,
	ReasonString:   "why",
	TopicAlias:     9,
	UserProperties: []packet.UserProperty{{Key: "k", Value: "v"}},
}

func checkEncoding(t *testing.T, name string, got []byte, size int, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: encoded % X, want % X", name, got, want)
	}
	if size != len(got) {
		t.Errorf("%s: Size %d, encoded %d bytes", name, size, len(got))
	}
}

func TestV3EncodersOmitV5Fields(t *testing.T) {
	ack := packet.Ack{Type: packet.PUBREL, PacketID: 5, ReasonCode: packet.PacketIdentifierNotFound, Props: someProps}
	checkEncoding(t, "PUBREL", ack.Append(nil, packet.V311), ack.Size(packet.V311), []byte{0x62, 2, 0, 5})

	unsuback := packet.Unsuback{PacketID: 6, Props: someProps, ReasonCodes: []packet.ReasonCode{packet.NotAuthorized}}
	checkEncoding(t, "UNSUBACK", unsuback.Append(nil, packet.V311), unsuback.Size(packet.V311), []byte{0xB0, 2, 0, 6})

	disconnect := packet.Disconnect{ReasonCode: packet.ServerShuttingDown, Props: someProps}
	checkEncoding(t, "DISCONNECT", disconnect.Append(nil, packet.V311), disconnect.Size(packet.V311), []byte{0xE0, 0})

	publish := packet.Publish{QoS: 1, Topic: []byte("t"), PacketID: 1, Props: someProps, Payload: []byte("p")}
	checkEncoding(t, "PUBLISH", publish.Append(nil, packet.V311), publish.Size(packet.V311),
		[]byte{0x32, 6, 0, 1, 't', 0, 1, 'p'})
}

func TestV3ConnackWritesV3ReturnCode(t *testing.T) {
	cases := map[packet.ReasonCode]byte{
		packet.Success: 0, packet.UnsupportedProtocolVersion: 1, packet.ClientIdentifierNotValid: 2,
		packet.ServerBusy: 3, packet.BadAuthenticationMethod: 4, packet.Banned: 5, packet.QuotaExceeded: 5,
	}
	for code, want := range cases {
		c := packet.Connack{ReasonCode: code, Props: someProps}
		checkEncoding(t, code.Error(), c.Append(nil, packet.V311), c.Size(packet.V311), []byte{0x20, 2, 0, want})
	}
}

func TestConnackSessionPresentOnlyOnSuccess(t *testing.T) {
	refused := packet.Connack{SessionPresent: true, ReasonCode: packet.NotAuthorized}
	checkEncoding(t, "v5 refusal", refused.Append(nil, packet.V5), refused.Size(packet.V5), []byte{0x20, 3, 0, 0x87, 0})
	accepted := packet.Connack{SessionPresent: true}
	checkEncoding(t, "v3.1", accepted.Append(nil, packet.V31), accepted.Size(packet.V31), []byte{0x20, 2, 0, 0})
	checkEncoding(t, "v3.1.1", accepted.Append(nil, packet.V311), accepted.Size(packet.V311), []byte{0x20, 2, 1, 0})
}

func TestV3SubackMapsFailuresTo0x80(t *testing.T) {
	s := packet.Suback{PacketID: 1, Props: someProps, ReasonCodes: []packet.ReasonCode{
		packet.GrantedQoS2, packet.NotAuthorized, packet.Success, packet.TopicFilterInvalid, packet.GrantedQoS1}}
	checkEncoding(t, "SUBACK", s.Append(nil, packet.V311), s.Size(packet.V311), []byte{0x90, 7, 0, 1, 2, 0x80, 0, 0x80, 1})
}

func TestV5AcksUseShortestForm(t *testing.T) {
	short := packet.Ack{Type: packet.PUBACK, PacketID: 1}
	checkEncoding(t, "success", short.Append(nil, packet.V5), short.Size(packet.V5), []byte{0x40, 2, 0, 1})
	code := packet.Ack{Type: packet.PUBREC, PacketID: 1, ReasonCode: packet.QuotaExceeded}
	checkEncoding(t, "code", code.Append(nil, packet.V5), code.Size(packet.V5), []byte{0x50, 3, 0, 1, 0x97})
	d := packet.Disconnect{ReasonCode: packet.SessionTakenOver}
	checkEncoding(t, "disconnect", d.Append(nil, packet.V5), d.Size(packet.V5), []byte{0xE0, 1, 0x8E})
	a := packet.Auth{}
	checkEncoding(t, "auth success", a.Append(nil, packet.V5), a.Size(packet.V5), []byte{0xF0, 0})
	a = packet.Auth{ReasonCode: packet.ReAuthenticate} // AUTH has no code-only form
	checkEncoding(t, "auth code", a.Append(nil, packet.V5), a.Size(packet.V5), []byte{0xF0, 2, 0x19, 0})
}

func TestEncoderWritesOnlyPropertiesAllowedInPacket(t *testing.T) {
	ack := packet.Ack{Type: packet.PUBACK, PacketID: 1, Props: someProps} // TopicAlias is not allowed in PUBACK
	want := []byte{0x40, 17, 0, 1, 0, 13, 0x1F, 0, 3, 'w', 'h', 'y', 0x26, 0, 1, 'k', 0, 1, 'v'}
	checkEncoding(t, "PUBACK", ack.Append(nil, packet.V5), ack.Size(packet.V5), want)
}

func TestStringPropertiesWrittenWhenSetOrNonEmpty(t *testing.T) {
	p := packet.Publish{Topic: []byte("t"), Props: packet.Properties{ContentType: "c", Has: 1 << packet.PropResponseTopic}}
	want := []byte{0x30, 11, 0, 1, 't', 7, 0x03, 0, 1, 'c', 0x08, 0, 0}
	checkEncoding(t, "PUBLISH", p.Append(nil, packet.V5), p.Size(packet.V5), want)
}

func TestConnectDerivesProtocolNameFromVersion(t *testing.T) {
	c := packet.Connect{Version: packet.V31, ClientID: "c", WillQoS: 2, WillRetain: true, WillTopic: "ignored"}
	want := []byte{0x10, 15, 0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 3, 0, 0, 0, 0, 1, 'c'}
	checkEncoding(t, "v3.1 CONNECT", c.Append(nil), c.Size(), want)
	c = packet.Connect{Version: packet.V5}
	want = []byte{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 5, 0, 0, 0, 0, 0, 0}
	checkEncoding(t, "v5 CONNECT", c.Append(nil), c.Size(), want)
}

func TestSizeCountsMultiByteRemainingLength(t *testing.T) {
	for _, n := range []int{0, 120, 123, 124, 125, 16380, 16381, 16384, 2097148, 2097152} {
		p := packet.Publish{Topic: []byte("t"), Payload: make([]byte, n)}
		if got, want := p.Size(packet.V311), len(p.Append(nil, packet.V311)); got != want {
			t.Errorf("payload %d: Size %d, encoded %d", n, got, want)
		}
	}
}

func TestLongStringsAreCutToWireLimit(t *testing.T) {
	u := packet.Unsubscribe{PacketID: 1, Filters: []string{string(make([]byte, 70000))}}
	wire := u.Append(nil, packet.V311)
	if len(wire) != 4+2+2+65535 || len(wire) != u.Size(packet.V311) || wire[6] != 0xFF || wire[7] != 0xFF {
		t.Fatalf("len %d Size %d prefix % X", len(wire), u.Size(packet.V311), wire[:8])
	}
}
