package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
)

// CaughtUpPath is the peer protocol's catch-up report: a partition's owner
// POSTs a signed CaughtUpRequest to the leader once a new copy holds what
// the owner held; the leader commits Map.MarkCaughtUp.
const CaughtUpPath = "/cluster/caughtup"

// CaughtUpRequest reports node's copy of Partition filled.
type CaughtUpRequest struct {
	ClusterID string `json:"clusterId"`
	From      string `json:"from"`
	Partition int    `json:"partition"`
	Node      string `json:"node"`
}

// caughtUp is the Raft command of a report (opCaughtUp): applied only
// while node is still a syncing copy of the partition.
type caughtUp struct {
	Partition int    `json:"partition"`
	Node      string `json:"node"`
}

// SetCopiesReported tells the control plane that the data plane fills new
// copies and reports them (ReportCaughtUp): the leader then waits for the
// reports instead of marking every new copy caught up at once.
func (n *Node) SetCopiesReported(on bool) { n.copiesReported.Store(on) }

// ReportCaughtUp commits, through the leader, that node's copy of
// partition p is filled. Without a leader it fails (the caller tries
// again).
func (n *Node) ReportCaughtUp(ctx context.Context, p int, node string) error {
	if n.raft.State() == raft.Leader {
		return n.apply(command{Version: commandVersion, Op: opCaughtUp, CaughtUp: &caughtUp{Partition: p, Node: node}})
	}
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return fmt.Errorf("%w: no leader", ErrNoMajority)
	}
	ops := n.leaderOps(ctx, string(id), string(addr))
	if ops == "" {
		return fmt.Errorf("%w: leader %s at %q", ErrNoMajority, id, addr)
	}
	var done struct{}
	ans, err := postRequest(ctx, n.http, n.requests, ops, CaughtUpPath, string(id),
		CaughtUpRequest{ClusterID: n.opts.ClusterID, From: n.opts.NodeName, Partition: p, Node: node}, &done)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoMajority, err)
	}
	if ans.Status != http.StatusOK || ans.Err != nil {
		return fmt.Errorf("cluster: catch-up report refused by %s: %d %s", ops, ans.Status, bytes.TrimSpace(ans.Body))
	}
	return nil
}

func (n *Node) serveCaughtUp(w http.ResponseWriter, r *http.Request) {
	if !n.signer.Enabled() {
		http.Error(w, "no SharedSecret", http.StatusForbidden)
		return
	}
	var req CaughtUpRequest
	signed, ok := n.readRequest(w, r, CaughtUpPath, maxPeerBody, &req)
	if !ok {
		return
	}
	defer signed.Done()
	if req.ClusterID != n.opts.ClusterID {
		http.Error(w, "another cluster", http.StatusConflict)
		return
	}
	if n.raft.State() != raft.Leader {
		http.Error(w, ErrNotLeader.Error(), http.StatusConflict)
		return
	}
	if err := n.apply(command{Version: commandVersion, Op: opCaughtUp, CaughtUp: &caughtUp{Partition: req.Partition, Node: req.Node}}); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	n.writeReply(w, signed, http.StatusOK, struct{}{}) // signed for the report: a recorded "done" cannot answer another
}

// LeaderContact reports whether this node leads, or heard from the leader
// within d: the data plane refuses to acknowledge or count copies without
// it, so a node cut off from the majority stops well before the leader
// (after FailoverDelay, longer than d) moves its partitions' copies.
func (n *Node) LeaderContact(d time.Duration) bool {
	if n.raft.State() == raft.Leader {
		return true
	}
	// An election alone (no leader known for a moment) is not a loss of
	// contact: the copies move only after FailoverDelay.
	lc := n.raft.LastContact()
	return !lc.IsZero() && time.Since(lc) < d
}
