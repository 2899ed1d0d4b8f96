package partition

import "slices"

// matcher assigns units to nodes within each node's room, by augmenting
// paths (Kuhn's bipartite matching, with capacities): an item (a
// partition) needs some distinct nodes among its candidates; when every
// candidate is full, one of them gives up an earlier item if that item
// can go elsewhere. Items are planned, not yet real, so re-routing them
// is free; this is what lets a whole batch (the partitions of a lost
// node, the copies a new node needs) land within the targets without
// extra moves, where taking the items one by one greedily would strand
// the last ones.
type matcher struct {
	room   []int   // per node: how many more items it takes
	got    [][]int // per item: the nodes it holds
	byNode [][]int // per node: the items it holds
	// cands lists item i's candidate nodes, best first; it may read room.
	cands func(i int) []int
	// link and unlink, if set, observe the assignments as they change.
	link, unlink func(i, node int)
}

func newMatcher(room []int, items int, cands func(int) []int) *matcher {
	return &matcher{room: room, got: make([][]int, items), byNode: make([][]int, len(room)), cands: cands}
}

// take gives item i one more node and reports whether it found one.
func (m *matcher) take(i int) bool { return m.augment(i, make([]bool, len(m.room))) }

func (m *matcher) augment(i int, seen []bool) bool {
	cands := slices.DeleteFunc(m.cands(i), func(y int) bool { return slices.Contains(m.got[i], y) })
	for _, y := range cands {
		if m.room[y] > 0 {
			m.room[y]--
			m.add(i, y)
			return true
		}
	}
	for _, y := range cands {
		if seen[y] {
			continue
		}
		seen[y] = true
		for _, j := range m.byNode[y] {
			if m.augment(j, seen) {
				m.remove(j, y)
				m.add(i, y)
				return true
			}
		}
	}
	return false
}

func (m *matcher) add(i, y int) {
	m.got[i] = append(m.got[i], y)
	m.byNode[y] = append(m.byNode[y], i)
	if m.link != nil {
		m.link(i, y)
	}
}

func (m *matcher) remove(i, y int) {
	m.got[i] = slices.DeleteFunc(m.got[i], func(v int) bool { return v == y })
	m.byNode[y] = slices.DeleteFunc(m.byNode[y], func(v int) bool { return v == i })
	if m.unlink != nil {
		m.unlink(i, y)
	}
}

// edgeFunc offers the moves of one unit of partition p held by node from:
// it calls to with each node the unit may move to, in order, until to
// returns true, and reports whether it did.
type edgeFunc func(p *plan, from int, to func(int) bool) bool

// shift moves one unit (an ownership or a copy) from a node above its
// target to one below it, along the shortest chain of moves; it reports
// whether it found one. holds lists the partitions whose unit a node
// holds; edges and apply offer and make a move.
func (pl *planner) shift(load, target []int, holds [][]int, edges edgeFunc, apply func(p *plan, from, to int)) bool {
	var over []int
	under := false
	for v := range load {
		if load[v] > target[v] {
			over = append(over, v)
		}
		under = under || load[v] < target[v]
	}
	if len(over) == 0 || !under {
		return false
	}
	const unseen, source = -1, -2
	prevNode := make([]int, len(load)) // node the chain reached this node from
	via := make([]int, len(load))      // partition of that link
	for v := range prevNode {
		prevNode[v] = unseen
	}
	for _, s := range over {
		prevNode[s] = source
	}
	queue, sink := over, -1
	for qi := 0; qi < len(queue) && sink < 0; qi++ {
		x := queue[qi]
		for _, i := range holds[x] {
			edges(&pl.parts[i], x, func(y int) bool {
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
		holds[y] = append(holds[y], via[y]) // keep holds usable for the next call
		y = x
	}
	load[y]--
	load[sink]++
	return true
}
