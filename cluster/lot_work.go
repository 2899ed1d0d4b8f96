package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// This file is the owner map of LoT's work (see doc.go, "LoT in a
// cluster"): each timer, ON START action, exclusive connector and
// scheduled event has one owner node and one standby, committed through
// Raft so that every node agrees, planned by the leader over the live
// members.

// WorkItem is one piece of work that runs in one place: Key names it
// ("timer/<action>", "start/<action>", "connector/<name>", ...), Pin is
// the node it must run on (CLUSTER_NODE), "" to let the cluster place it.
type WorkItem struct {
	Key string `json:"key"`
	Pin string `json:"pin,omitempty"`
}

// WorkAssignment is where one item runs.
type WorkAssignment struct {
	Key     string `json:"key"`
	Owner   string `json:"owner"`             // "" while no live node can take it
	Standby string `json:"standby,omitempty"` // takes over when the owner falls silent
	Pinned  bool   `json:"pinned,omitempty"`  // CLUSTER_NODE: runs nowhere while that node is down
	// Epoch rises whenever the owner changes.
	Epoch uint64 `json:"epoch"`
}

// WorkMap is the committed owner map.
type WorkMap struct {
	Version uint64           `json:"version"`
	Items   []WorkAssignment `json:"items,omitempty"` // sorted by Key
}

// Lookup returns the assignment of key.
func (m WorkMap) Lookup(key string) (WorkAssignment, bool) {
	i, ok := slices.BinarySearchFunc(m.Items, key, func(a WorkAssignment, k string) int {
		switch {
		case a.Key < k:
			return -1
		case a.Key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return WorkAssignment{}, false
	}
	return m.Items[i], true
}

// PlanWork is the leader's plan: items with the owners of cur kept while
// they are live (a node that returns takes new work, not running work),
// the work of a node that is not live moved to its standby, new items on
// the least loaded live node, and a live standby other than the owner for
// each. A pinned item is owned by its pin whatever its state, without a
// standby. The result has cur's Version when nothing changed, else the
// next one.
func PlanWork(cur WorkMap, items []WorkItem, live []string) WorkMap {
	isLive := func(n string) bool { return n != "" && slices.Contains(live, n) }
	owned, standing := map[string]int{}, map[string]int{}
	next := WorkMap{Version: cur.Version}
	keep := func(a WorkAssignment) {
		owned[a.Owner]++
		standing[a.Standby]++
		next.Items = append(next.Items, a)
	}
	least := func(load map[string]int, not string) string {
		best := ""
		for _, n := range live { // live is sorted: ties go to the first name
			if n != not && (best == "" || load[n] < load[best]) {
				best = n
			}
		}
		return best
	}
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b WorkItem) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	items = slices.CompactFunc(items, func(a, b WorkItem) bool { return a.Key == b.Key })
	// Pass 1: what stays where it is, so that the loads are known.
	var todo []WorkItem
	var prev []WorkAssignment
	for _, it := range items {
		old, had := cur.Lookup(it.Key)
		switch {
		case it.Pin != "":
			a := WorkAssignment{Key: it.Key, Owner: it.Pin, Pinned: true, Epoch: old.Epoch}
			if !had || old.Owner != it.Pin {
				a.Epoch++
			}
			keep(a)
		case had && !old.Pinned && isLive(old.Owner):
			keep(old)
		default:
			todo = append(todo, it)
			prev = append(prev, old)
		}
	}
	// Pass 2: the items without a live owner.
	for i, it := range todo {
		old := prev[i]
		a := WorkAssignment{Key: it.Key, Epoch: old.Epoch}
		if isLive(old.Standby) && !old.Pinned {
			a.Owner = old.Standby
		} else {
			a.Owner = least(owned, "")
		}
		if a.Owner != old.Owner {
			a.Epoch++
		}
		keep(a)
	}
	// Pass 3: standbys.
	for i := range next.Items {
		a := &next.Items[i]
		if a.Pinned || a.Owner == "" {
			a.Standby = ""
			continue
		}
		if !isLive(a.Standby) || a.Standby == a.Owner {
			standing[a.Standby]--
			a.Standby = least(standing, a.Owner)
			standing[a.Standby]++
		}
	}
	slices.SortFunc(next.Items, func(a, b WorkAssignment) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	if !slices.Equal(next.Items, cur.Items) {
		next.Version = cur.Version + 1
	}
	return next
}

// Work is the committed owner map as this node has applied it.
func (n *Node) Work() WorkMap { return n.fsm.current().LoT.Work }

// PlanWork, on the leader, commits the owner map of items over the live
// members (those heard within FailoverDelay) when it differs from the
// committed one. On a follower it does nothing (false).
func (n *Node) PlanWork(items []WorkItem) (bool, error) {
	if n.raft.State() != raft.Leader || n.readyTerm.Load() != n.raft.CurrentTerm() {
		return false, nil
	}
	members, _, err := n.members()
	if err != nil {
		return false, err
	}
	cur := n.fsm.current().LoT.Work
	next := PlanWork(cur, items, n.liveMembers(members))
	if next.Version == cur.Version {
		return false, nil
	}
	if err := n.apply(command{Version: commandVersion, Op: opLoT, LoT: &lotCommand{From: n.opts.NodeName, Work: &next}}); err != nil {
		return false, err
	}
	n.log.Info("LoT work map changed", "version", next.Version, "items", len(next.Items))
	return true, nil
}

// workFence keeps an owner from running its work on a stale owner map:
// once it lost contact (and when the process starts) it runs nothing
// until it has applied the leader's log up to the leader's commit index
// as the leader gave it after contact resumed.
type workFence struct {
	mu       sync.Mutex // guards the fields below
	lifted   bool       // contact, and caught up since it resumed
	target   uint64     // the leader's commit index to apply before lifting; 0 while not known
	asking   bool       // a goroutine asks the leader (askCommit, verifyLeader)
	lost     uint64     // counts the losses of contact: an answer asked for before the last one is dropped
	lastCall time.Time  // the previous InContact
	leader   bool       // this node led at the previous InContact
}

// drop fences the node (f.mu held): it runs nothing until it has caught
// up again.
func (f *workFence) drop() {
	if f.lifted || f.target != 0 {
		f.lost++
	}
	f.lifted, f.target = false, 0
}

// InContact reports whether this node may run work it owns now: it leads
// (has applied the whole log of its term, and a quorum confirmed its
// leadership since it last lost contact), or it heard from the leader
// within fence and, since it last lost contact, has applied what the
// leader had committed when contact resumed. An owner cut off from the
// majority stops its work once this turns false, before the leader moves
// the work (after FailoverDelay, longer than fence), and a node that
// comes back does not run work from a map it has not caught up on. Calls
// more than fence apart (the process was frozen) and a change between
// leading and following count as a loss of contact. Call it at least
// every fence/2; it does no I/O (the checks run in the background).
func (n *Node) InContact(fence time.Duration) bool {
	f := &n.fence
	leader := n.raft.State() == raft.Leader
	_, id := n.raft.LeaderWithID()
	lc := n.raft.LastContact()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if (!f.lastCall.IsZero() && now.Sub(f.lastCall) >= fence) || leader != f.leader {
		f.drop() // this process did not run for a while, or its role changed: contact unknown
	}
	f.lastCall, f.leader = now, leader
	if leader {
		if n.readyTerm.Load() != n.raft.CurrentTerm() {
			f.drop()
			return false
		}
		if !f.lifted && !f.asking {
			lost := f.lost
			if n.goRun(func(context.Context) { n.verifyLeader(lost) }) {
				f.asking = true
			}
		}
		return f.lifted
	}
	if lc.IsZero() || now.Sub(lc) >= fence {
		if f.lifted || f.target != 0 {
			n.log.Warn("no contact with a leader: this node stops the LoT work it owns until it is back and caught up",
				"lastContact", now.Sub(lc).Round(time.Millisecond).String())
		}
		f.drop()
		return false
	}
	if f.lifted {
		return true // also while an election runs: the fence counts from the last contact
	}
	if id == "" {
		return false
	}
	if f.target != 0 && n.raft.AppliedIndex() >= f.target {
		f.lifted = true
		return true
	}
	if f.target == 0 && !f.asking {
		lost := f.lost
		if n.goRun(func(ctx context.Context) { n.askCommit(ctx, string(id), lost) }) {
			f.asking = true
		}
	}
	return false
}

// verifyLeader lifts the fence of a leader once a quorum confirmed its
// leadership (raft.VerifyLeader).
func (n *Node) verifyLeader(lost uint64) {
	ok := n.raft.VerifyLeader().Error() == nil
	n.fence.mu.Lock()
	defer n.fence.mu.Unlock()
	n.fence.asking = false
	if ok && n.fence.lost == lost {
		n.fence.lifted = true
	}
}

// askCommit asks the leader id for its commit index (GET PeerPath), for
// the fence to lift once this node applied that far.
func (n *Node) askCommit(ctx context.Context, id string, lost uint64) {
	defer func() {
		n.fence.mu.Lock()
		n.fence.asking = false
		n.fence.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, n.peerTimeout())
	defer cancel()
	ops := n.PeerOps(ctx, id)
	if ops == "" {
		return
	}
	h, err := n.fetchHello(ctx, ops)
	if err != nil || h.NodeName != id || h.Leader != id || h.CommitIndex == 0 {
		return // asked again on the next call
	}
	n.fence.mu.Lock()
	if n.fence.lost == lost {
		n.fence.target = h.CommitIndex
	}
	n.fence.mu.Unlock()
}

// FailoverDelay is the silence after which a member's work moves.
func (n *Node) FailoverDelay() time.Duration { return n.opts.FailoverDelay }
