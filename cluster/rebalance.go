package cluster

import (
	"slices"

	"gantry/cluster/partition"
)

// maxPlanRounds bounds the plan–catch-up rounds of one rebalance.
const maxPlanRounds = 4

// rebalance commits a new partition map when the live members call for
// one. Members that left the membership are forgotten first (their copies
// are gone for good); members silent for FailoverDelay are not live, so
// their partitions move to nodes that hold copies.
//
// When the data plane fills new copies (SetCopiesReported), a new copy
// stays syncing until its partition's owner reports it filled
// (ReportCaughtUp, an opCaughtUp command), and a later round moves owners
// onto it. Without it a new copy holds nothing to catch up on: the leader
// marks it caught up in the same round, and plans again so that owners
// spread onto the new copies.
func (n *Node) rebalance() {
	members, _, err := n.members()
	if err != nil {
		return
	}
	cur := n.fsm.current().Partitions
	next := cur.Forget(lostNodes(cur, members)...)
	live := n.liveMembers(members)
	var moves []partition.Move
	for range maxPlanRounds {
		planned, m, err := partition.Rebalance(next, live, n.opts.PartitionCount, n.opts.ReplicationFactor)
		if err != nil {
			n.log.Error("cannot plan the partition map", "err", err)
			return
		}
		moves = append(moves, m...)
		if n.copiesReported.Load() {
			next = planned
			break
		}
		caught := markAllCaughtUp(planned)
		if caught.Version == next.Version {
			break
		}
		next = caught
	}
	if next.Version == cur.Version {
		return
	}
	if err := n.apply(command{Version: commandVersion, Op: opPartitions, Partitions: &next}); err != nil {
		n.log.Warn("cannot commit the partition map", "err", err)
		return
	}
	n.log.Info("partition map changed", "version", next.Version, "live", live, "moves", len(moves))
}

// lostNodes are the nodes the map places copies on that are no longer
// members.
func lostNodes(m partition.Map, members map[string]member) []string {
	var lost []string
	for _, a := range m.Partitions {
		for _, list := range [][]string{a.Replicas, a.Syncing} {
			for _, r := range list {
				if _, ok := members[r]; !ok && !slices.Contains(lost, r) {
					lost = append(lost, r)
				}
			}
		}
	}
	slices.Sort(lost)
	return lost
}

// markAllCaughtUp marks every syncing copy caught up, as MarkCaughtUp
// would one by one, with a single new Version.
func markAllCaughtUp(m partition.Map) partition.Map {
	syncing := slices.ContainsFunc(m.Partitions, func(a partition.Assignment) bool { return len(a.Syncing) > 0 })
	if !syncing {
		return m
	}
	next := m.Clone()
	next.Version++
	for i := range next.Partitions {
		next.Partitions[i].Syncing = nil
	}
	return next
}
