package packet

// codeSet is a set of reason codes, one bit per code.
type codeSet [4]uint64

func newCodeSet(codes ...ReasonCode) codeSet {
	var s codeSet
	for _, c := range codes {
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

func (s *codeSet) has(c ReasonCode) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// Reason codes each v5 packet type may carry (MQTT 5.0 section 2.4 and the
// packet sections). A code outside its set is a ProtocolError.
var (
	connackCodes = newCodeSet(Success, UnspecifiedError, MalformedPacket, ProtocolError,
		ImplementationSpecificError, UnsupportedProtocolVersion, ClientIdentifierNotValid,
		BadUserNameOrPassword, NotAuthorized, ServerUnavailable, ServerBusy, Banned,
		BadAuthenticationMethod, TopicNameInvalid, PacketTooLarge, QuotaExceeded,
		PayloadFormatInvalid, RetainNotSupported, QoSNotSupported, UseAnotherServer,
		ServerMoved, ConnectionRateExceeded)
	pubackCodes = newCodeSet(Success, NoMatchingSubscribers, UnspecifiedError,
		ImplementationSpecificError, NotAuthorized, TopicNameInvalid, PacketIdentifierInUse,
		QuotaExceeded, PayloadFormatInvalid)
	pubrelCodes = newCodeSet(Success, PacketIdentifierNotFound)
	subackCodes = newCodeSet(Success, GrantedQoS1, GrantedQoS2, UnspecifiedError,
		ImplementationSpecificError, NotAuthorized, TopicFilterInvalid, PacketIdentifierInUse,
		QuotaExceeded, SharedSubNotSupported, SubIDsNotSupported, WildcardSubsNotSupported)
	subackCodesV3 = newCodeSet(Success, GrantedQoS1, GrantedQoS2, UnspecifiedError)
	unsubackCodes = newCodeSet(Success, NoSubscriptionExisted, UnspecifiedError,
		ImplementationSpecificError, NotAuthorized, TopicFilterInvalid, PacketIdentifierInUse)
	disconnectCodes = newCodeSet(Success, DisconnectWithWill, UnspecifiedError, MalformedPacket,
		ProtocolError, ImplementationSpecificError, NotAuthorized, ServerBusy, ServerShuttingDown,
		KeepAliveTimeout, SessionTakenOver, TopicFilterInvalid, TopicNameInvalid,
		ReceiveMaximumExceeded, TopicAliasInvalid, PacketTooLarge, MessageRateTooHigh,
		QuotaExceeded, AdministrativeAction, PayloadFormatInvalid, RetainNotSupported,
		QoSNotSupported, UseAnotherServer, ServerMoved, SharedSubNotSupported,
		ConnectionRateExceeded, MaximumConnectTime, SubIDsNotSupported, WildcardSubsNotSupported)
	authCodes = newCodeSet(Success, ContinueAuthentication, ReAuthenticate)
)

// ackCodes returns the reason codes allowed in an ack of type t.
func ackCodes(t Type) *codeSet {
	if t == PUBREL || t == PUBCOMP {
		return &pubrelCodes
	}
	return &pubackCodes
}

// v3ConnackCodes maps a v3 CONNACK return code (the index) to the v5 reason
// code; it inverts V3ConnackCode.
var v3ConnackCodes = [...]ReasonCode{
	0: Success,
	1: UnsupportedProtocolVersion,
	2: ClientIdentifierNotValid,
	3: ServerUnavailable,
	4: BadUserNameOrPassword,
	5: NotAuthorized,
}

// ConnackCodeFromV3 maps a v3.1/3.1.1 CONNACK return code (0..5) to the v5
// reason code that V3ConnackCode maps back to it. ok is false for the
// reserved codes 6..255.
func ConnackCodeFromV3(code byte) (c ReasonCode, ok bool) {
	if int(code) >= len(v3ConnackCodes) {
		return 0, false
	}
	return v3ConnackCodes[code], true
}

// v3SubackCode maps a SUBACK reason code to the v3 return code: granted QoS
// 0, 1, 2 as is, any failure as 0x80.
func v3SubackCode(c ReasonCode) byte {
	if c.IsError() {
		return 0x80
	}
	return byte(c)
}

// decodeReasonAndProps decodes the v5 DISCONNECT/AUTH body: an optional
// reason code (Success when absent) and optional properties.
func decodeReasonAndProps(body []byte, allowed *codeSet, ctx propContext,
	code *ReasonCode, props *Properties) error {
	r := reader{buf: body}
	if r.empty() {
		return nil
	}
	b, err := r.readByte()
	if err != nil {
		return err
	}
	*code = ReasonCode(b)
	if !allowed.has(*code) {
		return ProtocolError
	}
	if r.empty() {
		return nil
	}
	if err := decodeProperties(&r, ctx, props); err != nil {
		return err
	}
	return r.expectEnd()
}

// reasonAndPropsSize is the size of a v5 "reason code, properties" tail
// in its shortest form: nothing for Success without properties, the code
// alone without properties, else code, length and properties. propsSize
// excludes the length prefix.
func reasonAndPropsSize(code ReasonCode, propsSize int) int {
	switch {
	case propsSize == 0 && code == Success:
		return 0
	case propsSize == 0:
		return 1
	default:
		return 1 + varintSize(propsSize) + propsSize
	}
}

// appendReasonAndProps appends the tail sized by reasonAndPropsSize.
func appendReasonAndProps(dst []byte, code ReasonCode, p *Properties, ctx propContext, propsSize int) []byte {
	switch {
	case propsSize == 0 && code == Success:
		return dst
	case propsSize == 0:
		return append(dst, byte(code))
	default:
		return appendPropertiesSized(append(dst, byte(code)), p, ctx, propsSize)
	}
}
