package packettest

import "gantry/broker/packet"

// Property identifiers, shortened for the fixture tables.
const (
	pPayloadFormat   = packet.PropPayloadFormat
	pMessageExpiry   = packet.PropMessageExpiry
	pContentType     = packet.PropContentType
	pResponseTopic   = packet.PropResponseTopic
	pCorrelationData = packet.PropCorrelationData
	pSubscriptionID  = packet.PropSubscriptionID
	pSessionExpiry   = packet.PropSessionExpiry
	pAssignedID      = packet.PropAssignedClientID
	pServerKeepAlive = packet.PropServerKeepAlive
	pAuthMethod      = packet.PropAuthMethod
	pAuthData        = packet.PropAuthData
	pReqProblemInfo  = packet.PropRequestProblemInfo
	pWillDelay       = packet.PropWillDelay
	pReqRespInfo     = packet.PropRequestResponseInfo
	pResponseInfo    = packet.PropResponseInfo
	pServerReference = packet.PropServerReference
	pReasonString    = packet.PropReasonString
	pReceiveMaximum  = packet.PropReceiveMaximum
	pTopicAliasMax   = packet.PropTopicAliasMaximum
	pTopicAlias      = packet.PropTopicAlias
	pMaximumQoS      = packet.PropMaximumQoS
	pRetainAvailable = packet.PropRetainAvailable
	pUserProperty    = packet.PropUserProperty
	pMaxPacketSize   = packet.PropMaximumPacketSize
	pWildcardAvail   = packet.PropWildcardSubAvailable
	pSubIDAvail      = packet.PropSubIDAvailable
	pSharedAvail     = packet.PropSharedSubAvailable
)

// up is a one-element User Property list.
func up(k, v string) []packet.UserProperty { return []packet.UserProperty{{Key: k, Value: v}} }

var v5Fixtures = []Fixture{
	{
		Name: "v5/connect/minimal", Version: packet.V5,
		Wire: frame(0x10, connectHead("MQTT", 5, 0x02, 60), props(), str("client-5")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true,
			KeepAlive: 60, ClientID: "client-5"},
	},
	{
		Name: "v5/connect/all-properties-and-will-properties", Version: packet.V5,
		Wire: frame(0x10, connectHead("MQTT", 5, 0xEE, 30),
			props(prop(pSessionExpiry, u32(3600)), prop(pAuthMethod, str("SCRAM-SHA-1")),
				prop(pAuthData, str("client-first")), prop(pReqProblemInfo, bs(0)),
				prop(pReqRespInfo, bs(1)), prop(pReceiveMaximum, u16(100)),
				prop(pTopicAliasMax, u16(10)), userProp("region", "eu"), userProp("tier", "gold"),
				prop(pMaxPacketSize, u32(1048576))),
			str("client-6"),
			props(prop(pPayloadFormat, bs(1)), prop(pMessageExpiry, u32(600)),
				prop(pContentType, str("text/plain")), prop(pResponseTopic, str("replies/c6")),
				prop(pCorrelationData, str("\x01\x02")), prop(pWillDelay, u32(30)), userProp("k", "v")),
			str("status/c6"), str("offline"), str("alice"), str("s3cret")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true,
			KeepAlive: 30, ClientID: "client-6",
			Props: packet.Properties{
				Has: has(pSessionExpiry, pAuthMethod, pAuthData, pReqProblemInfo, pReqRespInfo,
					pReceiveMaximum, pTopicAliasMax, pUserProperty, pMaxPacketSize),
				SessionExpiry: 3600, AuthMethod: "SCRAM-SHA-1", AuthData: []byte("client-first"),
				RequestProblemInfo: 0, RequestResponseInfo: 1, ReceiveMaximum: 100,
				TopicAliasMaximum: 10, MaximumPacketSize: 1048576,
				UserProperties: []packet.UserProperty{{Key: "region", Value: "eu"}, {Key: "tier", Value: "gold"}},
			},
			WillFlag: true, WillQoS: 1, WillRetain: true,
			WillProps: packet.Properties{
				Has: has(pPayloadFormat, pMessageExpiry, pContentType, pResponseTopic,
					pCorrelationData, pWillDelay, pUserProperty),
				PayloadFormat: 1, MessageExpiry: 600, ContentType: "text/plain",
				ResponseTopic: "replies/c6", CorrelationData: []byte{1, 2}, WillDelay: 30,
				UserProperties: up("k", "v"),
			},
			WillTopic: "status/c6", WillPayload: []byte("offline"),
			UsernameFlag: true, Username: "alice", PasswordFlag: true, Password: []byte("s3cret")},
	},
	{
		Name: "v5/connect/password-without-username", Version: packet.V5,
		Wire: frame(0x10, connectHead("MQTT", 5, 0x42, 60), props(), str("client-7"), str("token")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true,
			KeepAlive: 60, ClientID: "client-7", PasswordFlag: true, Password: []byte("token")},
	},
	{
		Name: "v5/connect/will-without-properties", Version: packet.V5,
		Wire: frame(0x10, connectHead("MQTT", 5, 0x06, 60), props(), str(""), props(), str("w"), str("x")),
		Packet: &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true,
			KeepAlive: 60, WillFlag: true, WillTopic: "w", WillPayload: []byte("x")},
	},
	{
		Name: "v5/connack/success", Version: packet.V5,
		Wire:   frame(0x20, bs(0, 0), props()),
		Packet: &packet.Connack{},
	},
	{
		Name: "v5/connack/success-session-present", Version: packet.V5,
		Wire:   frame(0x20, bs(1, 0), props()),
		Packet: &packet.Connack{SessionPresent: true},
	},
	{
		Name: "v5/connack/refused-unsupported-protocol-version", Version: packet.V5,
		Wire:   frame(0x20, bs(0, 0x84), props()),
		Packet: &packet.Connack{ReasonCode: packet.UnsupportedProtocolVersion},
	},
	{
		Name: "v5/connack/all-properties", Version: packet.V5,
		Wire: frame(0x20, bs(0, 0), props(prop(pSessionExpiry, u32(120)), prop(pAssignedID, str("auto-1")),
			prop(pServerKeepAlive, u16(30)), prop(pAuthMethod, str("SCRAM-SHA-1")),
			prop(pAuthData, str("server-final")), prop(pResponseInfo, str("resp/")),
			prop(pServerReference, str("other:1883")), prop(pReasonString, str("welcome")),
			prop(pReceiveMaximum, u16(20)), prop(pTopicAliasMax, u16(5)), prop(pMaximumQoS, bs(1)),
			prop(pRetainAvailable, bs(0)), userProp("node", "b1"), prop(pMaxPacketSize, u32(65536)),
			prop(pWildcardAvail, bs(0)), prop(pSubIDAvail, bs(1)), prop(pSharedAvail, bs(0)))),
		Packet: &packet.Connack{Props: packet.Properties{
			Has: has(pSessionExpiry, pAssignedID, pServerKeepAlive, pAuthMethod, pAuthData,
				pResponseInfo, pServerReference, pReasonString, pReceiveMaximum, pTopicAliasMax,
				pMaximumQoS, pRetainAvailable, pUserProperty, pMaxPacketSize, pWildcardAvail,
				pSubIDAvail, pSharedAvail),
			SessionExpiry: 120, AssignedClientID: "auto-1", ServerKeepAlive: 30,
			AuthMethod: "SCRAM-SHA-1", AuthData: []byte("server-final"), ResponseInfo: "resp/",
			ServerReference: "other:1883", ReasonString: "welcome", ReceiveMaximum: 20,
			TopicAliasMaximum: 5, MaximumQoS: 1, RetainAvailable: 0, UserProperties: up("node", "b1"),
			MaximumPacketSize: 65536, WildcardSubAvail: 0, SubIDAvail: 1, SharedSubAvail: 0,
		}},
	},
	{
		Name: "v5/publish/qos0-no-properties", Version: packet.V5,
		Wire:   frame(0x30, str("a/b"), props(), []byte("hello")),
		Packet: &packet.Publish{Topic: []byte("a/b"), Payload: []byte("hello")},
	},
	{
		Name: "v5/publish/qos0-empty-payload", Version: packet.V5,
		Wire:   frame(0x30, str("t"), props()),
		Packet: &packet.Publish{Topic: []byte("t")},
	},
	{
		Name: "v5/publish/qos1-all-properties", Version: packet.V5,
		Wire: frame(0x32, str("req/1"), u16(42),
			props(prop(pPayloadFormat, bs(1)), prop(pMessageExpiry, u32(60)),
				prop(pContentType, str("application/json")), prop(pResponseTopic, str("resp/1")),
				prop(pCorrelationData, str("\x00\x01corr")), prop(pSubscriptionID, vbi(1)),
				prop(pSubscriptionID, vbi(268435455)), prop(pTopicAlias, u16(3)),
				userProp("a", "1"), userProp("a", "2")),
			[]byte(`{"x":1}`)),
		Packet: &packet.Publish{QoS: 1, Topic: []byte("req/1"), PacketID: 42,
			Props: packet.Properties{
				Has: has(pPayloadFormat, pMessageExpiry, pContentType, pResponseTopic,
					pCorrelationData, pSubscriptionID, pTopicAlias, pUserProperty),
				PayloadFormat: 1, MessageExpiry: 60, ContentType: "application/json",
				ResponseTopic: "resp/1", CorrelationData: []byte("\x00\x01corr"),
				SubscriptionIDs: []uint32{1, 268435455}, TopicAlias: 3,
				UserProperties: []packet.UserProperty{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}},
			},
			Payload: []byte(`{"x":1}`)},
	},
	{
		Name: "v5/publish/qos2-dup-retain", Version: packet.V5,
		Wire: frame(0x3D, str("q2"), u16(7), props(), []byte("p")),
		Packet: &packet.Publish{Dup: true, QoS: 2, Retain: true, Topic: []byte("q2"), PacketID: 7,
			Payload: []byte("p")},
	},
	{
		Name: "v5/publish/topic-alias-empty-topic", Version: packet.V5,
		Wire: frame(0x30, str(""), props(prop(pTopicAlias, u16(7))), []byte("x")),
		Packet: &packet.Publish{Props: packet.Properties{Has: has(pTopicAlias), TopicAlias: 7},
			Payload: []byte("x")},
	},
	{
		Name: "v5/publish/message-expiry-zero", Version: packet.V5,
		Wire: frame(0x30, str("t"), props(prop(pMessageExpiry, u32(0)))),
		Packet: &packet.Publish{Topic: []byte("t"),
			Props: packet.Properties{Has: has(pMessageExpiry)}},
	},
	{
		Name: "v5/publish/empty-content-type", Version: packet.V5,
		Wire: frame(0x30, str("t"), props(prop(pContentType, str("")))),
		Packet: &packet.Publish{Topic: []byte("t"),
			Props: packet.Properties{Has: has(pContentType)}},
	},
	{
		Name: "v5/puback/success-short", Version: packet.V5,
		Wire:   bs(0x40, 2, 0, 1),
		Packet: &packet.Ack{Type: packet.PUBACK, PacketID: 1},
	},
	{
		Name: "v5/puback/no-matching-subscribers", Version: packet.V5,
		Wire:   bs(0x40, 3, 0, 2, 0x10),
		Packet: &packet.Ack{Type: packet.PUBACK, PacketID: 2, ReasonCode: packet.NoMatchingSubscribers},
	},
	{
		Name: "v5/puback/not-authorized-with-properties", Version: packet.V5,
		Wire: frame(0x40, u16(3), bs(0x87), props(prop(pReasonString, str("denied")), userProp("acl", "r1"))),
		Packet: &packet.Ack{Type: packet.PUBACK, PacketID: 3, ReasonCode: packet.NotAuthorized,
			Props: packet.Properties{Has: has(pReasonString, pUserProperty), ReasonString: "denied",
				UserProperties: up("acl", "r1")}},
	},
	{
		Name: "v5/puback/success-with-properties", Version: packet.V5,
		Wire: frame(0x40, u16(6), bs(0), props(userProp("k", "v"))),
		Packet: &packet.Ack{Type: packet.PUBACK, PacketID: 6,
			Props: packet.Properties{Has: has(pUserProperty), UserProperties: up("k", "v")}},
	},
	{
		Name: "v5/puback/success-explicit-code", Version: packet.V5,
		Wire:         bs(0x40, 3, 0, 4, 0),
		Packet:       &packet.Ack{Type: packet.PUBACK, PacketID: 4},
		Noncanonical: true,
	},
	{
		Name: "v5/puback/success-empty-properties", Version: packet.V5,
		Wire:         bs(0x40, 4, 0, 5, 0, 0),
		Packet:       &packet.Ack{Type: packet.PUBACK, PacketID: 5},
		Noncanonical: true,
	},
	{
		Name: "v5/pubrec/success-short", Version: packet.V5,
		Wire:   bs(0x50, 2, 0, 8),
		Packet: &packet.Ack{Type: packet.PUBREC, PacketID: 8},
	},
	{
		Name: "v5/pubrec/quota-exceeded", Version: packet.V5,
		Wire:   bs(0x50, 3, 0, 8, 0x97),
		Packet: &packet.Ack{Type: packet.PUBREC, PacketID: 8, ReasonCode: packet.QuotaExceeded},
	},
	{
		Name: "v5/pubrel/success-short", Version: packet.V5,
		Wire:   bs(0x62, 2, 0, 9),
		Packet: &packet.Ack{Type: packet.PUBREL, PacketID: 9},
	},
	{
		Name: "v5/pubrel/packet-id-not-found", Version: packet.V5,
		Wire:   bs(0x62, 3, 0, 10, 0x92),
		Packet: &packet.Ack{Type: packet.PUBREL, PacketID: 10, ReasonCode: packet.PacketIdentifierNotFound},
	},
	{
		Name: "v5/pubcomp/success-short", Version: packet.V5,
		Wire:   bs(0x70, 2, 0, 11),
		Packet: &packet.Ack{Type: packet.PUBCOMP, PacketID: 11},
	},
	{
		Name: "v5/pubcomp/packet-id-not-found-reason-string", Version: packet.V5,
		Wire: frame(0x70, u16(12), bs(0x92), props(prop(pReasonString, str("unknown id")))),
		Packet: &packet.Ack{Type: packet.PUBCOMP, PacketID: 12, ReasonCode: packet.PacketIdentifierNotFound,
			Props: packet.Properties{Has: has(pReasonString), ReasonString: "unknown id"}},
	},
	{
		Name: "v5/subscribe/all-options", Version: packet.V5,
		Wire: frame(0x82, u16(1), props(), str("a/+"), bs(0x00), str("b/#"), bs(0x05),
			str("c"), bs(0x1A), str("d"), bs(0x21)),
		Packet: &packet.Subscribe{PacketID: 1, Subscriptions: []packet.Subscription{
			{Filter: "a/+"},
			{Filter: "b/#", Options: packet.SubOptions{QoS: 1, NoLocal: true}},
			{Filter: "c", Options: packet.SubOptions{QoS: 2, RetainAsPublished: true, RetainHandling: 1}},
			{Filter: "d", Options: packet.SubOptions{QoS: 1, RetainHandling: 2}}}},
	},
	{
		Name: "v5/subscribe/subscription-id-and-user-property", Version: packet.V5,
		Wire: frame(0x82, u16(2), props(prop(pSubscriptionID, vbi(300)), userProp("src", "test")),
			str("x/#"), bs(0x01)),
		Packet: &packet.Subscribe{PacketID: 2,
			Props: packet.Properties{Has: has(pSubscriptionID, pUserProperty),
				SubscriptionIDs: []uint32{300}, UserProperties: up("src", "test")},
			Subscriptions: []packet.Subscription{{Filter: "x/#", Options: packet.SubOptions{QoS: 1}}}},
	},
	{
		Name: "v5/suback/granted-and-refused", Version: packet.V5,
		Wire: frame(0x90, u16(1), props(), bs(0, 1, 2, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)),
		Packet: &packet.Suback{PacketID: 1, ReasonCodes: []packet.ReasonCode{
			packet.Success, packet.GrantedQoS1, packet.GrantedQoS2, packet.UnspecifiedError,
			packet.ImplementationSpecificError, packet.NotAuthorized, packet.TopicFilterInvalid,
			packet.PacketIdentifierInUse, packet.QuotaExceeded, packet.SharedSubNotSupported,
			packet.SubIDsNotSupported, packet.WildcardSubsNotSupported}},
	},
	{
		Name: "v5/suback/reason-string-and-user-property", Version: packet.V5,
		Wire: frame(0x90, u16(2), props(prop(pReasonString, str("partial")), userProp("k", "v")), bs(1, 0x87)),
		Packet: &packet.Suback{PacketID: 2,
			Props: packet.Properties{Has: has(pReasonString, pUserProperty), ReasonString: "partial",
				UserProperties: up("k", "v")},
			ReasonCodes: []packet.ReasonCode{packet.GrantedQoS1, packet.NotAuthorized}},
	},
	{
		Name: "v5/unsubscribe/two-filters", Version: packet.V5,
		Wire:   frame(0xA2, u16(2), props(), str("a/b"), str("c/#")),
		Packet: &packet.Unsubscribe{PacketID: 2, Filters: []string{"a/b", "c/#"}},
	},
	{
		Name: "v5/unsubscribe/user-property", Version: packet.V5,
		Wire: frame(0xA2, u16(3), props(userProp("why", "done")), str("a")),
		Packet: &packet.Unsubscribe{PacketID: 3,
			Props:   packet.Properties{Has: has(pUserProperty), UserProperties: up("why", "done")},
			Filters: []string{"a"}},
	},
	{
		Name: "v5/unsubscribe/empty-filter", Version: packet.V5,
		Wire:   frame(0xA2, u16(4), props(), str("")),
		Packet: &packet.Unsubscribe{PacketID: 4, Filters: []string{""}},
	},
	{
		Name: "v5/unsuback/all-reason-codes", Version: packet.V5,
		Wire: frame(0xB0, u16(2), props(), bs(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)),
		Packet: &packet.Unsuback{PacketID: 2, ReasonCodes: []packet.ReasonCode{
			packet.Success, packet.NoSubscriptionExisted, packet.UnspecifiedError,
			packet.ImplementationSpecificError, packet.NotAuthorized, packet.TopicFilterInvalid,
			packet.PacketIdentifierInUse}},
	},
	{
		Name: "v5/unsuback/reason-string", Version: packet.V5,
		Wire: frame(0xB0, u16(3), props(prop(pReasonString, str("ok"))), bs(0)),
		Packet: &packet.Unsuback{PacketID: 3,
			Props:       packet.Properties{Has: has(pReasonString), ReasonString: "ok"},
			ReasonCodes: []packet.ReasonCode{packet.Success}},
	},
	{
		Name: "v5/pingreq", Version: packet.V5,
		Wire:   bs(0xC0, 0),
		Packet: packet.Pingreq{},
	},
	{
		Name: "v5/pingresp", Version: packet.V5,
		Wire:   bs(0xD0, 0),
		Packet: packet.Pingresp{},
	},
	{
		Name: "v5/disconnect/normal-empty", Version: packet.V5,
		Wire:   bs(0xE0, 0),
		Packet: &packet.Disconnect{},
	},
	{
		Name: "v5/disconnect/with-will-message", Version: packet.V5,
		Wire:   bs(0xE0, 1, 0x04),
		Packet: &packet.Disconnect{ReasonCode: packet.DisconnectWithWill},
	},
	{
		Name: "v5/disconnect/normal-explicit-code", Version: packet.V5,
		Wire:         bs(0xE0, 1, 0),
		Packet:       &packet.Disconnect{},
		Noncanonical: true,
	},
	{
		Name: "v5/disconnect/normal-empty-properties", Version: packet.V5,
		Wire:         bs(0xE0, 2, 0, 0),
		Packet:       &packet.Disconnect{},
		Noncanonical: true,
	},
	{
		Name: "v5/disconnect/session-expiry-from-client", Version: packet.V5,
		Wire: frame(0xE0, bs(0), props(prop(pSessionExpiry, u32(300)))),
		Packet: &packet.Disconnect{
			Props: packet.Properties{Has: has(pSessionExpiry), SessionExpiry: 300}},
	},
	{
		Name: "v5/disconnect/server-moved-all-properties", Version: packet.V5,
		Wire: frame(0xE0, bs(0x9D), props(prop(pSessionExpiry, u32(0)), prop(pServerReference, str("b:1883")),
			prop(pReasonString, str("moved")), userProp("k", "v"))),
		Packet: &packet.Disconnect{ReasonCode: packet.ServerMoved, Props: packet.Properties{
			Has:           has(pSessionExpiry, pServerReference, pReasonString, pUserProperty),
			SessionExpiry: 0, ServerReference: "b:1883", ReasonString: "moved", UserProperties: up("k", "v")}},
	},
	{
		Name: "v5/auth/success-empty", Version: packet.V5,
		Wire:   bs(0xF0, 0),
		Packet: &packet.Auth{},
	},
	{
		Name: "v5/auth/continue-empty-properties", Version: packet.V5,
		Wire:   bs(0xF0, 2, 0x18, 0),
		Packet: &packet.Auth{ReasonCode: packet.ContinueAuthentication},
	},
	{
		Name: "v5/auth/continue-code-only", Version: packet.V5,
		Wire:         bs(0xF0, 1, 0x18),
		Packet:       &packet.Auth{ReasonCode: packet.ContinueAuthentication},
		Noncanonical: true,
	},
	{
		Name: "v5/auth/continue-all-properties", Version: packet.V5,
		Wire: frame(0xF0, bs(0x18), props(prop(pAuthMethod, str("SCRAM-SHA-1")),
			prop(pAuthData, str("client-final")), prop(pReasonString, str("step 2")), userProp("k", "v"))),
		Packet: &packet.Auth{ReasonCode: packet.ContinueAuthentication, Props: packet.Properties{
			Has:        has(pAuthMethod, pAuthData, pReasonString, pUserProperty),
			AuthMethod: "SCRAM-SHA-1", AuthData: []byte("client-final"), ReasonString: "step 2",
			UserProperties: up("k", "v")}},
	},
	{
		Name: "v5/auth/re-authenticate", Version: packet.V5,
		Wire: frame(0xF0, bs(0x19), props(prop(pAuthMethod, str("SCRAM-SHA-1")))),
		Packet: &packet.Auth{ReasonCode: packet.ReAuthenticate,
			Props: packet.Properties{Has: has(pAuthMethod), AuthMethod: "SCRAM-SHA-1"}},
	},
}
