package packettest

import (
	"bytes"
	"slices"

	"gantry/broker/packet"
)

// Fixtures is every shared wire fixture: valid packets of every type in
// v3.1.1 and v5 (and v3.1 CONNECT), then refused ones.
var Fixtures = slices.Concat(v3Fixtures, v5Fixtures, headerErrorFixtures,
	v3ErrorFixtures, v5ConnectErrorFixtures, v5ErrorFixtures)

// connectHead is the variable header of a CONNECT before its properties.
func connectHead(name string, level, flags byte, keepAlive uint16) []byte {
	return cat(str(name), bs(level, flags), u16(keepAlive))
}

// payload200 is a payload long enough to need a 2-byte Remaining Length.
var payload200 = bytes.Repeat([]byte("0123456789"), 20)

var v3Fixtures = []Fixture{
	{
		Name: "v31/connect/mqisdp", Version: packet.V31,
		Wire: frame(0x10, connectHead("MQIsdp", 3, 0x02, 30), str("legacy-client")),
		Packet: &packet.Connect{ProtocolName: "MQIsdp", Version: packet.V31, CleanStart: true,
			KeepAlive: 30, ClientID: "legacy-client"},
	},
	{
		Name: "v31/connect/will-username-password", Version: packet.V31,
		Wire: frame(0x10, connectHead("MQIsdp", 3, 0xD6, 10), str("c31"),
			str("will/c31"), str("gone"), str("bob"), str("pw")),
		Packet: &packet.Connect{ProtocolName: "MQIsdp", Version: packet.V31, CleanStart: true,
			KeepAlive: 10, ClientID: "c31", WillFlag: true, WillQoS: 2, WillTopic: "will/c31",
			WillPayload: []byte("gone"), UsernameFlag: true, Username: "bob", PasswordFlag: true,
			Password: []byte("pw")},
	},
	{
		Name: "v31/connack/accepted", Version: packet.V31,
		Wire:   bs(0x20, 2, 0, 0),
		Packet: &packet.Connack{},
	},
	{
		Name: "v311/connect/minimal", Version: packet.V311,
		Wire: frame(0x10, connectHead("MQTT", 4, 0x02, 60), str("client-1")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true,
			KeepAlive: 60, ClientID: "client-1"},
	},
	{
		Name: "v311/connect/empty-client-id", Version: packet.V311,
		Wire:   frame(0x10, connectHead("MQTT", 4, 0x02, 0), str("")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true},
	},
	{
		Name: "v311/connect/will-retain-qos1-username-password", Version: packet.V311,
		Wire: frame(0x10, connectHead("MQTT", 4, 0xEE, 120), str("client-2"),
			str("status/client-2"), str("offline"), str("alice"), str("s3cret")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true,
			KeepAlive: 120, ClientID: "client-2", WillFlag: true, WillQoS: 1, WillRetain: true,
			WillTopic: "status/client-2", WillPayload: []byte("offline"), UsernameFlag: true,
			Username: "alice", PasswordFlag: true, Password: []byte("s3cret")},
	},
	{
		Name: "v311/connect/will-qos2-empty-payload", Version: packet.V311,
		Wire: frame(0x10, connectHead("MQTT", 4, 0x14, 5), str("client-3"), str("lwt"), str("")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, KeepAlive: 5,
			ClientID: "client-3", WillFlag: true, WillQoS: 2, WillTopic: "lwt"},
	},
	{
		Name: "v311/connect/username-only-persistent-session", Version: packet.V311,
		Wire: frame(0x10, connectHead("MQTT", 4, 0x80, 60), str("client-4"), str("carol")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, KeepAlive: 60,
			ClientID: "client-4", UsernameFlag: true, Username: "carol"},
	},
	{
		Name: "v311/connect/username-and-empty-password", Version: packet.V311,
		Wire: frame(0x10, connectHead("MQTT", 4, 0xC2, 60), str("client-5"), str("dave"), str("")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true,
			KeepAlive: 60, ClientID: "client-5", UsernameFlag: true, Username: "dave", PasswordFlag: true},
	},
	{
		Name: "v311/connack/accepted", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 0),
		Packet: &packet.Connack{},
	},
	{
		Name: "v311/connack/accepted-session-present", Version: packet.V311,
		Wire:   bs(0x20, 2, 1, 0),
		Packet: &packet.Connack{SessionPresent: true},
	},
	{
		Name: "v311/connack/refused-unacceptable-protocol-version", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 1),
		Packet: &packet.Connack{ReasonCode: packet.UnsupportedProtocolVersion},
	},
	{
		Name: "v311/connack/refused-identifier-rejected", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 2),
		Packet: &packet.Connack{ReasonCode: packet.ClientIdentifierNotValid},
	},
	{
		Name: "v311/connack/refused-server-unavailable", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 3),
		Packet: &packet.Connack{ReasonCode: packet.ServerUnavailable},
	},
	{
		Name: "v311/connack/refused-bad-username-or-password", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 4),
		Packet: &packet.Connack{ReasonCode: packet.BadUserNameOrPassword},
	},
	{
		Name: "v311/connack/refused-not-authorized", Version: packet.V311,
		Wire:   bs(0x20, 2, 0, 5),
		Packet: &packet.Connack{ReasonCode: packet.NotAuthorized},
	},
	{
		Name: "v311/publish/qos0", Version: packet.V311,
		Wire:   frame(0x30, str("a/b"), []byte("hello")),
		Packet: &packet.Publish{Topic: []byte("a/b"), Payload: []byte("hello")},
	},
	{
		Name: "v311/publish/qos0-retain-empty-payload", Version: packet.V311,
		Wire:   frame(0x31, str("config/x")),
		Packet: &packet.Publish{Retain: true, Topic: []byte("config/x")},
	},
	{
		Name: "v311/publish/qos1", Version: packet.V311,
		Wire:   frame(0x32, str("sensors/temp"), u16(10), []byte("21.5")),
		Packet: &packet.Publish{QoS: 1, Topic: []byte("sensors/temp"), PacketID: 10, Payload: []byte("21.5")},
	},
	{
		Name: "v311/publish/qos1-dup-retain", Version: packet.V311,
		Wire: frame(0x3B, str("x/y"), u16(11), []byte("again")),
		Packet: &packet.Publish{Dup: true, QoS: 1, Retain: true, Topic: []byte("x/y"), PacketID: 11,
			Payload: []byte("again")},
	},
	{
		Name: "v311/publish/qos2-dup-binary-payload", Version: packet.V311,
		Wire: frame(0x3C, str("bin"), u16(65535), bs(0, 1, 2, 0xFF)),
		Packet: &packet.Publish{Dup: true, QoS: 2, Topic: []byte("bin"), PacketID: 65535,
			Payload: []byte{0, 1, 2, 0xFF}},
	},
	{
		Name: "v311/publish/remaining-length-two-bytes", Version: packet.V311,
		Wire:   frame(0x30, str("big"), payload200),
		Packet: &packet.Publish{Topic: []byte("big"), Payload: payload200},
	},
	{
		Name: "v311/publish/remaining-length-non-minimal", Version: packet.V311,
		Wire:         cat(bs(0x30, 0x85, 0x00), str("t"), []byte("ab")),
		Packet:       &packet.Publish{Topic: []byte("t"), Payload: []byte("ab")},
		Noncanonical: true,
	},
	{
		Name: "v311/publish/utf8-topic", Version: packet.V311,
		Wire:   frame(0x30, str("température/°C/日本"), []byte("1")),
		Packet: &packet.Publish{Topic: []byte("température/°C/日本"), Payload: []byte("1")},
	},
	{
		Name: "v311/puback", Version: packet.V311,
		Wire:   bs(0x40, 2, 0, 1),
		Packet: &packet.Ack{Type: packet.PUBACK, PacketID: 1},
	},
	{
		Name: "v311/pubrec", Version: packet.V311,
		Wire:   bs(0x50, 2, 0, 2),
		Packet: &packet.Ack{Type: packet.PUBREC, PacketID: 2},
	},
	{
		Name: "v311/pubrel", Version: packet.V311,
		Wire:   bs(0x62, 2, 0, 3),
		Packet: &packet.Ack{Type: packet.PUBREL, PacketID: 3},
	},
	{
		Name: "v311/pubcomp", Version: packet.V311,
		Wire:   bs(0x70, 2, 0x01, 0x00),
		Packet: &packet.Ack{Type: packet.PUBCOMP, PacketID: 256},
	},
	{
		Name: "v311/subscribe/one-filter", Version: packet.V311,
		Wire: frame(0x82, u16(1), str("a/#"), bs(1)),
		Packet: &packet.Subscribe{PacketID: 1, Subscriptions: []packet.Subscription{
			{Filter: "a/#", Options: packet.SubOptions{QoS: 1}}}},
	},
	{
		Name: "v311/subscribe/three-filters-qos-0-1-2", Version: packet.V311,
		Wire: frame(0x82, u16(2), str("+/temp"), bs(0), str("a/b"), bs(1), str("$share/g/t"), bs(2)),
		Packet: &packet.Subscribe{PacketID: 2, Subscriptions: []packet.Subscription{
			{Filter: "+/temp"},
			{Filter: "a/b", Options: packet.SubOptions{QoS: 1}},
			{Filter: "$share/g/t", Options: packet.SubOptions{QoS: 2}}}},
	},
	{
		Name: "v311/subscribe/empty-filter", Version: packet.V311,
		Wire:   frame(0x82, u16(5), str(""), bs(0)),
		Packet: &packet.Subscribe{PacketID: 5, Subscriptions: []packet.Subscription{{Filter: ""}}},
	},
	{
		Name: "v311/suback/granted-and-failure", Version: packet.V311,
		Wire: frame(0x90, u16(1), bs(0, 1, 2, 0x80)),
		Packet: &packet.Suback{PacketID: 1, ReasonCodes: []packet.ReasonCode{
			packet.Success, packet.GrantedQoS1, packet.GrantedQoS2, packet.UnspecifiedError}},
	},
	{
		Name: "v311/unsubscribe/one-filter", Version: packet.V311,
		Wire:   frame(0xA2, u16(3), str("a/#")),
		Packet: &packet.Unsubscribe{PacketID: 3, Filters: []string{"a/#"}},
	},
	{
		Name: "v311/unsubscribe/two-filters", Version: packet.V311,
		Wire:   frame(0xA2, u16(4), str("a/b"), str("c/+/d")),
		Packet: &packet.Unsubscribe{PacketID: 4, Filters: []string{"a/b", "c/+/d"}},
	},
	{
		Name: "v311/unsubscribe/empty-filter", Version: packet.V311,
		Wire:   frame(0xA2, u16(4), str("")),
		Packet: &packet.Unsubscribe{PacketID: 4, Filters: []string{""}},
	},
	{
		Name: "v311/unsuback", Version: packet.V311,
		Wire:   bs(0xB0, 2, 0, 7),
		Packet: &packet.Unsuback{PacketID: 7},
	},
	{
		Name: "v311/pingreq", Version: packet.V311,
		Wire:   bs(0xC0, 0),
		Packet: packet.Pingreq{},
	},
	{
		Name: "v311/pingresp", Version: packet.V311,
		Wire:   bs(0xD0, 0),
		Packet: packet.Pingresp{},
	},
	{
		Name: "v311/disconnect", Version: packet.V311,
		Wire:   bs(0xE0, 0),
		Packet: &packet.Disconnect{},
	},
}
