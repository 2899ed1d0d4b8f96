package partition

import "slices"

// copyPlan is the state of placeCopies: the desired copies per node
// (load), what each node should hold (target) and, for every owner o and
// node n, how many of o's partitions n has a copy of (pairs).
type copyPlan struct {
	pl     *planner
	load   []int
	target []int
	// pairs[o][n] counts the partitions o owns that n holds a copy of.
	// Spreading each owner's copies over all the other nodes spreads its
	// partitions over all of them when it is lost, instead of piling
	// them onto two or three.
	pairs [][]int
}

// placeCopies decides the desired copies of every active partition. It
// starts from its live copies and its desired owner and brings every
// partition to r copies and every node to its share with as few new
// copies as possible:
//
//  1. fill: the copies a partition lacks go to nodes below their target;
//  2. trim: the copies a partition has too many of leave nodes above
//     their target, syncing ones before caught-up ones;
//  3. spread: a node still below its target joins partitions that have a
//     copy on a node above its target, which step 2 then trims;
//  4. any imbalance left moves along chains of copy moves.
//
// Steps 1 and 2 match a whole batch at once (see matcher), and every
// choice between equals prefers the node sharing the fewest partitions
// with the owner.
func (pl *planner) placeCopies() {
	if len(pl.nodes) == 0 {
		return
	}
	c := &copyPlan{pl: pl, load: make([]int, len(pl.nodes)), pairs: make([][]int, len(pl.nodes))}
	for n := range c.pairs {
		c.pairs[n] = make([]int, len(pl.nodes))
	}
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
			c.load[n]++
			c.pairs[p.owner][n]++
		}
		total += pl.r
	}
	c.target = targets(c.load, total)
	c.fill()
	c.trim()
	if c.spread() {
		c.trim()
	}
	c.shiftAll()
}

func (c *copyPlan) add(p *plan, n int) {
	p.want = insertSorted(p.want, n)
	c.load[n]++
	c.pairs[p.owner][n]++
}

func (c *copyPlan) drop(p *plan, n int) {
	p.want = slices.DeleteFunc(p.want, func(v int) bool { return v == n })
	c.load[n]--
	c.pairs[p.owner][n]--
}

// fill gives every partition below r copies the ones it lacks.
func (c *copyPlan) fill() {
	pl := c.pl
	var items []int
	for i := range pl.parts {
		if p := &pl.parts[i]; p.active() && len(p.want) < pl.r {
			items = append(items, i)
		}
	}
	room := make([]int, len(c.load))
	for n := range room {
		room[n] = max(0, c.target[n]-c.load[n])
	}
	m := newMatcher(room, len(items), func(k int) []int {
		p := &pl.parts[items[k]]
		out := pl.missing(p)
		pairs := c.pairs[p.owner]
		slices.SortStableFunc(out, func(a, b int) int { return cmpKeys(room[b], room[a], pairs[a], pairs[b]) })
		return out
	})
	m.link = func(k, n int) { c.pairs[pl.parts[items[k]].owner][n]++ }
	m.unlink = func(k, n int) { c.pairs[pl.parts[items[k]].owner][n]-- }
	for k, i := range items {
		for range pl.r - len(pl.parts[i].want) {
			if !m.take(k) {
				break
			}
		}
	}
	for k, i := range items {
		p := &pl.parts[i]
		for _, n := range m.got[k] {
			c.pairs[p.owner][n]-- // add counts it again
			c.add(p, n)
		}
		for len(p.want) < pl.r {
			c.add(p, c.spare(p))
		}
	}
}

// trim takes from every partition above r copies the ones it has too
// many of.
func (c *copyPlan) trim() {
	pl := c.pl
	var items []int
	for i := range pl.parts {
		if p := &pl.parts[i]; p.active() && len(p.want) > pl.r {
			items = append(items, i)
		}
	}
	room := make([]int, len(c.load))
	for n := range room {
		room[n] = max(0, c.load[n]-c.target[n])
	}
	m := newMatcher(room, len(items), func(k int) []int {
		p := &pl.parts[items[k]]
		out := slices.DeleteFunc(slices.Clone(p.want), func(n int) bool { return n == p.owner })
		slices.SortStableFunc(out, func(a, b int) int { return c.surplusOrder(p, room, a, b) })
		return out
	})
	for k, i := range items {
		for range len(pl.parts[i].want) - pl.r {
			if !m.take(k) {
				break
			}
		}
	}
	for k, i := range items {
		p := &pl.parts[i]
		for _, n := range m.got[k] {
			c.drop(p, n)
		}
		for len(p.want) > pl.r {
			c.drop(p, c.surplus(p))
		}
	}
}

// surplusOrder orders the copies of p to give up, best first: the node
// with the most room (how far above its target), then a copy without data,
// then the node sharing the most partitions with the owner, then the
// lowest index.
func (c *copyPlan) surplusOrder(p *plan, room []int, a, b int) int {
	return cmpKeys(room[b], room[a], bool01(p.isCaught(a)), bool01(p.isCaught(b)), c.pairs[p.owner][b], c.pairs[p.owner][a])
}

// surplus picks the copy of p to give up when no node above its target
// holds one: the best by surplusOrder with load-target as the room.
func (c *copyPlan) surplus(p *plan) int {
	over := make([]int, len(c.load))
	for n := range over {
		over[n] = c.load[n] - c.target[n]
	}
	best := -1
	for _, n := range p.want {
		if n != p.owner && (best < 0 || c.surplusOrder(p, over, n, best) < 0) {
			best = n
		}
	}
	return best
}

// spare picks the node for a new copy of p when no node below its target
// can take it: the most below its target, then the one sharing the
// fewest partitions with the owner, then the lowest index.
func (c *copyPlan) spare(p *plan) int {
	pairs := c.pairs[p.owner]
	best := -1
	for _, n := range c.pl.missing(p) {
		if best < 0 || cmpKeys(c.load[n]-c.target[n], c.load[best]-c.target[best], pairs[n], pairs[best]) < 0 {
			best = n
		}
	}
	return best
}

// spread adds every node below its target to partitions holding a copy
// on a node above its target (at most one addition per partition), so
// that trim can take that copy away. Among the candidates it takes, in
// turn, a partition of the owner sharing the fewest partitions with the
// node; within one owner, partitions whose copy on the node above target
// is still syncing (a move not made yet) first, then by index. It
// reports whether it added anything.
func (c *copyPlan) spread() bool {
	pl := c.pl
	budget := make([]int, len(c.load)) // copies each node above target may still give up
	for n := range budget {
		budget[n] = max(0, c.load[n]-c.target[n])
	}
	touched := make([]bool, len(pl.parts))
	added := false
	for y := range c.load {
		need := c.target[y] - c.load[y]
		if need <= 0 {
			continue
		}
		byOwner := make([][]int, len(c.load)) // candidate partitions of each owner, best first
		for i := range pl.parts {
			p := &pl.parts[i]
			if p.active() && !touched[i] && !slices.Contains(p.want, y) && c.giver(p, budget) >= 0 {
				byOwner[p.owner] = append(byOwner[p.owner], i)
			}
		}
		for o := range byOwner {
			slices.SortStableFunc(byOwner[o], func(a, b int) int {
				return cmpKeys(bool01(pl.parts[a].isCaught(c.giver(&pl.parts[a], budget))), bool01(pl.parts[b].isCaught(c.giver(&pl.parts[b], budget))))
			})
		}
		for ; need > 0; need-- {
			o := -1
			for v := range byOwner {
				if len(byOwner[v]) > 0 && (o < 0 || c.pairs[v][y] < c.pairs[o][y]) {
					o = v
				}
			}
			if o < 0 {
				break
			}
			i := byOwner[o][0]
			byOwner[o] = byOwner[o][1:]
			p := &pl.parts[i]
			x := c.giver(p, budget)
			if x < 0 {
				need++ // its givers ran out of budget meanwhile; try the next
				continue
			}
			budget[x]--
			touched[i] = true
			c.add(p, y)
			added = true
		}
	}
	return added
}

// giver is the copy of p, not the owner's, on the node furthest above its
// target with budget left, a syncing one first; -1 if there is none.
func (c *copyPlan) giver(p *plan, budget []int) int {
	best := -1
	for _, n := range p.want {
		if n == p.owner || budget[n] <= 0 {
			continue
		}
		if best < 0 || cmpKeys(budget[n], budget[best], bool01(p.isCaught(best)), bool01(p.isCaught(n))) > 0 {
			best = n
		}
	}
	return best
}

// shiftAll moves what imbalance is left along chains of copy moves: first
// copies that hold no data yet, then caught-up ones.
func (c *copyPlan) shiftAll() {
	pl := c.pl
	holds := make([][]int, len(c.load))
	for i := range pl.parts {
		if p := &pl.parts[i]; p.active() {
			for _, n := range p.want {
				if n != p.owner {
					holds[n] = append(holds[n], i)
				}
			}
		}
	}
	for _, onlyEmpty := range []bool{true, false} {
		edges := func(p *plan, from int, to func(int) bool) bool {
			if from == p.owner || !slices.Contains(p.want, from) || (onlyEmpty && p.isCaught(from)) {
				return false
			}
			for n := range pl.nodes {
				if !slices.Contains(p.want, n) && to(n) {
					return true
				}
			}
			return false
		}
		apply := func(p *plan, from, to int) {
			c.drop(p, from)
			c.add(p, to)
			c.load[from]++ // shift keeps load itself
			c.load[to]--
		}
		for pl.shift(c.load, c.target, holds, edges, apply) {
		}
	}
}

// missing lists the live nodes without a desired copy of p.
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

func bool01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cmpKeys compares (a0, a1, …) with (b0, b1, …) lexically; the arguments
// alternate: a0, b0, a1, b1, ….
func cmpKeys(ab ...int) int {
	for i := 0; i+1 < len(ab); i += 2 {
		if ab[i] != ab[i+1] {
			return ab[i] - ab[i+1]
		}
	}
	return 0
}
