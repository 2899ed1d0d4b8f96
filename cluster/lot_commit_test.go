package cluster

import (
	"errors"
	"testing"
)

// TestLoTCommitNotLeaderGoesToTheNextLeader: a LoT commit that Raft
// refuses because this node does not lead (it lost its leadership between
// its check and the append: nothing was appended) says ErrNotLeader, so
// that viaLeader sends the change to the next leader and the peer protocol
// answers notLeader, rather than refusing it for want of a majority (a
// node found not leading while adding a timer failed the netns LoT test).
func TestLoTCommitNotLeaderGoesToTheNextLeader(t *testing.T) {
	n := newBareNode(t, "node-a", nil) // not started: a follower
	_, err := n.commitLoT(&lotCommand{From: "node-a"})
	if !errors.Is(err, ErrLoTNoMajority) || !errors.Is(err, ErrNotLeader) || !leaderNotReached(err) {
		t.Fatalf("a commit on a node that does not lead: %v, want ErrLoTNoMajority and ErrNotLeader, sent on to the next leader", err)
	}
}
