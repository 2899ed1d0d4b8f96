package broker

import (
	"crypto/tls"
	"errors"
	"net"
)

// ErrDeferred is returned by a PublishHook that will decide later: it keeps
// the Resolver and calls Resolve exactly once, from any goroutine.
var ErrDeferred = errors.New("broker: publish deferred")

// ErrDuplicate is returned (or resolved) by a PublishHook for a QoS 2
// message the cluster accepted already: a resend (DUP) of it on another
// node after a failover. The publisher gets a successful PUBREC and the
// message is not routed again.
var ErrDuplicate = errors.New("broker: publish accepted already")

// ErrNotAuthorized is returned by an Authorizer to refuse an operation.
var ErrNotAuthorized = errors.New("broker: not authorized")

// ConnInfo describes a connecting or connected client to hooks.
type ConnInfo struct {
	ClientID   string
	Username   string
	Password   []byte // only set for Authenticate
	RemoteAddr net.Addr
	Listener   string // listener name, e.g. "tcp", "tls", "ws"
	TLS        *tls.ConnectionState
	Version    byte // protocol level: 3, 4 or 5
}

// Authenticator checks a client's credentials at CONNECT. It returns nil to
// accept, or an error (a packet.ReasonCode is sent as is; any other error as
// 0x86 bad user name or password).
type Authenticator interface {
	Authenticate(info *ConnInfo) error
}

// Authorizer decides whether a client may publish to a topic or subscribe
// to a filter. It is called on the client's reader goroutine, on the hot
// path: keep it fast.
type Authorizer interface {
	CanPublish(info *ConnInfo, topic string) bool
	CanSubscribe(info *ConnInfo, filter string) bool
}

// ConnectAuthorizer is an optional capability of an Authorizer: it admits
// a client once its credentials, or its anonymity, were accepted. false
// refuses the CONNECT with 0x87 (not authorized).
type ConnectAuthorizer interface {
	CanConnect(info *ConnInfo) bool
}

// SubscribeAccess is a ReadAuthorizer's decision on a subscription.
type SubscribeAccess uint8

// Decisions on a subscription.
const (
	// SubscribeRefused fails the subscription (SUBACK 0x80, or 0x87 for
	// MQTT 5).
	SubscribeRefused SubscribeAccess = iota
	// SubscribeGranted grants it whole: its messages are not checked.
	SubscribeGranted
	// SubscribeChecked grants it, and each message it matches (retained
	// ones included) is delivered only when CanRead allows its topic.
	SubscribeChecked
)

// ReadAuthorizer is an optional capability of an Authorizer that lets a
// subscription overlap topics its client may not read. The broker calls
// SubscribeAccess instead of CanSubscribe, on SUBSCRIBE, when a session is
// resumed, and for every session when ReauthorizeSubscriptions is called
// (after the rules or the users changed). CanRead is called while a
// message is routed, from the publisher's goroutine, only for subscribers
// that have a SubscribeChecked subscription: it must be fast and never
// block.
type ReadAuthorizer interface {
	SubscribeAccess(info *ConnInfo, filter string) SubscribeAccess
	CanRead(info *ConnInfo, topic string) bool
}

// NonBlocking is an optional capability of an Authorizer or a
// PublishHook: NeverBlocks promises that its calls return without waiting
// for I/O, a lock held across I/O, or another goroutine. A reader keeps
// the deliveries and acknowledgements of the publishes it has read for
// its next socket read (see conn.sendDeferred); before a call that may
// block it sends them first, which costs a write per publish.
type NonBlocking interface {
	NeverBlocks()
}

// Resolver completes a deferred publish. Resolve(nil) routes and
// acknowledges it; Resolve(err) refuses it with err's reason code.
type Resolver interface {
	Resolve(err error)
}

// StoreWatcher is implemented by the Resolver a client's QoS 1/2 publish
// hands its hooks. A hook whose decision others act on (the cluster's
// quorum write: the copies deliver the message once its origin decided
// it) calls WatchStore before Resolve(nil), and f is then called once
// with the local outcome: nil once the message was routed here and
// whatever routing it wrote is durable, the error that refuses it
// otherwise (a full disk: the publisher gets 0x80, so nobody else may
// deliver it). f may run with the connection's locks held: it must not
// block or call back into the broker.
type StoreWatcher interface {
	WatchStore(f func(err error))
}

// Pauser is implemented by the Resolver of a client's QoS 1/2 publish: a
// hook that keeps what it cannot pass on yet (the cluster's stream to a
// peer that is behind) calls Pause, and the broker reads nothing more from
// the publisher until wait is closed (or StuckTimeout), as it does for a
// congested subscriber: TCP slows the publisher down instead of the hook
// dropping what the publisher was acknowledged.
type Pauser interface {
	Pause(wait <-chan struct{})
}

// PublishHook sees every QoS 0/1/2 message entering the broker, in the
// order a connection sent them, before it is routed. It runs on the
// publisher's goroutine and returns:
//   - nil to pass the message on;
//   - an error to refuse it (a packet.ReasonCode is sent to a v5 client as
//     is, any other error as 0x80);
//   - ErrDeferred after keeping r, to decide later without blocking the
//     connection, which goes on reading. Acknowledgements still leave in
//     the order the publishes arrived. QoS 0 messages cannot be deferred:
//     for them ErrDeferred counts as a refusal.
//
// A v3.1.1 client has no way to learn that a publish was refused: the
// broker closes its connection without acknowledging, so the client sends
// the message again after it reconnects (QoS 1/2), or loses it (QoS 0).
type PublishHook interface {
	InterceptPublish(m *Message, r Resolver) error
}

// EventKind names a client life-cycle event.
type EventKind uint8

// Event kinds.
const (
	EventConnect EventKind = iota + 1
	EventDisconnect
	EventSubscribe
	EventUnsubscribe
)

func (k EventKind) String() string {
	switch k {
	case EventConnect:
		return "connect"
	case EventDisconnect:
		return "disconnect"
	case EventSubscribe:
		return "subscribe"
	case EventUnsubscribe:
		return "unsubscribe"
	}
	return "unknown"
}

// Event is published to observers for connects, disconnects, subscribes
// and unsubscribes.
type Event struct {
	Kind     EventKind
	ClientID string
	Username string
	Remote   string
	Filter   string // subscribe, unsubscribe
	// CleanStart is the connect's Clean Start (MQTT 5) or Clean Session
	// (3.1.1) flag.
	CleanStart bool
	QoS        byte  // subscribe
	Reason     error // disconnect: nil for a normal DISCONNECT
}

// Observer receives events. It is called synchronously on the goroutine
// that caused the event and must not block.
type Observer interface {
	Observe(e Event)
}

// RetainedStore keeps retained messages. The default keeps them in memory;
// durability replaces it. Set with an empty payload never reaches it:
// the broker calls Delete instead.
type RetainedStore interface {
	Set(m *Message) error
	Delete(topic string) error
	// Match calls fn for every retained message whose topic filter
	// matches, until fn returns false.
	Match(filter string, fn func(m *Message) bool)
	Len() int
}
