package broker

import (
	"fmt"
	"log/slog"
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
	// MaxConnections bounds concurrent client connections (0 = no bound).
	MaxConnections int
	// MaxSubscriptionsPerClient bounds one session's subscriptions (0 = no bound).
	MaxSubscriptionsPerClient int
	// ConnectTimeout closes a connection that sends no CONNECT in time.
	ConnectTimeout time.Duration
	// WriteTimeout closes a connection whose socket accepts no data for
	// this long (a client that stopped reading).
	WriteTimeout time.Duration
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
		WriteTimeout:      30 * time.Second,
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
	if o.WriteTimeout == 0 {
		o.WriteTimeout = d.WriteTimeout
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
	case o.MaxSubscriptionsPerClient < 0:
		return fmt.Errorf("broker: MaxSubscriptionsPerClient = %d, want >= 0", o.MaxSubscriptionsPerClient)
	case o.ConnectTimeout < 0 || o.WriteTimeout < 0:
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
}
