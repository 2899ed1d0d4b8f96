package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"gantry/broker"
	"gantry/broker/packet"
)

// Format is the frame format this package writes and reads. Format 2
// added each record's replication part (Rep), format 3 the header's
// decisions (Decided, Refused) and the Decide flag, format 4 the
// header's Conn.
const Format = 4

// ErrCorrupt is returned for bytes that are not a frame or a message.
var ErrCorrupt = errors.New("wire: corrupt data-plane frame")

const (
	flagQoS       = 0x03
	flagRetain    = 0x04
	flagProps     = 0x08
	flagVersion   = 0x10 // a retained message's version follows the properties
	flagStoreOnly = 0x20 // a retained message for the receiver's store only, not its subscribers
	knownFlags    = flagQoS | flagRetain | flagProps | flagVersion | flagStoreOnly
	maxOrigin     = byte(broker.OriginBroker)
)

// Header is the start of a frame.
type Header struct {
	Sender string
	Boot   uint64
	// Conn numbers the sender's link connections, ascending within Boot
	// (0: not numbered). A receiver that failed to write a frame refuses
	// the frames that follow it on that connection: they were sent
	// before the sender learned of the failure, which it answers by
	// reconnecting and sending again from the failed frame.
	Conn uint64
	// Decided: every quorum write of the sender's stream numbered up to
	// Decided was decided, acknowledged or refused; Refused lists the
	// refused ones the receiver may hold (ascending). A copy delivers a
	// record marked Decide only once Decided covers it, and never a
	// refused one (two-phase delivery, see cluster/dataplane).
	Decided uint64
	Refused []uint64
}

// maxRefused bounds a header's Refused list.
const maxRefused = 4096

// AppendHeader appends a frame's header to dst, without decisions.
func AppendHeader(dst []byte, sender string, boot, conn uint64) []byte {
	return AppendHeaderDecided(dst, sender, boot, conn, 0, nil)
}

// AppendHeaderDecided appends a frame's header with the sender's
// decisions to dst; refused must be ascending, at most 4096 numbers.
func AppendHeaderDecided(dst []byte, sender string, boot, conn, decided uint64, refused []uint64) []byte {
	dst = append(dst, Format)
	dst = appendString(dst, sender)
	dst = binary.AppendUvarint(dst, boot)
	dst = binary.AppendUvarint(dst, conn)
	dst = binary.AppendUvarint(dst, decided)
	dst = binary.AppendUvarint(dst, uint64(len(refused)))
	for _, r := range refused {
		dst = binary.AppendUvarint(dst, r)
	}
	return dst
}

// AppendRecord appends one record, a message encoded by AppendMessage
// with its sequence number (0: best effort) and the shared subscriptions
// the receiver delivers it to (usually none), to a frame.
func AppendRecord(dst []byte, seq uint64, msg []byte, groups []string) []byte {
	return AppendRecordRep(dst, seq, msg, groups, nil)
}

// AppendRecordRep is AppendRecord with the record's replication part
// (nil: none).
func AppendRecordRep(dst []byte, seq uint64, msg []byte, groups []string, rep *Rep) []byte {
	dst = binary.AppendUvarint(dst, seq)
	dst = appendBytes(dst, msg)
	dst = binary.AppendUvarint(dst, uint64(len(groups)))
	for _, g := range groups {
		dst = appendString(dst, g)
	}
	if rep == nil {
		return append(dst, 0)
	}
	dst = append(dst, rep.flags())
	if rep.Copy {
		dst = binary.AppendUvarint(dst, uint64(rep.Partition))
		dst = binary.AppendUvarint(dst, rep.Epoch)
	}
	if rep.PacketID != 0 {
		dst = binary.AppendUvarint(dst, uint64(rep.PacketID))
	}
	if rep.Origin != "" {
		dst = appendString(dst, rep.Origin)
		dst = binary.AppendUvarint(dst, rep.OriginBoot)
		dst = binary.AppendUvarint(dst, rep.OriginSeq)
		dst = binary.AppendUvarint(dst, uint64(rep.At))
	}
	return dst
}

// RecordSize is the number of bytes AppendRecord adds.
func RecordSize(seq uint64, msg []byte, groups []string) int {
	return RecordSizeRep(seq, msg, groups, nil)
}

// RecordSizeRep is the number of bytes AppendRecordRep adds.
func RecordSizeRep(seq uint64, msg []byte, groups []string, rep *Rep) int {
	n := uvarintSize(seq) + uvarintSize(uint64(len(msg))) + len(msg) + uvarintSize(uint64(len(groups))) + 1
	for _, g := range groups {
		n += uvarintSize(uint64(len(g))) + len(g)
	}
	if rep != nil {
		if rep.Copy {
			n += uvarintSize(uint64(rep.Partition)) + uvarintSize(rep.Epoch)
		}
		if rep.PacketID != 0 {
			n += uvarintSize(uint64(rep.PacketID))
		}
		if rep.Origin != "" {
			n += uvarintSize(uint64(len(rep.Origin))) + len(rep.Origin) + uvarintSize(rep.OriginBoot) +
				uvarintSize(rep.OriginSeq) + uvarintSize(uint64(rep.At))
		}
	}
	return n
}

// ParseHeader reads a frame's header and returns the records that follow.
func ParseHeader(frame []byte) (Header, []byte, error) {
	r := reader{b: frame}
	if f := r.byte(); r.err == nil && f != Format {
		return Header{}, nil, fmt.Errorf("%w: format %d, want %d", ErrCorrupt, f, Format)
	}
	h := Header{Sender: r.string(), Boot: r.uvarint(), Conn: r.uvarint(), Decided: r.uvarint()}
	if n := r.count(1); n > maxRefused {
		r.fail("refused list")
	} else if n > 0 {
		h.Refused = make([]uint64, n)
		for i := range h.Refused {
			h.Refused[i] = r.uvarint()
			if i > 0 && h.Refused[i] <= h.Refused[i-1] {
				r.fail("refused list order")
			}
		}
	}
	if r.err != nil {
		return Header{}, nil, r.err
	}
	if h.Sender == "" {
		return Header{}, nil, fmt.Errorf("%w: no sender", ErrCorrupt)
	}
	return h, r.b, nil
}

// Record is one record of a frame.
type Record struct {
	Seq    uint64   // 0: best effort
	Msg    []byte   // the message's encoding; aliases the frame
	Groups []string // shared subscriptions the receiver delivers it to
	Rep    Rep      // the replication part; zero for most records
}

// Rep is what a record carries for replication (issue 14's partition
// copies):
//
//	byte     flags: bit 0 Copy, bit 1 origin follows, bit 2 CopyOnly,
//	         bit 3 packet id follows, bit 4 Decide
//	if Copy:      uvarint partition, uvarint epoch
//	if packet id: uvarint packet id
//	if origin:    string origin, uvarint boot, uvarint seq, uvarint at
type Rep struct {
	// Copy: the receiver is one of the partition's copies and stores the
	// record in its log of Partition before it confirms, unless Epoch is
	// older than the partition's epoch it knows (a deposed map).
	Copy      bool
	Partition uint32
	Epoch     uint64
	// CopyOnly: stored as a copy, not delivered (filling a new copy).
	CopyOnly bool
	// Decide: the sender decides the record's quorum write; a copy holds
	// its delivery until a header's Decided covers it, and drops it if
	// the write was refused.
	Decide bool
	// PacketID is a QoS 2 message's packet identifier at its publisher:
	// with the publisher's client id it lets a copy recognise the message
	// resent (DUP) on another node after a failover. 0: none.
	PacketID uint16
	// Origin, OriginBoot, OriginSeq name the record in the stream of the
	// node it entered, when another node sends it (a failover replay or
	// a new copy's fill); At is when it was accepted there (Unix ns).
	Origin     string
	OriginBoot uint64
	OriginSeq  uint64
	At         int64
}

const (
	repCopy     = 0x01
	repOrigin   = 0x02
	repCopyOnly = 0x04
	repPacketID = 0x08
	repDecide   = 0x10
	repKnown    = repCopy | repOrigin | repCopyOnly | repPacketID | repDecide
)

func (r *Rep) flags() byte {
	var f byte
	if r.Copy {
		f |= repCopy
	}
	if r.Origin != "" {
		f |= repOrigin
	}
	if r.CopyOnly {
		f |= repCopyOnly
	}
	if r.PacketID != 0 {
		f |= repPacketID
	}
	if r.Decide {
		f |= repDecide
	}
	return f
}

// NextRecord reads the record at the start of records and returns the
// rest.
func NextRecord(records []byte) (Record, []byte, error) {
	r := reader{b: records}
	rec := Record{Seq: r.uvarint(), Msg: r.bytes()}
	if n := r.count(1); n > 0 {
		rec.Groups = make([]string, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			rec.Groups = append(rec.Groups, r.string())
		}
	}
	f := r.byte()
	if r.err == nil && f&^repKnown != 0 {
		return Record{}, nil, fmt.Errorf("%w: record flags %#x", ErrCorrupt, f)
	}
	if f&repCopy != 0 {
		p := r.uvarint()
		if p > 1<<32-1 {
			r.fail("partition")
		}
		rec.Rep.Copy, rec.Rep.Partition, rec.Rep.Epoch = true, uint32(p), r.uvarint()
	}
	if f&repPacketID != 0 {
		id := r.uvarint()
		if id == 0 || id > 0xffff {
			r.fail("packet id")
		}
		rec.Rep.PacketID = uint16(id)
	}
	if f&repOrigin != 0 {
		rec.Rep.Origin, rec.Rep.OriginBoot, rec.Rep.OriginSeq = r.string(), r.uvarint(), r.uvarint()
		rec.Rep.At = int64(r.uvarint())
		if rec.Rep.Origin == "" {
			r.fail("origin")
		}
	}
	rec.Rep.CopyOnly = f&repCopyOnly != 0
	rec.Rep.Decide = f&repDecide != 0
	if r.err != nil {
		return Record{}, nil, r.err
	}
	return rec, r.b, nil
}

// Version orders the writes of one retained topic cluster-wide: a
// Lamport counter, then the writing node's name; the higher wins.
type Version struct {
	Counter uint64
	Node    string
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Counter < w.Counter || (v.Counter == w.Counter && v.Node < w.Node)
}

// AppendMessage appends m's encoding to dst.
func AppendMessage(dst []byte, m *broker.Message) []byte {
	return AppendRetained(dst, m, Version{}, false)
}

// AppendRetained appends m's encoding with a retained message's version
// (none when v is zero) and, with storeOnly, marked for the receiver's
// retained store only.
func AppendRetained(dst []byte, m *broker.Message, v Version, storeOnly bool) []byte {
	flags := m.QoS & flagQoS
	if m.Retain {
		flags |= flagRetain
	}
	props := m.PayloadFormat != 0 || m.ContentType != "" || m.ResponseTopic != "" ||
		len(m.CorrelationData) > 0 || m.ExpiresAt != 0 || len(m.UserProperties) > 0
	if props {
		flags |= flagProps
	}
	if v != (Version{}) {
		flags |= flagVersion
	}
	if storeOnly {
		flags |= flagStoreOnly
	}
	dst = append(dst, flags)
	dst = appendString(dst, m.Topic)
	dst = appendString(dst, m.ClientID)
	dst = appendString(dst, m.Username)
	dst = append(dst, byte(m.Origin))
	dst = appendBytes(dst, m.Payload)
	if props {
		dst = appendProps(dst, m)
	}
	if v != (Version{}) {
		dst = binary.AppendUvarint(dst, v.Counter)
		dst = appendString(dst, v.Node)
	}
	return dst
}

func appendProps(dst []byte, m *broker.Message) []byte {
	dst = append(dst, m.PayloadFormat)
	dst = appendString(dst, m.ContentType)
	dst = appendString(dst, m.ResponseTopic)
	dst = appendBytes(dst, m.CorrelationData)
	dst = binary.AppendUvarint(dst, uint64(max(m.ExpiresAt, 0)))
	dst = binary.AppendUvarint(dst, uint64(len(m.UserProperties)))
	for _, up := range m.UserProperties {
		dst = appendString(dst, up.Key)
		dst = appendString(dst, up.Value)
	}
	return dst
}

// Decoded is a message read from a frame, with the origin it had on the
// sending node (the receiver delivers it as broker.OriginPeer).
type Decoded struct {
	Msg        *broker.Message
	SentOrigin broker.Origin
	Version    Version // of a retained message; zero when none was sent
	StoreOnly  bool    // for the retained store only
}

// Peek is the start of a message's encoding, read without decoding the
// message: its slices alias the encoding.
type Peek struct {
	QoS                       byte
	Topic, ClientID, Username []byte
	Payload                   []byte
	flags, origin             byte
}

// PeekMessage reads what a copy that is only stored needs of a message
// (its publisher, topic and payload: the QoS 2 index), allocating
// nothing; DecodeMessage reads it whole when it is delivered.
func PeekMessage(b []byte) (Peek, error) {
	r := reader{b: b}
	return peek(&r)
}

// peek reads a message's start, up to its payload, from r.
func peek(r *reader) (Peek, error) {
	flags := r.byte()
	if r.err == nil && (flags&^knownFlags != 0 || flags&flagQoS == 3) {
		return Peek{}, fmt.Errorf("%w: message flags %#x", ErrCorrupt, flags)
	}
	pk := Peek{QoS: flags & flagQoS, flags: flags, Topic: r.bytes(), ClientID: r.bytes(), Username: r.bytes(), origin: r.byte()}
	if r.err == nil && pk.origin > maxOrigin {
		return Peek{}, fmt.Errorf("%w: origin %d", ErrCorrupt, pk.origin)
	}
	pk.Payload = r.bytes()
	return pk, r.err
}

// DecodeMessage reads one message. Its fields are owned copies, and its
// Origin is broker.OriginPeer.
func DecodeMessage(b []byte) (Decoded, error) {
	r := reader{b: b}
	pk, err := peek(&r)
	if err != nil {
		return Decoded{}, err
	}
	flags, origin := pk.flags, pk.origin
	m := &broker.Message{QoS: pk.QoS, Retain: flags&flagRetain != 0, Origin: broker.OriginPeer,
		Topic: string(pk.Topic), ClientID: string(pk.ClientID), Username: string(pk.Username), Payload: cloneBytes(pk.Payload)}
	if flags&flagProps != 0 {
		m.PayloadFormat = r.byte()
		m.ContentType, m.ResponseTopic = r.string(), r.string()
		m.CorrelationData = cloneBytes(r.bytes())
		exp := r.uvarint()
		if exp > 1<<62 {
			r.fail("expiry")
		}
		m.ExpiresAt = int64(exp)
		n := r.count(2)
		if n > 0 {
			m.UserProperties = make([]packet.UserProperty, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			m.UserProperties = append(m.UserProperties, packet.UserProperty{Key: r.string(), Value: r.string()})
		}
	}
	var v Version
	if flags&flagVersion != 0 {
		v = Version{Counter: r.uvarint(), Node: r.string()}
		if r.err == nil && v == (Version{}) {
			r.fail("empty version")
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Decoded{}, r.err
	}
	return Decoded{Msg: m, SentOrigin: broker.Origin(origin), Version: v, StoreOnly: flags&flagStoreOnly != 0}, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// reader consumes bytes; the first fault sticks in err and later reads
// return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items of at least min bytes each, refusing one
// the rest of the input cannot hold.
func (r *reader) count(min int) int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.b)/min) {
		r.fail("count beyond the input")
		return 0
	}
	return int(v)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("length beyond the input")
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) string() string { return string(r.bytes()) }

// AppendFilters appends an interest announcement: op (InterestSnapshot or
// InterestAdd) and the filters, as a uvarint count and strings. It is the
// payload of a control message on the topic InterestTopic.
func AppendFilters(dst []byte, op byte, filters []string) []byte {
	dst = append(dst, op)
	dst = binary.AppendUvarint(dst, uint64(len(filters)))
	for _, f := range filters {
		dst = appendString(dst, f)
	}
	return dst
}

// Interest announcement operations.
const (
	InterestSnapshot = 'S' // the sender's whole interest: replaces what it said before
	InterestAdd      = '+' // filters the sender now has as well
	// RetainedAsk asks the receiver for its retained messages (a node
	// without the cluster's: in memory, or new); the receiver sends them
	// as store-only records, then RetainedSent, in its reliable stream.
	RetainedAsk  = '?'
	RetainedSent = '='
)

// InterestTopic is the topic of interest announcements inside frames.
const InterestTopic = "$cluster/v1/interest"

// DecodeFilters reads an interest announcement.
func DecodeFilters(b []byte) (op byte, filters []string, err error) {
	r := reader{b: b}
	op = r.byte()
	if r.err == nil && op != InterestSnapshot && op != InterestAdd && op != RetainedAsk && op != RetainedSent {
		return 0, nil, fmt.Errorf("%w: interest operation %q", ErrCorrupt, op)
	}
	n := r.count(1)
	filters = make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		filters = append(filters, r.string())
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return 0, nil, r.err
	}
	return op, filters, nil
}
