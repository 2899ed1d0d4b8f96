package broker

import "gantry/broker/packet"

// PersistKind names one change of durable state.
type PersistKind uint8

// Changes of durable state, as handed to a Persister.
const (
	PersistSession     PersistKind = iota + 1 // put Session (subscriptions, expiry, will)
	DeleteSession                             // delete ClientID's session, queue and inbound QoS 2 ids
	PersistEntry                              // put Entry in ClientID's queue
	PersistEntryState                         // set the state and packet id of entry Seq
	DeleteEntry                               // delete entry Seq of ClientID's queue
	PersistInboundQoS2                        // remember inbound QoS 2 packet id PID of ClientID
	DeleteInboundQoS2                         // forget it (PUBREL received)
	PersistRetained                           // put retained message Msg
	DeleteRetained                            // delete the retained message of Topic
)

// Entry states of a queued message.
const (
	EntryQueued   uint8 = 0 // waiting to be sent
	EntrySent     uint8 = 1 // sent with PID, waiting for PUBACK/PUBREC
	EntryReleased uint8 = 2 // PUBREC received and PUBREL sent, waiting for PUBCOMP
)

// PersistOp is one change of durable state.
type PersistOp struct {
	Kind     PersistKind
	ClientID string
	Seq      uint64 // entry sequence number within the session's queue
	PID      uint16 // packet identifier (entry state, inbound QoS 2)
	State    uint8  // entry state
	Session  *SessionRecord
	Entry    *EntryRecord
	Msg      *Message // retained message
	Topic    string   // retained topic to delete
}

// SessionRecord is the durable part of a session.
type SessionRecord struct {
	ClientID string
	Expiry   uint32 // seconds after disconnect; 0xFFFFFFFF never
	// DisconnectedAt is when the client went away (Unix ns); 0 while it is
	// connected. After a crash, a connected session counts as
	// disconnected at the store's last sign of life.
	DisconnectedAt int64
	Subscriptions  []SubscriptionRecord
	Will           *WillRecord // pending will, nil if none
}

// SubscriptionRecord is one subscription of a session.
type SubscriptionRecord struct {
	Filter  string
	Options packet.SubOptions
	SubID   uint32
}

// WillRecord is a will waiting for its delay or the session's end.
type WillRecord struct {
	Msg    *Message
	Delay  uint32
	Expiry uint32
}

// EntryRecord is a QoS 1/2 message in a session's queue or in flight.
type EntryRecord struct {
	Seq    uint64
	Msg    *Message
	QoS    byte
	Retain bool
	SubIDs []uint32
	State  uint8
	PID    uint16
}

// PersistedSession is a session as loaded at start.
type PersistedSession struct {
	SessionRecord
	Entries     []EntryRecord // in Seq order
	InboundQoS2 []uint16
}

// PersistedState is everything a Persister loads at start.
type PersistedState struct {
	Sessions []PersistedSession
	Retained []*Message
	// LastAlive is the store's last sign of life before this start (Unix
	// ns), used as the disconnect time of sessions that were connected
	// when the node stopped.
	LastAlive int64
}

// Persister keeps the broker's state on disk (durability). The broker
// calls Persist on the goroutine that changed the state, in the order of
// the changes; Persist must not block on I/O: it queues the operations for
// the next group commit and calls done, from its own goroutine, once they
// are durable (nil) or failed (the error). done may be nil.
type Persister interface {
	Persist(ops []PersistOp, done func(error))
	Load() (*PersistedState, error)
}
