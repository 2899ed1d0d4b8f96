package cluster

import (
	"errors"
	"maps"
)

// This file records the ON START actions that ran (see doc.go, "LoT in a
// cluster"): an owner claims an action's run through Raft before it runs
// it, so that it runs at most once per cluster session and code version,
// even when its node fails before it runs.

// ErrStartClaimed: this ON START action already ran (or was claimed) in
// this session with this code.
var ErrStartClaimed = errors.New("cluster: ON START already ran in this cluster session with this code")

// StartClaim claims one ON START run.
type StartClaim struct {
	Action string `json:"action"`
	Code   string `json:"code"` // a hash of the action's source
	Node   string `json:"node"` // the node that runs it
}

// applyStart runs on the FSM (mu held).
func (f *fsm) applyStart(c *StartClaim) (any, bool) {
	st := &f.state.LoT
	if st.Started[c.Action] == c.Code {
		return ErrStartClaimed, false
	}
	next := maps.Clone(st.Started)
	if next == nil {
		next = map[string]string{}
	}
	next[c.Action] = c.Code
	st.Started = next
	return nil, true
}
