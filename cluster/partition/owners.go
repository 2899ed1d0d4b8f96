package partition

import "slices"

// Tiers of ownership moves, tried in order: a partition's ownership moves
// to a node with a caught-up copy, then to one with a syncing copy, then
// to one the desired layout gives a copy, and only then to any node. Only
// the first is a transfer build makes at once; the others shape the
// desired layout, which the real owner follows once that copy has caught
// up.
const (
	tierCaughtUp = iota
	tierSyncing
	tierWanted
	tierAny
)

// placeOwners gives a desired owner to every partition without a live
// one, then balances the owners with transfers to caught-up and syncing
// copies only. A partition whose owner is gone may go to a live node
// holding a caught-up copy (failover), a fresh one to any node. They are
// matched together to the room below the nodes' owner targets; one that
// finds no room goes to the least loaded candidate, and the balancing
// that follows moves ownership along chains of caught-up copies.
func (pl *planner) placeOwners() {
	if len(pl.nodes) == 0 {
		return
	}
	load := make([]int, len(pl.nodes))
	total := 0
	var orphans []int
	for i := range pl.parts {
		p := &pl.parts[i]
		switch {
		case p.stranded:
			continue
		case p.owner >= 0:
			load[p.owner]++
		default:
			orphans = append(orphans, i)
		}
		total++
	}
	pl.ownerTarget = targets(load, total)
	room := make([]int, len(load))
	for n := range room {
		room[n] = max(0, pl.ownerTarget[n]-load[n])
	}
	m := newMatcher(room, len(orphans), func(k int) []int {
		return byMostRoom(pl.ownerCandidatesOf(&pl.parts[orphans[k]]), room)
	})
	var unmatched []int
	for k := range orphans {
		if !m.take(k) {
			unmatched = append(unmatched, k)
		}
	}
	for k, i := range orphans {
		if len(m.got[k]) > 0 {
			n := m.got[k][0]
			pl.parts[i].owner, pl.parts[i].fallback = n, n
			load[n]++
		}
	}
	for _, k := range unmatched {
		p := &pl.parts[orphans[k]]
		n := leastLoaded(pl.ownerCandidatesOf(p), load, pl.ownerTarget)
		p.owner, p.fallback = n, n
		load[n]++
	}
	pl.balanceOwners(tierSyncing)
}

// byMostRoom sorts a copy of nodes by room, most first, then by index.
func byMostRoom(nodes, room []int) []int {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b int) int { return room[b] - room[a] })
	return out
}

// ownerCandidatesOf lists the nodes that may own partition p, which has
// no live owner: those with a caught-up copy, or every node if p is fresh.
func (pl *planner) ownerCandidatesOf(p *plan) []int {
	if !p.fresh {
		return p.caught
	}
	all := make([]int, len(pl.nodes))
	for i := range all {
		all[i] = i
	}
	return all
}

// balanceOwners moves desired ownership from nodes above their target to
// nodes below it, along the shortest chain of transfers, trying the tiers
// up to upTo in order so that ownership goes where the data is. It
// reports whether a tierAny move was needed.
func (pl *planner) balanceOwners(upTo int) (anyMoved bool) {
	if len(pl.nodes) == 0 {
		return false
	}
	load := make([]int, len(pl.nodes))
	holds := make([][]int, len(pl.nodes))
	for i := range pl.parts {
		if p := &pl.parts[i]; p.active() {
			load[p.owner]++
			holds[p.owner] = append(holds[p.owner], i)
		}
	}
	for tier := tierCaughtUp; tier <= upTo; tier++ {
		for pl.shift(load, pl.ownerTarget, holds, pl.ownerEdges(tier), applyOwner) {
			anyMoved = anyMoved || tier == tierAny
		}
	}
	return anyMoved
}

func applyOwner(p *plan, _, to int) { p.owner = to }

// ownerEdges offers the nodes a partition's ownership may move to at
// tier, in index order.
func (pl *planner) ownerEdges(tier int) edgeFunc {
	return func(p *plan, from int, to func(int) bool) bool {
		if p.owner != from {
			return false
		}
		for n := range pl.nodes {
			if n == from {
				continue
			}
			ok := p.isCaught(n)
			if tier >= tierSyncing && !ok {
				_, ok = slices.BinarySearch(p.syncing, n)
			}
			if tier >= tierWanted && !ok {
				_, ok = slices.BinarySearch(p.want, n)
			}
			if (ok || tier >= tierAny) && to(n) {
				return true
			}
		}
		return false
	}
}
