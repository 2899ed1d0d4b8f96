package packet

// Type is the MQTT control packet type (the high nibble of the first byte).
type Type byte

// Control packet types.
const (
	CONNECT     Type = 1
	CONNACK     Type = 2
	PUBLISH     Type = 3
	PUBACK      Type = 4
	PUBREC      Type = 5
	PUBREL      Type = 6
	PUBCOMP     Type = 7
	SUBSCRIBE   Type = 8
	SUBACK      Type = 9
	UNSUBSCRIBE Type = 10
	UNSUBACK    Type = 11
	PINGREQ     Type = 12
	PINGRESP    Type = 13
	DISCONNECT  Type = 14
	AUTH        Type = 15
)

var typeNames = [...]string{"RESERVED", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL",
	"PUBCOMP", "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "INVALID"
}

// Version is the protocol level carried in CONNECT.
type Version byte

// Protocol levels.
const (
	V31  Version = 3 // MQTT 3.1 ("MQIsdp")
	V311 Version = 4 // MQTT 3.1.1
	V5   Version = 5 // MQTT 5.0
)

// MaxRemainingLength is the largest Remaining Length the variable byte
// integer can express (268,435,455).
const MaxRemainingLength = 268435455

// FixedHeader is the first 2..5 bytes of every packet.
type FixedHeader struct {
	Type      Type
	Flags     byte // low nibble of the first byte
	Remaining int  // Remaining Length: bytes after the fixed header
}

// Subscription options (v5 byte; v3 uses only QoS).
type SubOptions struct {
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte // 0, 1 or 2
}

// Subscription is one topic filter of a SUBSCRIBE.
type Subscription struct {
	Filter  string
	Options SubOptions
}

// UserProperty is a v5 User Property (key/value pair; may repeat).
type UserProperty struct {
	Key, Value string
}

// Connect is the CONNECT packet.
type Connect struct {
	ProtocolName string // "MQTT" or "MQIsdp"
	Version      Version
	CleanStart   bool // Clean Session in v3
	KeepAlive    uint16
	ClientID     string
	Props        Properties

	WillFlag    bool
	WillQoS     byte
	WillRetain  bool
	WillProps   Properties // v5 will properties
	WillTopic   string
	WillPayload []byte // owned copy

	UsernameFlag bool
	Username     string
	PasswordFlag bool
	Password     []byte // owned copy
}

// Connack is the CONNACK packet. ReasonCode is the v5 reason code; on v3 it
// is mapped to the v3 return code by the encoder (see V3ConnackCode).
type Connack struct {
	SessionPresent bool
	ReasonCode     ReasonCode
	Props          Properties
}

// Publish is the PUBLISH packet. After Decode, Topic and Payload reference
// the decoded buffer: copy them before the buffer is reused.
type Publish struct {
	Dup      bool
	QoS      byte
	Retain   bool
	Topic    []byte
	PacketID uint16 // 0 for QoS 0
	Props    Properties
	Payload  []byte
}

// Ack is PUBACK, PUBREC, PUBREL or PUBCOMP (they share one layout).
type Ack struct {
	Type       Type
	PacketID   uint16
	ReasonCode ReasonCode
	Props      Properties
}

// Subscribe is the SUBSCRIBE packet.
type Subscribe struct {
	PacketID      uint16
	Props         Properties // SubscriptionIdentifier (at most one), UserProperties
	Subscriptions []Subscription
}

// Suback is the SUBACK packet: one reason code per subscription. On v3 the
// encoder writes granted QoS 0..2 as is and any code >= 0x80 as 0x80.
type Suback struct {
	PacketID    uint16
	Props       Properties
	ReasonCodes []ReasonCode
}

// Unsubscribe is the UNSUBSCRIBE packet.
type Unsubscribe struct {
	PacketID uint16
	Props    Properties
	Filters  []string
}

// Unsuback is the UNSUBACK packet (v3 carries no reason codes).
type Unsuback struct {
	PacketID    uint16
	Props       Properties
	ReasonCodes []ReasonCode
}

// Disconnect is the DISCONNECT packet (v3: no body).
type Disconnect struct {
	ReasonCode ReasonCode
	Props      Properties
}

// Auth is the AUTH packet (v5 only).
type Auth struct {
	ReasonCode ReasonCode
	Props      Properties
}
