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
	pl.failover()
	pl.balanceOwners(tierSyncing)
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

// failover gives an owner to every partition whose owner is gone: the
// least loaded live node holding a caught-up copy (lowest name on a tie),
// or, for a fresh partition, the least loaded live node.
func (pl *planner) failover() {
	if len(pl.nodes) == 0 {
		return
	}
	load := make([]int, len(pl.nodes))
	for i := range pl.parts {
		if p := &pl.parts[i]; p.owner >= 0 {
			load[p.owner]++
		}
	}
	all := make([]int, len(pl.nodes))
	for i := range all {
		all[i] = i
	}
	for i := range pl.parts {
		p := &pl.parts[i]
		if p.owner >= 0 || p.stranded {
			continue
		}
		from := p.caught
		if p.fresh {
			from = all
		}
		n := leastLoaded(from, load, nil)
		p.fallback, p.owner = n, n
		load[n]++
	}
}

// leastLoaded returns the node of from with the lowest load-target (target
// nil means 0), the lowest index on a tie. from must not be empty.
func leastLoaded(from []int, load, target []int) int {
	best, bestV := -1, 0
	for _, n := range from {
		v := load[n]
		if target != nil {
			v -= target[n]
		}
		if best < 0 || v < bestV {
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

// Ownership edge tiers, tried in order: a partition's ownership moves to
// a node with a caught-up copy, then to one with a syncing copy, then to
// one the desired layout gives a copy, and only then to any node. Only
// the first is a real transfer; the others are the desired layout, which
// the real owner follows once that copy has caught up.
const (
	tierCaughtUp = iota
	tierSyncing
	tierWanted
	tierAny
)

// balanceOwners moves desired ownership from nodes above their target to
// nodes below it, along the shortest chain of transfers, trying the tiers
// up to upTo in order so that ownership goes where the data is. It
// reports whether a tierAny transfer was needed.
func (pl *planner) balanceOwners(upTo int) (anyMoved bool) {
	if len(pl.nodes) == 0 {
		return false
	}
	load := make([]int, len(pl.nodes))
	total := 0
	for i := range pl.parts {
		if p := &pl.parts[i]; p.active() {
			load[p.owner]++
			total++
		}
	}
	target := targets(load, total)
	for tier := tierCaughtUp; tier <= upTo; tier++ {
		for pl.shift(load, target, func(p *plan, from int, to func(int) bool) bool {
			return p.owner == from && pl.ownerCandidates(p, tier, to)
		}, func(p *plan, from, to int) { p.owner = to }) {
			anyMoved = anyMoved || tier == tierAny
		}
	}
	return anyMoved
}

// ownerCandidates calls to, in node order, with each node partition p's
// ownership may move to at tier, until to returns true.
func (pl *planner) ownerCandidates(p *plan, tier int, to func(int) bool) bool {
	for n := range pl.nodes {
		if n == p.owner {
			continue
		}
		ok := p.isCaught(n)
		if tier >= tierSyncing && !ok {
			_, ok = slices.BinarySearch(p.syncing, n)
		}
		if tier >= tierWanted && !ok {
			_, ok = slices.BinarySearch(p.want, n)
		}
		if tier >= tierAny {
			ok = true
		}
		if ok && to(n) {
			return true
		}
	}
	return false
}

// shift finds the shortest chain from a node above its target to one
// below it, where each link moves one unit (an ownership or a copy) of a
// partition from one node to the next, and applies it. edges(p, from,
// to) offers the nodes a unit of p held by from may move to, calling to
// for each; apply moves it. shift reports whether it moved anything.
func (pl *planner) shift(load, target []int, edges func(p *plan, from int, to func(int) bool) bool, apply func(p *plan, from, to int)) bool {
	const unseen, source = -1, -2
	n := len(load)
	prevNode := make([]int, n) // node the chain reached this node from
	via := make([]int, n)      // partition of that link
	var queue []int
	under := false
	for v := range n {
		prevNode[v] = unseen
		if load[v] > target[v] {
			prevNode[v] = source
			queue = append(queue, v)
		}
		under = under || load[v] < target[v]
	}
	if len(queue) == 0 || !under {
		return false
	}
	sink := -1
	for qi := 0; qi < len(queue) && sink < 0; qi++ {
		x := queue[qi]
		for i := range pl.parts {
			p := &pl.parts[i]
			if !p.active() {
				continue
			}
			edges(p, x, func(y int) bool {
				if prevNode[y] != unseen {
					return false
				}
				prevNode[y], via[y] = x, i
				if load[y] < target[y] {
					sink = y
					return true
				}
				queue = append(queue, y)
				return false
			})
			if sink >= 0 {
				break
			}
		}
	}
	if sink < 0 {
		return false
	}
	y := sink
	for prevNode[y] != source {
		x := prevNode[y]
		apply(&pl.parts[via[y]], x, y)
		y = x
	}
	load[y]--
	load[sink]++
	return true
}

// placeCopies decides the desired copies of every active partition: its
// current live copies and its desired owner, trimmed or filled to r
// copies, then spread evenly over the nodes with as few moves as
// possible.
func (pl *planner) placeCopies() {
	if len(pl.nodes) == 0 {
		return
	}
	load := make([]int, len(pl.nodes))
	total := 0
	for i := range pl.parts {
		p := &pl.parts[i]
		if !p.active() {
			continue
		}
		p.want = append(append(append([]int(nil), p.caught...), p.syncing...), p.owner)
		slices.Sort(p.want)
		p.want = slices.Compact(p.want)
		for _, n := range p.want {
			load[n]++
		}
		total += pl.r
	}
	target := targets(load, total)
	for i := range pl.parts {
		p := &pl.parts[i]
		for p.active() && len(p.want) > pl.r {
			n := pl.surplus(p, load, target)
			p.want = slices.DeleteFunc(p.want, func(v int) bool { return v == n })
			load[n]--
		}
		for p.active() && len(p.want) < pl.r {
			n := leastLoaded(pl.missing(p), load, target)
			p.want = insertSorted(p.want, n)
			load[n]++
		}
	}
	// First undo copies that hold no data yet, then move caught-up ones.
	for _, onlyEmpty := range []bool{true, false} {
		for pl.shift(load, target, func(p *plan, from int, to func(int) bool) bool {
			if from == p.owner || !slices.Contains(p.want, from) || (onlyEmpty && p.isCaught(from)) {
				return false
			}
			for _, n := range pl.missing(p) {
				if to(n) {
					return true
				}
			}
			return false
		}, func(p *plan, from, to int) {
			p.want = insertSorted(slices.DeleteFunc(p.want, func(v int) bool { return v == from }), to)
		}) {
		}
	}
}

// surplus picks the desired copy of p to give up: never the owner's; the
// one on the node most above its target, then one without data, then the
// lowest name.
func (pl *planner) surplus(p *plan, load, target []int) int {
	best, bestV, bestCaught := -1, 0, false
	for _, n := range p.want {
		if n == p.owner {
			continue
		}
		v, c := load[n]-target[n], p.isCaught(n)
		if best < 0 || v > bestV || (v == bestV && bestCaught && !c) {
			best, bestV, bestCaught = n, v, c
		}
	}
	return best
}

// missing lists the live nodes not in p's desired copies.
func (pl *planner) missing(p *plan) []int {
	out := make([]int, 0, len(pl.nodes))
	for n := range pl.nodes {
		if !slices.Contains(p.want, n) {
			out = append(out, n)
		}
	}
	return out
}

func insertSorted(s []int, v int) []int {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
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
			a = pl.settle(p)
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

// settle computes the next placement of an active partition.
func (pl *planner) settle(p *plan) Assignment {
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
