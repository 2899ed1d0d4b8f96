package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

	"github.com/hashicorp/raft"
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
	// Session is the LoT session the claim is for: a claim made for an
	// earlier session is refused.
	Session string `json:"session"`
}

// applyStart runs on the FSM (mu held).
func (f *fsm) applyStart(c *StartClaim) (any, bool) {
	st := &f.state.LoT
	if c.Session != st.Session.ID {
		return fmt.Errorf("%w: the claim is for session %q, the cluster is in %q", ErrStartClaimed, c.Session, st.Session.ID), false
	}
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

// LoTSession is the cluster session ON START counts in: it starts when
// the cluster forms from nothing and lasts while any of its members'
// processes is alive. Boots holds, per member, the boot (a random value
// each process draws at start) that belongs to the session.
type LoTSession struct {
	ID    string            `json:"id"`
	Boots map[string]string `json:"boots,omitempty"`
}

// applySession runs on the FSM (mu held): a session with another ID
// starts a new session (no ON START has run in it); the same ID records
// the boots of members that restarted meanwhile.
func (f *fsm) applySession(s *LoTSession) (any, bool) {
	st := &f.state.LoT
	if s.ID != st.Session.ID {
		st.Started = nil
	}
	st.Session = LoTSession{ID: s.ID, Boots: maps.Clone(s.Boots)}
	return nil, true
}

// KeepLoTSession, on the leader, keeps the LoT session in line with the
// boots of the members that answered (name → boot, this node's
// included): while one of them is still the process recorded in the
// session, the session goes on (and records the others' boots); when
// none is, and they are a majority of the voters, every member restarted
// and a new session starts. On a follower it does nothing.
func (n *Node) KeepLoTSession(boots map[string]string) error {
	if n.raft.State() != raft.Leader || n.readyTerm.Load() != n.raft.CurrentTerm() {
		return nil
	}
	cur := n.fsm.current().LoT.Session
	goesOn := false
	for name, b := range boots {
		if cur.Boots[name] == b {
			goesOn = true
		}
	}
	next := LoTSession{ID: cur.ID, Boots: maps.Clone(cur.Boots)}
	switch {
	case cur.ID != "" && goesOn:
		changed := false
		for name, b := range boots {
			if next.Boots[name] != b {
				next.Boots[name], changed = b, true
			}
		}
		if !changed {
			return nil
		}
	default:
		members, _, err := n.members()
		if err != nil {
			return err
		}
		voters := 0
		for _, m := range members {
			if m.voter {
				voters++
			}
		}
		if len(boots) <= voters/2 {
			return nil // not enough answers to tell that every member restarted
		}
		var id [8]byte
		rand.Read(id[:])
		next = LoTSession{ID: hex.EncodeToString(id[:]), Boots: maps.Clone(boots)}
		n.log.Info("a new LoT session starts: every member's process is new, so ON START actions run again", "session", next.ID)
	}
	_, err := n.commitLoT(&lotCommand{From: n.opts.NodeName, Session: &next})
	return err
}
