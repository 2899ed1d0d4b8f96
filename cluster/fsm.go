package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"gantry/cluster/partition"
)

// commandVersion is the version of the command envelope this build
// writes. Apply refuses a newer one rather than misreading it.
const commandVersion = 1

// Command operations.
const (
	opSession    = "session"    // the cluster formed: records its session
	opPartitions = "partitions" // a new partition map
	opUsers      = "users"      // the cluster's users (users.go)
	opLoT        = "lot"        // LoT definitions and work owners (lot_fsm.go)
	opCaughtUp   = "caughtUp"   // a new copy of a partition is filled (caughtup.go)
)

// command is the envelope of every Raft log entry Gantry writes.
type command struct {
	Version    int            `json:"v"`
	Op         string         `json:"op"`
	Session    *Session       `json:"session,omitempty"`
	Partitions *partition.Map `json:"partitions,omitempty"`
	Users      *usersChange   `json:"users,omitempty"`
	LoT        *lotCommand    `json:"lot,omitempty"`
	CaughtUp   *caughtUp      `json:"caughtUp,omitempty"`
}

// Session identifies one life of the cluster: it starts when the cluster
// forms from nothing and lasts while any member is alive (LoT's ON START
// runs once per session).
type Session struct {
	ID       string    `json:"id"`
	FormedAt time.Time `json:"formedAt"`
	FormedBy string    `json:"formedBy"`
}

// State is the replicated state of the control plane.
type State struct {
	Session    Session       `json:"session"`
	Partitions partition.Map `json:"partitions"`
	Users      Users         `json:"users"` // the user store (users.go); in snapshots too
	LoT        LoTState      `json:"lot"`   // LoT definitions and work owners (lot_fsm.go)
}

// fsm applies committed commands. Apply is deterministic and touches
// nothing but the state: no network, no clock.
type fsm struct {
	mu       sync.RWMutex // guards state
	state    State
	onChange func(State) // called after a change, on the Raft apply goroutine; may be nil
	// usersApplied is the users' version once onChange has run for it.
	usersApplied atomic.Uint64
}

func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var c command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("cluster: log entry %d: %w", l.Index, err)
	}
	if c.Version > commandVersion {
		return fmt.Errorf("cluster: log entry %d has command version %d, this build reads up to %d: upgrade this node", l.Index, c.Version, commandVersion)
	}
	f.mu.Lock()
	changed := false
	var result any
	switch c.Op {
	case opSession:
		if c.Session != nil && f.state.Session.ID == "" {
			f.state.Session, changed = *c.Session, true
		}
	case opPartitions:
		// A map proposed from an older one (a deposed leader's) is stale.
		if c.Partitions != nil && c.Partitions.Version > f.state.Partitions.Version {
			f.state.Partitions, changed = *c.Partitions, true
		}
	case opUsers:
		result, changed = f.applyUsers(c.Users)
	case opLoT:
		result, changed = f.applyLoT(c.LoT, l.Index)
	case opCaughtUp:
		if c.CaughtUp != nil {
			f.state.Partitions, changed = f.state.Partitions.MarkCaughtUp(c.CaughtUp.Partition, c.CaughtUp.Node)
		}
	}
	st := f.state
	f.mu.Unlock()
	if changed && f.onChange != nil {
		f.onChange(st)
	}
	f.usersApplied.Store(st.Users.Version)
	return result
}

func (f *fsm) current() State {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	data, err := json.Marshal(f.current())
	if err != nil {
		return nil, err
	}
	return snapshot(data), nil
}

func (f *fsm) Restore(r io.ReadCloser) error {
	defer r.Close()
	var st State
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	if f.onChange != nil {
		f.onChange(st)
	}
	f.usersApplied.Store(st.Users.Version)
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}
