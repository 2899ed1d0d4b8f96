package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Options configures a Server. The zero value of a field means its
// default; DefaultOptions returns them all.
type Options struct {
	// MaxPacketSize is the largest packet a client may send (advertised
	// in CONNACK as Maximum Packet Size); larger ones close the connection
	// with 0x95.
	MaxPacketSize uint32
	// ReceiveMaximum bounds the QoS 1/2 publishes a client may have
	// unacknowledged towards the broker (advertised in CONNACK).
	ReceiveMaximum uint16
	// MaxInflight bounds the QoS 1/2 messages the broker has in flight
	// to one client, whatever larger Receive Maximum the client allows.
	MaxInflight uint16
	// MaxQueuedMessages bounds the messages waiting for one session (its
	// offline queue, or the backlog of a slow client). When full, the
	// oldest message is dropped and counted.
	MaxQueuedMessages int
	// MaxSessionExpiry caps the Session Expiry Interval a client asks for,
	// in seconds; a v3.1.1 session with Clean Session 0 gets this value.
	MaxSessionExpiry uint32
	// TopicAliasMaximum is the number of topic aliases a client may use
	// towards the broker (0 = none).
	TopicAliasMaximum uint16
	// MaxKeepAlive caps a client's keep alive in seconds (0 = no cap); the
	// capped value is returned as Server Keep Alive.
	MaxKeepAlive uint16
	// ServerKeepAlive, when not 0, is the keep alive in seconds imposed on
	// every MQTT 5 client, whatever it asked for, and returned to it as
	// Server Keep Alive. It must not exceed MaxKeepAlive when that is set.
	ServerKeepAlive uint16
	// MaxConnections bounds concurrent client connections over all
	// listeners (0 = no bound); ListenerConfig.MaxConnections bounds those
	// of one listener. Beyond either, a CONNECT is refused with 0x97 quota
	// exceeded (MQTT 3: return code 3, server unavailable), counted in
	// Stats.ConnectionsRefused.
	MaxConnections int
	// MaxConnectRate bounds the CONNECT packets the server takes per
	// second (0 = no bound): a token bucket of MaxConnectRate tokens,
	// refilled at MaxConnectRate per second. Beyond it a CONNECT is
	// refused before authentication with 0x9F connection rate exceeded
	// (MQTT 3: return code 3), counted in Stats.ConnectRateRefused.
	MaxConnectRate int
	// MaxSubscriptionsPerClient bounds one session's subscriptions (0 = no bound).
	MaxSubscriptionsPerClient int
	// MaxTopicLevels bounds the levels of a topic name or filter (0 = no
	// bound); the "$share/{group}/" prefix of a shared subscription does
	// not count. A deeper PUBLISH topic or will topic is refused as 0x90
	// topic name invalid, a deeper filter gets SUBACK 0x8F; counted in
	// Stats.TopicLevelsExceeded.
	MaxTopicLevels int
	// ConnectTimeout closes a connection that sends no CONNECT in time
	// (counted in Stats.ConnectTimeouts).
	ConnectTimeout time.Duration
	// MaxOutboundBytes bounds the bytes waiting for one connection that
	// its socket has not taken yet: control packets and messages the
	// writer took from the session queue. A QoS 0 message that would take
	// them past the bound is dropped (Stats.SlowConsumerDrops and
	// Stats.Dropped); QoS 1/2 messages are bounded by the inflight window
	// instead. 0 means the default, 8 MiB; a negative value turns the
	// bound off.
	MaxOutboundBytes int
	// StuckTimeout closes a connection whose socket has accepted no byte
	// for this long: a client that stopped reading (counted in
	// Stats.SlowConsumerDisconnects). Over TLS and WebSocket, whose
	// writes cannot resume after a timeout, it bounds the write of each
	// 64 KiB instead.
	StuckTimeout time.Duration
	// RetainDisabled turns retained messages off (advertised in CONNACK).
	RetainDisabled bool

	// Logger receives the broker's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		MaxPacketSize:     1 << 20,
		ReceiveMaximum:    1024,
		MaxInflight:       1024,
		MaxQueuedMessages: 10000,
		MaxSessionExpiry:  0xFFFFFFFF,
		TopicAliasMaximum: 64,
		ConnectTimeout:    10 * time.Second,
		MaxOutboundBytes:  8 << 20,
		StuckTimeout:      30 * time.Second,
	}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxPacketSize == 0 {
		o.MaxPacketSize = d.MaxPacketSize
	}
	if o.ReceiveMaximum == 0 {
		o.ReceiveMaximum = d.ReceiveMaximum
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = d.MaxInflight
	}
	if o.MaxQueuedMessages == 0 {
		o.MaxQueuedMessages = d.MaxQueuedMessages
	}
	if o.MaxSessionExpiry == 0 {
		o.MaxSessionExpiry = d.MaxSessionExpiry
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = d.ConnectTimeout
	}
	if o.MaxOutboundBytes == 0 {
		o.MaxOutboundBytes = d.MaxOutboundBytes
	}
	if o.StuckTimeout == 0 {
		o.StuckTimeout = d.StuckTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.MaxPacketSize != 0 && o.MaxPacketSize < 64:
		return fmt.Errorf("broker: MaxPacketSize = %d, want 64..268435455", o.MaxPacketSize)
	case o.MaxPacketSize > 268435455:
		return fmt.Errorf("broker: MaxPacketSize = %d, want 64..268435455", o.MaxPacketSize)
	case o.MaxQueuedMessages < 0:
		return fmt.Errorf("broker: MaxQueuedMessages = %d, want >= 1", o.MaxQueuedMessages)
	case o.MaxConnections < 0:
		return fmt.Errorf("broker: MaxConnections = %d, want >= 0", o.MaxConnections)
	case o.MaxConnectRate < 0:
		return fmt.Errorf("broker: MaxConnectRate = %d, want >= 0", o.MaxConnectRate)
	case o.MaxSubscriptionsPerClient < 0:
		return fmt.Errorf("broker: MaxSubscriptionsPerClient = %d, want >= 0", o.MaxSubscriptionsPerClient)
	case o.MaxTopicLevels < 0:
		return fmt.Errorf("broker: MaxTopicLevels = %d, want >= 0", o.MaxTopicLevels)
	case o.MaxKeepAlive != 0 && o.ServerKeepAlive > o.MaxKeepAlive:
		return fmt.Errorf("broker: ServerKeepAlive = %d, want at most MaxKeepAlive (%d)", o.ServerKeepAlive, o.MaxKeepAlive)
	case o.ConnectTimeout < 0 || o.StuckTimeout < 0:
		return fmt.Errorf("broker: timeouts must not be negative")
	}
	return nil
}

// ListenerConfig describes one listener's policy.
type ListenerConfig struct {
	Name string // "tcp", "tls", "ws", ... shown in logs and ConnInfo
	// AllowAnonymous accepts clients without a user name.
	AllowAnonymous bool
	// AnonymousLoopbackOnly restricts anonymous clients to loopback
	// source addresses.
	AnonymousLoopbackOnly bool
	// MaxConnections bounds the concurrent client connections of this
	// listener (0 = no bound), on top of Options.MaxConnections. Listeners
	// are told apart by Name: listeners served under one name share the
	// bound.
	MaxConnections int
}

// topicTooDeep reports whether the topic name or filter t has more levels
// than Options.MaxTopicLevels; the "$share/{group}/" prefix of a shared
// subscription does not count. When it has, the refusal is counted
// (Stats.TopicLevelsExceeded) and logged, at most once per
// limitLogInterval. It does not allocate.
func (s *Server) topicTooDeep(t string) bool {
	max := s.opts.MaxTopicLevels
	if max <= 0 || len(t) < max {
		return false // n levels need at least n-1 bytes
	}
	if rest, ok := strings.CutPrefix(t, "$share/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			t = rest[i+1:]
		}
	}
	levels := strings.Count(t, "/") + 1
	if levels <= max {
		return false
	}
	s.stats.TopicLevelsExceeded.Add(1)
	if ok, suppressed := s.limits.logs[limitTopicLevels].allow(time.Now(), 1); ok {
		s.opts.Logger.Warn("topic refused: too many levels", "component", "broker",
			"topic", truncate(t, 200), "levels", levels, "max", max, "suppressed", suppressed)
	}
	return true
}

// truncate shortens s to at most n bytes for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
