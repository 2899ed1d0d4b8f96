package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// This file finds the leader for a change that commits through it (LoT
// definitions, users): here, or another node reached over the peer
// protocol, across the election that follows a leader's failure.

// leaderWait bounds how long a change waits for an election to end.
const leaderWait = 3 * time.Second

// awaitLeader returns the leader, waiting up to leaderWait while an
// election runs (none is known), so that a change made during one is
// not refused for it.
func (n *Node) awaitLeader(ctx context.Context) (raft.ServerAddress, raft.ServerID) {
	deadline := time.Now().Add(leaderWait)
	for {
		addr, id := n.raft.LeaderWithID()
		if id != "" || time.Now().After(deadline) {
			return addr, id
		}
		select {
		case <-ctx.Done():
			return addr, id
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// viaLeader commits a change on the leader: local when this node leads,
// else remote, sent to the leader id answering the peer protocol at ops.
// noMajority is the error of the change's kind for no leader to send it
// to.
//
// A follower goes on naming a leader that failed until its own election
// timeout runs out (longer on a loaded machine), so a change made just
// after the leader's failure went to a dead node and was refused for want
// of a majority while a majority was up; and a leader that lost its
// leadership between its check and its Raft append refused it likewise.
// When the leader named was not reached (its address refused the
// connection or did not answer it) or was not the leader (it said so, or
// Raft refused the append here), nothing was committed, so the change
// goes to the next leader, for up to leaderWait after the first such
// failure, as a change made during the election itself waits for it. A
// change that may have been committed is never made twice.
func (n *Node) viaLeader(ctx context.Context, noMajority error, local func() (uint64, error), remote func(ops, id string) (uint64, error)) (uint64, error) {
	var since time.Time // of the first failure to reach the leader
	for {
		v, err := n.toLeader(ctx, noMajority, local, remote)
		if err == nil || !leaderNotReached(err) {
			return v, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= leaderWait {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// toLeader makes one attempt of viaLeader.
func (n *Node) toLeader(ctx context.Context, noMajority error, local func() (uint64, error), remote func(ops, id string) (uint64, error)) (uint64, error) {
	if n.raft.State() == raft.Leader {
		return local()
	}
	addr, id := n.awaitLeader(ctx)
	switch {
	case id == "":
		return 0, fmt.Errorf("%w: no leader", noMajority)
	case id == raft.ServerID(n.opts.NodeName):
		return local()
	}
	ops := n.leaderOps(ctx, string(id), string(addr))
	if ops == "" {
		return 0, fmt.Errorf("%w: leader %s at %q", noMajority, id, addr)
	}
	return remote(ops, string(id))
}

// leaderNotReached reports whether err says a change did not commit
// anything on the leader: the connection to it could not be made (nothing
// was sent), or it was not the leader (ErrNotLeader: Raft refused the
// append, which it does before appending anything).
func leaderNotReached(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrNotLeader) || (errors.As(err, &op) && op.Op == "dial")
}
