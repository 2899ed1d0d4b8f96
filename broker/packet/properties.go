package packet

// PropID is a v5 property identifier.
type PropID byte

// Property identifiers (MQTT 5.0 section 2.2.2.2).
const (
	PropPayloadFormat        PropID = 0x01 // byte
	PropMessageExpiry        PropID = 0x02 // uint32
	PropContentType          PropID = 0x03 // string
	PropResponseTopic        PropID = 0x08 // string
	PropCorrelationData      PropID = 0x09 // binary
	PropSubscriptionID       PropID = 0x0B // variable byte integer (repeatable in PUBLISH)
	PropSessionExpiry        PropID = 0x11 // uint32
	PropAssignedClientID     PropID = 0x12 // string
	PropServerKeepAlive      PropID = 0x13 // uint16
	PropAuthMethod           PropID = 0x15 // string
	PropAuthData             PropID = 0x16 // binary
	PropRequestProblemInfo   PropID = 0x17 // byte
	PropWillDelay            PropID = 0x18 // uint32
	PropRequestResponseInfo  PropID = 0x19 // byte
	PropResponseInfo         PropID = 0x1A // string
	PropServerReference      PropID = 0x1C // string
	PropReasonString         PropID = 0x1F // string
	PropReceiveMaximum       PropID = 0x21 // uint16
	PropTopicAliasMaximum    PropID = 0x22 // uint16
	PropTopicAlias           PropID = 0x23 // uint16
	PropMaximumQoS           PropID = 0x24 // byte
	PropRetainAvailable      PropID = 0x25 // byte
	PropUserProperty         PropID = 0x26 // string pair (repeatable)
	PropMaximumPacketSize    PropID = 0x27 // uint32
	PropWildcardSubAvailable PropID = 0x28 // byte
	PropSubIDAvailable       PropID = 0x29 // byte
	PropSharedSubAvailable   PropID = 0x2A // byte
)

// Properties holds the v5 properties of any packet. Scalar properties are
// present only when their bit is set in Has (use Set/IsSet): a zero Message
// Expiry differs from none. String and binary properties are present when
// their bit is set or when they are non-empty. UserProperties and
// SubscriptionIDs repeat.
//
// Decoding allocates only for the string and binary properties actually
// present; a PUBLISH without properties decodes with no allocation.
type Properties struct {
	Has uint64 // bit i set: property with ID i present

	PayloadFormat       byte
	MessageExpiry       uint32
	ContentType         string
	ResponseTopic       string
	CorrelationData     []byte
	SubscriptionIDs     []uint32
	SessionExpiry       uint32
	AssignedClientID    string
	ServerKeepAlive     uint16
	AuthMethod          string
	AuthData            []byte
	RequestProblemInfo  byte
	WillDelay           uint32
	RequestResponseInfo byte
	ResponseInfo        string
	ServerReference     string
	ReasonString        string
	ReceiveMaximum      uint16
	TopicAliasMaximum   uint16
	TopicAlias          uint16
	MaximumQoS          byte
	RetainAvailable     byte
	UserProperties      []UserProperty
	MaximumPacketSize   uint32
	WildcardSubAvail    byte
	SubIDAvail          byte
	SharedSubAvail      byte
}

// IsSet reports whether property id is present.
func (p *Properties) IsSet(id PropID) bool { return p.Has&(1<<uint(id)) != 0 }

// Set marks property id present.
func (p *Properties) Set(id PropID) { p.Has |= 1 << uint(id) }

// Clear marks property id absent.
func (p *Properties) Clear(id PropID) { p.Has &^= 1 << uint(id) }
