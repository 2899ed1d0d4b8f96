package engine

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// Connection states, as the status topic shows them.
const (
	Disconnected = "Disconnected"
	Connecting   = "Connecting"
	Connected    = "Connected"
	Reconnecting = "Reconnecting"
	Stopped      = "Stopped"
	Invalid      = "Invalid" // the definition does not build: it does not run
	// Standby: a cluster node holds the definition while its owner, another
	// node, runs it (Options.WaitForOwner).
	Standby = "Standby"
)

// Health summarises a connector: Green all well, Yellow connected with
// tags failing, Red not connected.
const (
	Green  = "Green"
	Yellow = "Yellow"
	Red    = "Red"
)

// Counters are a connector's counts since it was deployed.
type Counters struct {
	Polls       atomic.Uint64 // batch reads done
	Reads       atomic.Uint64 // tag values read
	ReadErrors  atomic.Uint64 // tag reads refused by the device, and failed polls
	Published   atomic.Uint64 // values published
	Writes      atomic.Uint64 // values written
	WriteErrors atomic.Uint64 // writes refused or failed
	Connects    atomic.Uint64 // connections opened
	Failures    atomic.Uint64 // connection failures (each closes and redials)
	Received    atomic.Uint64 // bridge: messages in
	Sent        atomic.Uint64 // bridge: messages out
}

// status is what the connector shows on its status topic; its goroutine
// writes it, the status and metrics readers copy it.
type status struct {
	mu         sync.Mutex // guards the fields below
	state      string
	lastError  string
	lastErrAt  time.Time
	since      time.Time // of the current state
	tagErrors  map[string]string
	lastPollNs int64
}

// Snapshot is one connector's status at a moment.
type Snapshot struct {
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Device      string            `json:"device,omitempty"`
	Connection  string            `json:"connection"`
	Health      string            `json:"health"`
	Since       time.Time         `json:"since"`
	LastError   string            `json:"lastError,omitempty"`
	LastErrorAt *time.Time        `json:"lastErrorAt,omitempty"`
	TagErrors   map[string]string `json:"tagErrors,omitempty"`
	Tags        int               `json:"tags"`
	PollSeconds float64           `json:"lastPollSeconds"`
	Polls       uint64            `json:"polls"`
	Reads       uint64            `json:"reads"`
	ReadErrors  uint64            `json:"readErrors"`
	Published   uint64            `json:"published"`
	Writes      uint64            `json:"writes"`
	WriteErrors uint64            `json:"writeErrors"`
	Connects    uint64            `json:"connects"`
	Failures    uint64            `json:"failures"`
	Received    uint64            `json:"received,omitempty"`
	Sent        uint64            `json:"sent,omitempty"`
	UpdatedAt   time.Time         `json:"updatedAt"`
}

// JSON is the status topic's payload.
func (s Snapshot) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

func health(state string, tagErrors int) string {
	switch {
	case state != Connected && state != Listening:
		return Red
	case tagErrors > 0:
		return Yellow
	}
	return Green
}
