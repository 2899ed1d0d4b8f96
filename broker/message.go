package broker

import (
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
	// Hops counts the LoT actions that led to this message: 0 for a
	// client's, n+1 for one an action published while handling a message
	// of n hops. The broker only carries it; LoT stops a chain at its limit.
	Hops uint8
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

// withRetain returns m, or a shallow copy with Retain set to r.
func (m *Message) withRetain(r bool) *Message {
	if m.Retain == r {
		return m
	}
	c := *m
	c.Retain = r
	return &c
}

// bytesOf returns the bytes of s without copying; the result must not be
// modified.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf returns b as a string without copying; b must not change while
// the string is in use.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
