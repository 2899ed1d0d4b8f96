package partition

import (
	"fmt"
	"slices"
)

// Rebalance plans the next map from prev for the live nodes (by
// NodeName), count partitions (1..MaxCount) and replication factor rf
// (1..MaxReplicationFactor), and lists the moves between the two. It is a
// pure function: the same arguments give the same result on every node
// and every run. The rules are in doc.go. When nothing changes it returns
// prev's content, the same Version and no moves; otherwise Version is
// prev.Version+1. The order of nodes does not matter; duplicates and
// empty names are ignored. prev must pass Validate.
func Rebalance(prev Map, nodes []string, count, rf int) (Map, []Move, error) {
	if count < 1 || count > MaxCount {
		return prev, nil, fmt.Errorf("%w: count = %d, want 1..%d", ErrOutOfRange, count, MaxCount)
	}
	if rf < 1 || rf > MaxReplicationFactor {
		return prev, nil, fmt.Errorf("%w: replication factor = %d, want 1..%d", ErrOutOfRange, rf, MaxReplicationFactor)
	}
	for _, n := range nodes {
		if len(n) > MaxNodeName {
			return prev, nil, fmt.Errorf("%w: node name %.20q… is %d bytes, want at most %d", ErrOutOfRange, n, len(n), MaxNodeName)
		}
	}
	if err := prev.Validate(); err != nil {
		return prev, nil, err
	}
	pl := newPlanner(nodes, rf)
	pl.load(prev, count)
	pl.placeOwners()
	pl.placeCopies()
	if pl.balanceOwners(tierAny) {
		// Some node takes ownership of a partition it has no copy of
		// yet: give it that copy, and spread the copies again.
		pl.placeCopies()
	}
	next := pl.build(prev)
	if slices.EqualFunc(prev.Partitions, next.Partitions, Assignment.equal) {
		return prev, nil, nil
	}
	return next, diff(prev, next, pl.isLive), nil
}

// planner holds one Rebalance computation. Nodes are referred to by
// their index in nodes, which is sorted, so that index order is name
// order and every loop is deterministic.
type planner struct {
	nodes []string       // live nodes, sorted, distinct, non-empty
	index map[string]int // node name → index in nodes
	r     int            // copies per partition: min(rf, len(nodes))
	parts []plan         // one per partition of the next map

	ownerTarget []int // partitions each node should own, set by placeOwners
}

// plan is the state of one partition during planning.
type plan struct {
	prev     Assignment // the partition in prev (zero for a new one)
	fresh    bool       // no copy recorded anywhere: the partition holds no data yet
	stranded bool       // has data, but no live node holds a caught-up copy
	caught   []int      // live nodes holding a caught-up copy (prev owner included), ascending
	syncing  []int      // live nodes holding a syncing copy, ascending
	fallback int        // the owner the partition can have right now; -1 none
	owner    int        // desired owner; -1 none
	want     []int      // desired copies, ascending
}

// active reports whether the partition takes part in balancing.
func (p *plan) active() bool { return !p.stranded && p.owner >= 0 }

// isCaught reports whether node n holds a caught-up copy.
func (p *plan) isCaught(n int) bool { _, ok := slices.BinarySearch(p.caught, n); return ok }

func newPlanner(nodes []string, rf int) *planner {
	live := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == "" })
	slices.Sort(live)
	live = slices.Compact(live)
	pl := &planner{nodes: live, index: make(map[string]int, len(live)), r: min(rf, len(live))}
	for i, n := range live {
		pl.index[n] = i
	}
	return pl
}

func (pl *planner) isLive(n string) bool { _, ok := pl.index[n]; return ok }

// load classifies every partition of the next map from prev.
func (pl *planner) load(prev Map, count int) {
	pl.parts = make([]plan, count)
	for i := range pl.parts {
		p := &pl.parts[i]
		p.fallback, p.owner = -1, -1
		if i < len(prev.Partitions) {
			p.prev = prev.Partitions[i]
		}
		p.fresh = p.prev.Owner == "" && len(p.prev.Replicas) == 0
		for _, r := range p.prev.Replicas {
			n, ok := pl.index[r]
			switch {
			case !ok:
			case slices.Contains(p.prev.Syncing, r):
				p.syncing = append(p.syncing, n)
			default:
				p.caught = append(p.caught, n)
			}
		}
		slices.Sort(p.caught)
		slices.Sort(p.syncing)
		p.stranded = !p.fresh && len(p.caught) == 0
		if n, ok := pl.index[p.prev.Owner]; ok {
			p.fallback, p.owner = n, n
		}
	}
}

// leastLoaded returns the node of from with the lowest load-target, the
// lowest index on a tie. from must not be empty.
func leastLoaded(from []int, load, target []int) int {
	best, bestV := -1, 0
	for _, n := range from {
		if v := load[n] - target[n]; best < 0 || v < bestV {
			best, bestV = n, v
		}
	}
	return best
}

// targets spreads total evenly over the nodes: every node gets
// total/len(load), and the total%len(load) nodes with the highest load now
// (lowest index on a tie) one more, so that as little as possible moves.
func targets(load []int, total int) []int {
	n := len(load)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return load[b] - load[a] })
	t := make([]int, n)
	for i, v := range order {
		t[v] = total / n
		if i < total%n {
			t[v]++
		}
	}
	return t
}

// build turns the plan into the next map, taking only the steps that are
// safe now (see doc.go): ownership moves only to a caught-up copy, and a
// caught-up copy is given up only once the desired layout is reached.
func (pl *planner) build(prev Map) Map {
	next := Map{Version: prev.Version + 1, Partitions: make([]Assignment, len(pl.parts))}
	for i := range pl.parts {
		p := &pl.parts[i]
		var a Assignment
		switch {
		case p.stranded:
			a = pl.strand(p)
		case p.owner < 0:
			// fresh, and no live node to place it on
		default:
			a = pl.assignment(p)
		}
		a.Epoch = p.prev.Epoch
		if a.Owner != p.prev.Owner {
			a.Epoch = next.Version
		}
		next.Partitions[i] = a
	}
	return next
}

// strand keeps the lost nodes that hold the last caught-up copies of p,
// so that the partition can be promoted when one of them returns.
func (pl *planner) strand(p *plan) Assignment {
	var keep []string
	for _, r := range p.prev.Replicas {
		if !slices.Contains(p.prev.Syncing, r) {
			keep = append(keep, r)
		}
	}
	slices.Sort(keep)
	return Assignment{Replicas: keep}
}

// assignment computes the next placement of an active partition: the
// desired owner if it holds a caught-up copy (else the one it can have),
// every copy it has or the layout wants (new ones syncing unless the
// partition is fresh), minus the copies rule 4 of doc.go lets go.
func (pl *planner) assignment(p *plan) Assignment {
	owner := p.owner
	if !p.fresh && !p.isCaught(owner) {
		owner = p.fallback
	}
	caught := slices.Clone(p.caught)
	syncing := slices.Clone(p.syncing)
	// A syncing copy the layout no longer wants is dropped at once: it
	// protects nothing.
	syncing = slices.DeleteFunc(syncing, func(n int) bool { return !slices.Contains(p.want, n) })
	for _, n := range p.want {
		if slices.Contains(caught, n) || slices.Contains(syncing, n) {
			continue
		}
		if p.fresh {
			caught = insertSorted(caught, n)
		} else {
			syncing = insertSorted(syncing, n)
		}
	}
	if owner == p.owner && len(syncing) == 0 {
		caught = slices.DeleteFunc(caught, func(n int) bool { return !slices.Contains(p.want, n) })
	}
	a := Assignment{Owner: pl.nodes[owner], Replicas: []string{pl.nodes[owner]}}
	for _, n := range caught {
		if n != owner {
			a.Replicas = append(a.Replicas, pl.nodes[n])
		}
	}
	for _, n := range syncing {
		a.Replicas = append(a.Replicas, pl.nodes[n])
		a.Syncing = append(a.Syncing, pl.nodes[n])
	}
	slices.Sort(a.Replicas[1:])
	return a
}
