package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"

	"gantry/cluster/signing"
)

// This file commits LoT definitions through the leader (see doc.go, "LoT
// in a cluster"). The appliance checks a change against the definitions
// it applied (version Base) and commits it here; the FSM applies it only
// on top of that version, so a change checked on stale definitions is
// refused (LoTConflictError) and checked again on the new ones.

// LoTPath is the peer protocol's LoT change: POST a signed LoTRequest,
// answered (signed) with a LoTReply by the leader.
const LoTPath = "/cluster/lot"

// maxLoTBody bounds a LoT change on the peer protocol: a project.
const maxLoTBody = 32 << 20

// lotTimeout bounds one LoT change, forwarding included.
const lotTimeout = 2 * applyTimeout

// SetLocalLoT gives the node this node's own definitions: a leader whose
// cluster has none yet proposes them as the cluster's (AdoptLoT).
func (n *Node) SetLocalLoT(f func() []LoTDef) { n.localLoT.Store(&f) }

// LoT returns the cluster's LoT as this node has applied it.
func (n *Node) LoT() LoTState { return n.fsm.current().LoT }

// AdoptLoT, on the leader of a cluster that has no definitions yet,
// commits this node's own (SetLocalLoT) as the cluster's. It reports
// whether it committed.
func (n *Node) AdoptLoT() (bool, error) {
	f := n.localLoT.Load()
	if f == nil || n.raft.State() != raft.Leader || n.readyTerm.Load() != n.raft.CurrentTerm() || n.fsm.current().LoT.Version != 0 {
		return false, nil
	}
	defs := (*f)()
	v, err := n.commitLoT(&lotCommand{From: n.opts.NodeName, Adopt: true, Puts: defs})
	if err != nil {
		if errors.Is(err, ErrLoTConflict) {
			return false, nil
		}
		return false, err
	}
	n.log.Info("the cluster adopts this node's LoT definitions", "definitions", len(defs), "version", v)
	return true, nil
}

// commitLoT commits c from the leader and returns the version it made.
func (n *Node) commitLoT(c *lotCommand) (uint64, error) {
	data, err := json.Marshal(command{Version: commandVersion, Op: opLoT, LoT: c})
	if err != nil {
		return 0, err
	}
	f := n.raft.Apply(data, applyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			// Refused before it was appended: another leader may take it
			// (viaLeader).
			return 0, fmt.Errorf("%w: %w", ErrLoTNoMajority, ErrNotLeader)
		}
		if errors.Is(err, raft.ErrLeadershipLost) {
			return 0, fmt.Errorf("%w: %v", ErrLoTNoMajority, err)
		}
		return 0, fmt.Errorf("%w (%v)", ErrLoTNoMajority, err)
	}
	switch r := f.Response().(type) {
	case error:
		return 0, r
	case uint64:
		return r, nil
	}
	return 0, nil
}

// ChangeLoT commits a change of the definitions computed on version base
// through the leader (here, or passed on to it signed) and returns the
// version it made. It does not wait for this node to apply it: the
// appliance does. Errors: LoTConflictError (checked on stale
// definitions), ErrLoTNotFound, ErrLoTNoMajority.
func (n *Node) ChangeLoT(ctx context.Context, base uint64, deletes []LoTDelete, puts []LoTDef) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, lotTimeout)
	defer cancel()
	req := LoTRequest{ClusterID: n.opts.ClusterID, From: n.opts.NodeName, Base: base, Deletes: deletes, Puts: puts}
	return n.viaLeader(ctx, ErrLoTNoMajority,
		func() (uint64, error) { return n.leaderChangeLoT(base, deletes, puts, n.opts.NodeName) },
		func(ops, id string) (uint64, error) { return PostLoT(ctx, n.changeHTTP, n.requests, ops, id, req) })
}

// leaderChangeLoT commits a change on the leader; a cluster without
// definitions adopts the leader's first (the change then conflicts, and
// is checked again on them).
func (n *Node) leaderChangeLoT(base uint64, deletes []LoTDelete, puts []LoTDef, from string) (uint64, error) {
	if n.fsm.current().LoT.Version == 0 {
		if n.readyTerm.Load() != n.raft.CurrentTerm() {
			if err := n.raft.Barrier(applyTimeout).Error(); err != nil {
				return 0, fmt.Errorf("%w: %v", ErrLoTNoMajority, err)
			}
		}
		if _, err := n.AdoptLoT(); err != nil {
			return 0, err
		}
	}
	v, err := n.commitLoT(&lotCommand{From: from, Base: base, Deletes: deletes, Puts: puts})
	if err == nil {
		n.log.Info("committed a LoT change", "from", from, "version", v, "puts", len(puts), "deletes", len(deletes))
	}
	return v, err
}

// LoTRequest is the body of POST LoTPath.
type LoTRequest struct {
	ClusterID string      `json:"clusterId"`
	From      string      `json:"from"`
	Base      uint64      `json:"base"`
	Deletes   []LoTDelete `json:"deletes,omitempty"`
	Puts      []LoTDef    `json:"puts,omitempty"`
	// Start, when set, is an ON START claim (ClaimStart) instead of a
	// change of the definitions.
	Start *StartClaim `json:"start,omitempty"`
}

// LoTReply answers a LoTRequest.
type LoTReply struct {
	Version  uint64 `json:"version,omitempty"`
	Conflict uint64 `json:"conflict,omitempty"` // the current version, when Base was stale
	Code     string `json:"code,omitempty"`     // "conflict", "notFound", "noMajority", "notLeader"
	Error    string `json:"error,omitempty"`
}

func (n *Node) serveLoT(w http.ResponseWriter, r *http.Request) {
	if !n.signer.Enabled() {
		http.Error(w, errLoTNoSecret.Error(), http.StatusForbidden)
		return
	}
	var req LoTRequest
	signed, ok := n.readRequest(w, r, LoTPath, maxLoTBody, &req)
	if !ok {
		return
	}
	defer signed.Done()
	if req.ClusterID != n.opts.ClusterID {
		n.writeReply(w, signed, http.StatusConflict, LoTReply{Error: fmt.Sprintf(
			"cluster: this is node %s of cluster %q, the change is for %q", n.opts.NodeName, n.opts.ClusterID, req.ClusterID)})
		return
	}
	var v uint64
	err := error(ErrNotLeader)
	switch {
	case n.raft.State() != raft.Leader:
	case req.Start != nil:
		v, err = n.commitLoT(&lotCommand{From: req.From, Start: req.Start})
	default:
		v, err = n.leaderChangeLoT(req.Base, req.Deletes, req.Puts, req.From)
	}
	rep, status := LoTReply{Version: v}, http.StatusOK
	if err != nil {
		rep, status = LoTReply{Error: err.Error()}, http.StatusConflict
		var c *LoTConflictError
		switch {
		case errors.As(err, &c):
			rep.Code, rep.Conflict = "conflict", c.Current
		case errors.Is(err, ErrLoTNotFound):
			rep.Code = "notFound"
		case errors.Is(err, ErrStartClaimed):
			rep.Code = "claimed"
		case errors.Is(err, ErrNotLeader):
			rep.Code = "notLeader"
		case errors.Is(err, ErrLoTNoMajority):
			rep.Code, status = "noMajority", http.StatusServiceUnavailable
		}
	}
	n.writeReply(w, signed, status, rep)
}

// PostLoT sends a LoT change to the leader, node to, answering the peer
// protocol at opsAddr, signed by q, and returns the version it committed.
func PostLoT(ctx context.Context, client *http.Client, q *signing.Requests, opsAddr, to string, req LoTRequest) (uint64, error) {
	var rep LoTReply
	ans, err := postRequest(ctx, client, q, opsAddr, LoTPath, to, req, &rep)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrLoTNoMajority, err)
	}
	if ans.Err != nil {
		if ans.Status == http.StatusForbidden {
			return 0, fmt.Errorf("cluster: LoT change refused by %s: %d %s (is Cluster.SharedSecret the same on every node?)", opsAddr, ans.Status, bytes.TrimSpace(ans.Body))
		}
		return 0, fmt.Errorf("%w: LoT change via %s: %d %s: %v", ErrLoTNoMajority, opsAddr, ans.Status, bytes.TrimSpace(ans.Body), ans.Err)
	}
	switch rep.Code {
	case "":
		if rep.Error != "" {
			return 0, errors.New(rep.Error)
		}
		return rep.Version, nil
	case "conflict":
		return 0, &LoTConflictError{Current: rep.Conflict}
	case "notFound":
		return 0, fmt.Errorf("%w (%s)", ErrLoTNotFound, rep.Error)
	case "claimed":
		return 0, ErrStartClaimed
	case "notLeader":
		return 0, fmt.Errorf("%w: %w", ErrLoTNoMajority, ErrNotLeader)
	case "noMajority":
		return 0, fmt.Errorf("%w: %s", ErrLoTNoMajority, rep.Error)
	}
	return 0, errors.New(rep.Error)
}

// PeerOps is where member name answers the peer protocol and GET
// /cluster, as discovery lists it, "" when unknown.
func (n *Node) PeerOps(ctx context.Context, name string) string {
	members, _, err := n.members()
	if err != nil {
		return ""
	}
	m, ok := members[name]
	if !ok {
		return ""
	}
	return n.leaderOps(ctx, name, m.addr)
}

// ClaimStart claims the run of the ON START action c.Action with code
// c.Code in this cluster session, through the leader: nil means this node
// runs it now; ErrStartClaimed that it already ran (or was claimed) with
// that code in this session. Claimed before it runs, an action runs at
// most once per session and code, even when its node fails meanwhile.
func (n *Node) ClaimStart(ctx context.Context, c StartClaim) error {
	st := n.fsm.current().LoT
	if st.Started[c.Action] == c.Code {
		return ErrStartClaimed
	}
	c.Node, c.Session = n.opts.NodeName, st.Session.ID
	ctx, cancel := context.WithTimeout(ctx, lotTimeout)
	defer cancel()
	req := LoTRequest{ClusterID: n.opts.ClusterID, From: n.opts.NodeName, Start: &c}
	_, err := n.viaLeader(ctx, ErrLoTNoMajority,
		func() (uint64, error) { return n.commitLoT(&lotCommand{From: n.opts.NodeName, Start: &c}) },
		func(ops, id string) (uint64, error) { return PostLoT(ctx, n.changeHTTP, n.requests, ops, id, req) })
	return err
}
