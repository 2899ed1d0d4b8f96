package broker

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gantry/broker/packet"
)

// Origin says where a message entered the broker.
type Origin uint8

// Origins of a message.
const (
	OriginClient    Origin = iota // an MQTT client of this node
	OriginPeer                    // another node of the cluster: delivered, never forwarded again, never triggers LoT
	OriginLoT                     // a LoT action or model
	OriginConnector               // a device connector
	OriginBroker                  // the broker itself ($SYS, wills)
)

var originNames = [...]string{"client", "peer", "lot", "connector", "broker"}

func (o Origin) String() string {
	if int(o) < len(originNames) {
		return originNames[o]
	}
	return "unknown"
}

// Message is one application message as routed inside the broker. It is
// immutable once routed: every subscriber's delivery shares the same value.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool

	// v5 properties passed through unchanged.
	PayloadFormat   byte // 0 unspecified bytes, 1 UTF-8
	ContentType     string
	ResponseTopic   string
	CorrelationData []byte
	UserProperties  []packet.UserProperty

	// ExpiresAt is the Unix time in nanoseconds after which the message is
	// dropped; 0 means it never expires.
	ExpiresAt int64

	Origin   Origin
	ClientID string // publisher's client identifier (no-local); node name for peers
	Username string // publisher's user name, "" if anonymous or not a client
	// PacketID and Dup are a client's QoS 2 PUBLISH's packet identifier
	// and DUP flag (0 and false otherwise): the cluster recognises a QoS 2
	// message resent on another node after a failover by them.
	PacketID uint16
	Dup      bool
	// Hops counts the LoT actions that led to this message: 0 for a
	// client's, n+1 for one an action published while handling a message
	// of n hops. The broker only carries it; LoT stops a chain at its limit.
	Hops uint8

	// PeerGroups, for a message from a peer node (OriginPeer), are the
	// shared subscriptions ($share/{group}/{filter}, as subscribed) this
	// node delivers it to: a shared group spread over several nodes gets
	// each message on one node only, which the publisher's node chose.
	// The message skips every other shared subscription here.
	PeerGroups []string
	// Record names a message by its record in its origin node's stream
	// (zero when not set): set by the cluster on a message from a peer,
	// so that the peer's resend after a failed write is recognised
	// (DeliverBatch), and on a message published here that went to the
	// peers (its record in this node's stream), so that a session handed
	// over from another node, which queued the same message, is imported
	// without it twice (ImportSession). Queue entries keep it, on disk
	// too.
	Record PeerRecord

	// slab is the pooled buffer that holds Payload, nil when Payload is
	// an ordinary allocation (see acquire).
	slab *slab
}

// NewMessage builds a message from a decoded PUBLISH, copying topic and
// payload out of the read buffer into one allocation.
func NewMessage(p *packet.Publish, topic []byte, now time.Time) *Message {
	buf := make([]byte, len(topic)+len(p.Payload))
	copy(buf, topic)
	copy(buf[len(topic):], p.Payload)
	m := &Message{
		QoS:     p.QoS,
		Retain:  p.Retain,
		Payload: buf[len(topic):len(buf):len(buf)],
	}
	if len(topic) > 0 {
		m.Topic = unsafe.String(&buf[0], len(topic))
	}
	if p.Props.Has != 0 {
		m.copyProps(&p.Props, now)
	}
	return m
}

// newPooledMessage is NewMessage with the payload in a pooled buffer,
// for a message that only sessions' deliveries will hold (see acquire):
// at 20,000 messages/s of 1 KB, the copy NewMessage allocates made the
// collector run every half second, and every collection held up the
// deliveries of a single core for a millisecond or more. The topic is an
// ordinary string: it is kept beyond the message (outgoing topic aliases
// are keyed by it). The caller holds the one reference the message starts
// with and gives it up with release once it has routed the message.
func newPooledMessage(p *packet.Publish, topic []byte, now time.Time) *Message {
	sl := getSlab(len(p.Payload))
	if sl == nil {
		return NewMessage(p, topic, now)
	}
	n := copy(sl.b, p.Payload)
	m, _ := messagePool.Get().(*Message)
	if m == nil {
		m = new(Message)
	}
	m.Topic, m.QoS, m.Retain = string(topic), p.QoS, p.Retain
	m.Payload, m.slab = sl.b[:n:n], sl
	sl.refs = 1
	if p.Props.Has != 0 {
		m.copyProps(&p.Props, now)
	}
	return m
}

// acquire adds a holder of m and its pooled payload: a delivery in a
// session's queue, in flight, or being encoded. Every holder that reads
// the message holds a reference while it does, and only a holder
// acquires another (so the count never rises from zero); one that lets go
// calls release, and the last release returns the buffer and the Message
// value to their pools. A holder that never releases (a message dropped
// with its session or its expiry, an in-process client's deliveries)
// leaves them to the garbage collector: that is always safe. A message
// without a pooled payload ignores both.
func (m *Message) acquire() {
	if m.slab != nil {
		atomic.AddInt32(&m.slab.refs, 1)
	}
}

// release gives up a reference taken by acquire (or newPooledMessage).
// After it, the caller must not read m.
func (m *Message) release() {
	if m.slab == nil || atomic.AddInt32(&m.slab.refs, -1) != 0 {
		return
	}
	sl := m.slab
	// Cleared before it is used again, so that a holder that reads on
	// without a reference reads an empty message rather than another
	// message's bytes (and, under the race detector, is reported).
	*m = Message{}
	putSlab(sl)
	messagePool.Put(m)
}

// messagePool holds the Message values of released pooled messages: at
// 20,000 messages/s the 200-byte value alone made the collector run
// every few seconds.
var messagePool sync.Pool

// slab is a pooled payload buffer of one size class, with the count of
// the references to the message it holds.
type slab struct {
	b     []byte
	refs  int32
	class uint8
}

// Payload buffer size classes: 64 B, then four classes per power of two
// up to 64 KB (80, 96, 112, 128, 160, ...), so that a buffer is at most a
// quarter larger than its payload (a queued payload holds its whole
// buffer). A larger payload is an ordinary allocation.
const (
	minSlabShift = 6
	maxSlabShift = 16
	minSlab      = 1 << minSlabShift // 64 B
	maxSlab      = 1 << maxSlabShift // 64 KB
	slabGroups   = 4                 // classes per power of two
	numSlabs     = 1 + (maxSlabShift-minSlabShift)*slabGroups
)

var slabPools [numSlabs]sync.Pool

// slabClass returns the class of a payload of n bytes (1 <= n <= maxSlab)
// and the size of its buffers.
func slabClass(n int) (class, size int) {
	if n <= minSlab {
		return 0, minSlab
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << k / slabGroups
	q := (n - 1 - 1<<k) / step
	return 1 + (k-minSlabShift)*slabGroups + q, 1<<k + (q+1)*step
}

// getSlab returns a buffer of at least n bytes from its class's pool, or
// nil when n is out of the pooled range.
func getSlab(n int) *slab {
	if n <= 0 || n > maxSlab {
		return nil
	}
	class, size := slabClass(n)
	if v := slabPools[class].Get(); v != nil {
		return v.(*slab)
	}
	return &slab{b: make([]byte, size), class: uint8(class)}
}

func putSlab(sl *slab) { slabPools[sl.class].Put(sl) }

func (m *Message) copyProps(pr *packet.Properties, now time.Time) {
	m.PayloadFormat = pr.PayloadFormat
	m.ContentType = pr.ContentType
	m.ResponseTopic = pr.ResponseTopic
	if len(pr.CorrelationData) > 0 {
		m.CorrelationData = append([]byte(nil), pr.CorrelationData...)
	}
	if len(pr.UserProperties) > 0 {
		m.UserProperties = append([]packet.UserProperty(nil), pr.UserProperties...)
	}
	if pr.IsSet(packet.PropMessageExpiry) {
		m.ExpiresAt = now.Add(time.Duration(pr.MessageExpiry) * time.Second).UnixNano()
	}
}

// Expired reports whether the message's expiry has passed at now (Unix ns).
func (m *Message) Expired(now int64) bool { return m.ExpiresAt != 0 && now >= m.ExpiresAt }

// remainingExpiry returns the seconds left before expiry, rounded up.
func (m *Message) remainingExpiry(now int64) uint32 {
	left := m.ExpiresAt - now
	if left <= 0 {
		return 0
	}
	return uint32((left + int64(time.Second) - 1) / int64(time.Second))
}

// forHandler returns m as an in-process client's handler gets it, with
// Retain set to r: m itself, or a shallow copy; a pooled payload is
// copied, as the handler may keep it. The caller holds a reference.
func (m *Message) forHandler(r bool) *Message {
	if m.Retain == r && m.slab == nil {
		return m
	}
	c := *m
	c.Retain = r
	if m.slab != nil {
		c.slab = nil
		c.Payload = append([]byte(nil), m.Payload...)
	}
	return &c
}

// bytesOf returns the bytes of s without copying; the result must not be
// modified.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf returns b as a string without copying; b must not change while
// the string is in use.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
