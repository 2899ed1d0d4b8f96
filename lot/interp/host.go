package interp

// The interfaces below are what the interpreter needs from the runtime
// that hosts it. Each is small; optional capabilities are second
// interfaces found by type assertion.

// Effects receives what a run does to the world, in statement order.
// Payloads are new slices that the callee owns.
type Effects interface {
	// Publish is PUBLISH TOPIC (retain false, QoS 0) and PUBLISH MODEL
	// (the model's RETAIN and QoS).
	Publish(topic string, payload []byte, retain bool, qos byte) error
	// Keep is KEEP TOPIC: the last-value cache only, no delivery.
	Keep(topic string, payload []byte) error
}

// EventFirer is an optional capability of Effects: TRIGGER "<Event>" TO
// <Connector> [WITH <value>] fires a connector event. Without it the
// statement fails with ErrUnavailable.
type EventFirer interface {
	FireEvent(connector, event string, payload []byte) error
}

// TopicReader answers GET TOPIC and the WITH TOPIC fields of models: the
// latest payload of a topic, which must not be modified. For an action,
// back it with the execution's topiccache.Frame (so that GET TOPIC sees
// this run's own PUBLISH and KEEP first, LOT.md §4.5); *topiccache.Cache
// implements it directly. An empty payload reads as EMPTY.
type TopicReader interface {
	Lookup(topic string) ([]byte, bool)
}

// EnvReader answers GET ENV and GET SECRET. A missing name reads as
// EMPTY.
type EnvReader interface {
	Env(name string) (string, bool)
	Secret(name string) (string, bool)
}

// EnvWriter is an optional capability of an EnvReader: KEEP ENV|SECRET and
// DELETE ENV|SECRET. Without it those statements fail with
// ErrUnavailable.
type EnvWriter interface {
	SetEnv(name, value string, secret bool) error
	DeleteEnv(name string, secret bool) error
}

// Callables finds the program of a callable action for CALL ACTION.
type Callables interface {
	Callable(name string) (*Program, bool)
}

// Models finds a compiled model, for PUBLISH MODEL and for the FROM
// parent of CompileModel.
type Models interface {
	Model(name string) (*Model, bool)
}

// Host bundles what one run may use. Only Effects is needed by every
// action that publishes; a nil Topics or Env reads everything as EMPTY; a
// nil Callables or Models makes CALL ACTION or PUBLISH MODEL fail with
// ErrUnavailable. A Host may be shared by runs on different goroutines
// only if its implementations are safe for that.
type Host struct {
	Effects   Effects
	Topics    TopicReader
	Env       EnvReader
	Callables Callables
	Models    Models
}

// Event is what started a run: the message of ON TOPIC and ON CHANGE (or
// the one -runAction simulates), or the client session of ON CONNECT, ON
// DISCONNECT and ON SUBSCRIBE. Timers and ON START leave it zero. Payload
// is read without copying and must never be modified (see the package
// documentation).
type Event struct {
	Topic   string // the concrete topic of the message; "" without one
	Payload []byte
	Session Session
}

// Session is what the session keywords read.
type Session struct {
	ClientID         string // CLIENTID
	User             string // USER
	Endpoint         string // ENDPOINT, the client's remote address
	CleanSession     bool   // CLEANSESSION
	DisconnectReason string // DISCONNECTREASON
	SubscribeTopic   string // SUBSCRIBETOPIC
	SubscribeQoS     byte   // SUBSCRIBEQOS
}
