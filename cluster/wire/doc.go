// Package wire is the byte layout of the cluster's data plane: the frames
// one node sends another over a link, and the messages inside them. It is
// a pure codec: no I/O, no state, no locks; every function is safe for
// concurrent use. Signing (SharedSecret) wraps a frame from outside, in
// cluster/signing.
//
// # Frame
//
// A frame is the payload of one PUBLISH on a link (see cluster/dataplane):
//
//	byte     format, 3
//	string   sender: the NodeName of the node that sent it
//	uvarint  boot: the sender's incarnation (Unix ns when its data plane
//	         started); reliable sequence numbers restart with it
//	uvarint  decided: every quorum write of the sender's stream up to it
//	         is decided
//	uvarint  n, then n ascending uvarints: the refused ones among them
//	         that the receiver may hold (at most 4096)
//	record*  until the end of the frame:
//	  uvarint  seq: the record's number in the sender's reliable stream
//	           (1, 2, ...), 0 for a best-effort or control record
//	  uvarint  n, then n bytes: one message
//	  uvarint  count, then count strings: the shared subscriptions
//	           ($share/{group}/{filter}) the receiver delivers it to
//
// # Message
//
//	byte     flags: bits 0-1 QoS, bit 2 retain, bit 3 properties follow,
//	         bits 4-5 below
//	string   topic
//	string   publisher's client id ("" for LoT, connectors, the broker)
//	string   publisher's user name
//	byte     origin: where the message entered the sending node
//	bytes    payload
//	if bit 3:
//	  byte     payload format indicator
//	  string   content type
//	  string   response topic
//	  bytes    correlation data
//	  uvarint  expiry: Unix ns after which the message is dropped, 0 none
//	  uvarint  count, then count × (string name, string value): user properties
//	if bit 4 (a retained message's version):
//	  uvarint  Lamport counter
//	  string   node that wrote it
//	bit 5: the retained message is for the receiver's retained store only,
//	not its subscribers (a node catching up)
//
// string and bytes are a uvarint length followed by that many bytes. A
// message's encoding is independent of the frame and of its sequence
// number, so a node encodes a message once and puts the same bytes into
// the frames of every peer.
//
// Decoders never panic, never allocate more than the input can hold, and
// refuse a truncated or trailing byte, an unknown format, QoS 3 and an
// unknown flag bit (ErrCorrupt).
package wire
