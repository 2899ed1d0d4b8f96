// Package packet is Gantry's MQTT wire codec for MQTT 3.1, 3.1.1 and 5.0.
//
// It owns the byte layout of every control packet and nothing else: it does
// no I/O, keeps no session state and makes no policy decision (topic
// validity, topic alias ranges, authorisation and quotas belong to the
// broker). It depends only on the standard library.
//
// # Reading
//
// A reader calls DecodeFixedHeader on the bytes received so far; ErrShort
// means more bytes are needed. Once h.Remaining bytes of body are available
// it passes exactly those bytes to Decode, or to the DecodeXxx function of
// the type. The decoders:
//
//   - never panic on any input and never allocate in proportion to a length
//     read from the wire before checking that those bytes are present;
//   - reject any missing or trailing byte;
//   - reset the destination struct before filling it; on error it holds
//     what was decoded before the fault (DecodeConnect relies on this to
//     report the version of an unsupported CONNECT).
//
// Invariant: a decoded Publish's Topic and Payload reference the body that
// was decoded (no copy, no allocation): copy them before the buffer is
// reused. Every other decoded string or byte slice (Connect.Password,
// Connect.WillPayload, properties, filters) is an owned copy. Empty byte
// slices decode as nil. After decoding, Properties.Has holds a bit for every
// property present on the wire, including strings, binaries and the
// repeated UserProperty and SubscriptionID.
//
// # Writing
//
// Every packet has Size(v), the exact encoded length including the fixed
// header, so the broker can enforce a peer's Maximum Packet Size before
// encoding, and Append(dst, v), which appends the whole packet and never
// allocates when dst has the capacity. For a v3 version the v5-only fields
// (properties, reason codes of acks, UNSUBACK and DISCONNECT) are left out;
// v5 acks, DISCONNECT and AUTH use the shortest form the spec allows. The
// encoder writes only the properties allowed in that packet (for example a
// TopicAlias set on a Connack is not written), in ascending identifier
// order. Strings and binaries longer than 65,535 bytes are cut to 65,535
// bytes; a Remaining Length above MaxRemainingLength is written with a fifth
// length byte that every decoder rejects: callers check Size first.
//
// # Errors
//
// Every decoding error is a ReasonCode (or ErrShort from DecodeFixedHeader):
//
//   - MalformedPacket: the bytes cannot be read as the packet: truncated or
//     trailing bytes, a fifth Remaining Length byte, invalid fixed-header
//     flags, reserved type 0, AUTH in v3, QoS 3 (PUBLISH, Will, subscription
//     options), Retain Handling 3, reserved bits set (CONNECT flags bit 0,
//     CONNACK flags, subscription options), Will QoS or Will Retain without
//     the Will flag, DUP on QoS 0, a v3 password without user name, invalid
//     UTF-8 or U+0000 in a string, Packet Identifier 0 where one is required
//     (all versions), and a property identifier unknown or not allowed in
//     that packet (MQTT 5.0 section 2.2.2.2).
//   - ProtocolError: the packet reads but breaks a rule: a property given
//     twice where it may not repeat, a property value out of range (Payload
//     Format, Request Problem/Response Information, Maximum QoS and the
//     "available" flags above 1; Receive Maximum, Maximum Packet Size or
//     Subscription Identifier 0), Authentication Data without Authentication
//     Method, SUBSCRIBE or UNSUBSCRIBE without any topic filter, SUBACK or v5
//     UNSUBACK without reason codes, a reason code not defined for the packet
//     type, and a CONNACK with Session Present on a refusal.
//   - UnsupportedProtocolVersion: a CONNECT whose protocol name and level are
//     not "MQTT" 4, "MQTT" 5 or "MQIsdp" 3. ProtocolName and Version are
//     filled anyway so the broker can answer in the matching CONNACK format.
//
// Non-minimal variable byte integers are accepted on input; the encoder
// always writes the minimal form.
//
// The package has no mutable shared state: all functions are safe for
// concurrent use on distinct packets and buffers.
package packet

//go:generate go test -run=TestFuzzCorpusMatchesFixtures -update-fuzz-corpus .
