package cluster

import (
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"gantry/cluster/partition"
)

// Member states in Status.
const (
	MemberAlive       = "alive"
	MemberUnreachable = "unreachable"
	MemberUnknown     = "unknown" // a follower cannot tell: trust the leader's view
)

// Status is this node's view of the cluster, served as GET /cluster.
type Status struct {
	Enabled      bool       `json:"enabled"`
	NodeName     string     `json:"nodeName"`
	ClusterID    string     `json:"clusterId"`
	Role         string     `json:"role"` // leader, follower, candidate, or joining (not a member yet)
	Leadership   Leadership `json:"leadership"`
	MembersTotal int        `json:"membersTotal"`
	// MembersAlive counts the voting members this node knows to be alive:
	// a member still catching up (no vote yet) is not counted, so on the
	// leader membersAlive equals membersTotal only once every member votes.
	MembersAlive int `json:"membersAlive"`
	// Voters counts the members with a vote in the configuration.
	Voters        int           `json:"voters"`
	Members       []Member      `json:"members"`
	Session       Session       `json:"session"`
	Partitions    partition.Map `json:"partitions"`
	OwnedByMe     int           `json:"partitionsOwned"`
	Raft          RaftStatus    `json:"raft"`
	LeaderChanges uint64        `json:"leaderChanges"`
	Problems      []string      `json:"problems,omitempty"` // why clustering is off, when it is
	// Waiting says why a fresh node has not formed a cluster yet, past its
	// bootstrap grace: which peers do not answer, or answer for another
	// cluster.
	Waiting string `json:"waiting,omitempty"`
}

// Leadership names the leader this node follows.
type Leadership struct {
	Leader   string `json:"leader"`
	Term     uint64 `json:"term"`
	IsLeader bool   `json:"isLeader"`
}

// Member is one member of the Raft configuration.
type Member struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	State   string `json:"state"`
	// Voter: the member counts toward the majority; a new member gets its
	// vote once it has caught up.
	Voter  bool `json:"voter"`
	Leader bool `json:"leader,omitempty"`
	Self   bool `json:"self,omitempty"`
	// SilentSeconds is how long the leader has not heard from it.
	SilentSeconds float64 `json:"silentSeconds,omitempty"`
}

// RaftStatus is the Raft log position of this node.
type RaftStatus struct {
	CommitIndex  uint64  `json:"commitIndex"`
	AppliedIndex uint64  `json:"appliedIndex"`
	LastContactS float64 `json:"lastContactSeconds"` // since the leader was last heard (followers)
}

// Status returns this node's view of the cluster.
func (n *Node) Status() Status {
	_, leaderID := n.raft.LeaderWithID()
	leader := string(leaderID)
	isLeader := n.raft.State() == raft.Leader
	st := Status{Enabled: true, NodeName: n.opts.NodeName, ClusterID: n.opts.ClusterID,
		Role:          roleOf(n.raft.State()),
		Leadership:    Leadership{Leader: leader, Term: n.raft.CurrentTerm(), IsLeader: isLeader},
		LeaderChanges: n.leaderChanges.Load()}
	state := n.fsm.current()
	st.Session, st.Partitions = state.Session, state.Partitions
	st.OwnedByMe = len(state.Partitions.OwnedBy(n.opts.NodeName))
	stats := n.raft.Stats()
	st.Raft.CommitIndex, _ = strconv.ParseUint(stats["commit_index"], 10, 64)
	st.Raft.AppliedIndex = n.raft.AppliedIndex()
	if lc := n.raft.LastContact(); !lc.IsZero() && !isLeader {
		st.Raft.LastContactS = time.Since(lc).Seconds()
	}
	members, _, _ := n.members()
	if _, ok := members[n.opts.NodeName]; !ok {
		st.Role = "joining"
		st.Waiting, _ = n.waiting.Load().(string)
	}
	// A configuration not committed yet (a vote just given, a member just
	// added) may still be lost with this leader: until it knows it to be
	// committed the leader vouches for no vote but its own. A follower
	// counts only itself and the leader.
	committed := !isLeader || n.configCommitted()
	now := time.Now()
	for name, mb := range members {
		m := Member{Name: name, Address: mb.addr, Voter: mb.voter, State: MemberUnknown, Leader: name == leader, Self: name == n.opts.NodeName}
		switch silent := n.live.silentFor(name, now); {
		case m.Self, isLeader && silent == 0, m.Leader && st.Raft.LastContactS < n.opts.ElectionTimeoutLower.Seconds()*2:
			m.State = MemberAlive
		case isLeader:
			m.State, m.SilentSeconds = MemberUnreachable, silent.Seconds()
		}
		if m.Voter {
			st.Voters++
		}
		if m.State == MemberAlive && m.Voter && (committed || m.Self) {
			st.MembersAlive++
		}
		st.Members = append(st.Members, m)
	}
	slices.SortFunc(st.Members, func(a, b Member) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	st.MembersTotal = len(st.Members)
	return st
}

func roleOf(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Shutdown:
		return "stopped"
	}
	return "follower"
}
