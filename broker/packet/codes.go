package packet

import "fmt"

// ReasonCode is an MQTT 5 reason code. It implements error, so a refusal
// travels through ordinary returns and is sent to the client as is.
type ReasonCode byte

// Reason codes (MQTT 5.0 section 2.4).
const (
	Success                     ReasonCode = 0x00 // also Normal disconnection, Granted QoS 0
	GrantedQoS1                 ReasonCode = 0x01
	GrantedQoS2                 ReasonCode = 0x02
	DisconnectWithWill          ReasonCode = 0x04
	NoMatchingSubscribers       ReasonCode = 0x10
	NoSubscriptionExisted       ReasonCode = 0x11
	ContinueAuthentication      ReasonCode = 0x18
	ReAuthenticate              ReasonCode = 0x19
	UnspecifiedError            ReasonCode = 0x80
	MalformedPacket             ReasonCode = 0x81
	ProtocolError               ReasonCode = 0x82
	ImplementationSpecificError ReasonCode = 0x83
	UnsupportedProtocolVersion  ReasonCode = 0x84
	ClientIdentifierNotValid    ReasonCode = 0x85
	BadUserNameOrPassword       ReasonCode = 0x86
	NotAuthorized               ReasonCode = 0x87
	ServerUnavailable           ReasonCode = 0x88
	ServerBusy                  ReasonCode = 0x89
	Banned                      ReasonCode = 0x8A
	ServerShuttingDown          ReasonCode = 0x8B
	BadAuthenticationMethod     ReasonCode = 0x8C
	KeepAliveTimeout            ReasonCode = 0x8D
	SessionTakenOver            ReasonCode = 0x8E
	TopicFilterInvalid          ReasonCode = 0x8F
	TopicNameInvalid            ReasonCode = 0x90
	PacketIdentifierInUse       ReasonCode = 0x91
	PacketIdentifierNotFound    ReasonCode = 0x92
	ReceiveMaximumExceeded      ReasonCode = 0x93
	TopicAliasInvalid           ReasonCode = 0x94
	PacketTooLarge              ReasonCode = 0x95
	MessageRateTooHigh          ReasonCode = 0x96
	QuotaExceeded               ReasonCode = 0x97
	AdministrativeAction        ReasonCode = 0x98
	PayloadFormatInvalid        ReasonCode = 0x99
	RetainNotSupported          ReasonCode = 0x9A
	QoSNotSupported             ReasonCode = 0x9B
	UseAnotherServer            ReasonCode = 0x9C
	ServerMoved                 ReasonCode = 0x9D
	SharedSubNotSupported       ReasonCode = 0x9E
	ConnectionRateExceeded      ReasonCode = 0x9F
	MaximumConnectTime          ReasonCode = 0xA0
	SubIDsNotSupported          ReasonCode = 0xA1
	WildcardSubsNotSupported    ReasonCode = 0xA2
)

var reasonNames = map[ReasonCode]string{
	Success: "success", GrantedQoS1: "granted QoS 1", GrantedQoS2: "granted QoS 2",
	DisconnectWithWill: "disconnect with will message", NoMatchingSubscribers: "no matching subscribers",
	NoSubscriptionExisted: "no subscription existed", ContinueAuthentication: "continue authentication",
	ReAuthenticate: "re-authenticate", UnspecifiedError: "unspecified error", MalformedPacket: "malformed packet",
	ProtocolError: "protocol error", ImplementationSpecificError: "implementation specific error",
	UnsupportedProtocolVersion: "unsupported protocol version", ClientIdentifierNotValid: "client identifier not valid",
	BadUserNameOrPassword: "bad user name or password", NotAuthorized: "not authorized",
	ServerUnavailable: "server unavailable", ServerBusy: "server busy", Banned: "banned",
	ServerShuttingDown: "server shutting down", BadAuthenticationMethod: "bad authentication method",
	KeepAliveTimeout: "keep alive timeout", SessionTakenOver: "session taken over",
	TopicFilterInvalid: "topic filter invalid", TopicNameInvalid: "topic name invalid",
	PacketIdentifierInUse: "packet identifier in use", PacketIdentifierNotFound: "packet identifier not found",
	ReceiveMaximumExceeded: "receive maximum exceeded", TopicAliasInvalid: "topic alias invalid",
	PacketTooLarge: "packet too large", MessageRateTooHigh: "message rate too high", QuotaExceeded: "quota exceeded",
	AdministrativeAction: "administrative action", PayloadFormatInvalid: "payload format invalid",
	RetainNotSupported: "retain not supported", QoSNotSupported: "QoS not supported",
	UseAnotherServer: "use another server", ServerMoved: "server moved",
	SharedSubNotSupported: "shared subscriptions not supported", ConnectionRateExceeded: "connection rate exceeded",
	MaximumConnectTime: "maximum connect time", SubIDsNotSupported: "subscription identifiers not supported",
	WildcardSubsNotSupported: "wildcard subscriptions not supported",
}

// Error implements error.
func (c ReasonCode) Error() string {
	if n, ok := reasonNames[c]; ok {
		return fmt.Sprintf("mqtt: %s (0x%02X)", n, byte(c))
	}
	return fmt.Sprintf("mqtt: reason code 0x%02X", byte(c))
}

// IsError reports whether the code signals failure (0x80 and above).
func (c ReasonCode) IsError() bool { return c >= 0x80 }

// V3ConnackCode maps a v5 CONNACK reason code to the v3.1/3.1.1 return code.
func V3ConnackCode(c ReasonCode) byte {
	switch c {
	case Success:
		return 0
	case UnsupportedProtocolVersion:
		return 1
	case ClientIdentifierNotValid:
		return 2
	case ServerUnavailable, ServerBusy, ServerShuttingDown, UseAnotherServer, ServerMoved, ConnectionRateExceeded:
		return 3
	case BadUserNameOrPassword, BadAuthenticationMethod:
		return 4
	default:
		return 5 // not authorized
	}
}
