package partition

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// part builds an Assignment: the owner (or ""), then the replicas other
// than the owner; a name ending in "*" is syncing.
func part(epoch uint64, owner string, others ...string) Assignment {
	a := Assignment{Owner: owner, Epoch: epoch}
	if owner != "" {
		a.Replicas = []string{owner}
	}
	for _, r := range others {
		name, syncing := strings.CutSuffix(r, "*")
		a.Replicas = append(a.Replicas, name)
		if syncing {
			a.Syncing = append(a.Syncing, name)
		}
	}
	return a
}

func dump(m Map) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d\n", m.Version)
	for p, a := range m.Partitions {
		fmt.Fprintf(&b, "  %3d owner=%-4q replicas=%v syncing=%v epoch=%d\n", p, a.Owner, a.Replicas, a.Syncing, a.Epoch)
	}
	return b.String()
}

func mustRebalance(t testing.TB, prev Map, nodes []string, count, rf int) (Map, []Move) {
	t.Helper()
	next, moves, err := Rebalance(prev, nodes, count, rf)
	if err != nil {
		t.Fatalf("Rebalance(%v, %d, %d): %v\n%s", nodes, count, rf, err, dump(prev))
	}
	if err := checkStep(prev, next, moves, nodes, count, rf); err != nil {
		t.Fatalf("Rebalance(%v, %d, %d): %v\nprev %s\nnext %s\nmoves %v", nodes, count, rf, err, dump(prev), dump(next), moves)
	}
	return next, moves
}

// catchUp marks every syncing copy of m caught up, as one change.
func catchUp(m Map) Map {
	if !hasSyncing(m) {
		return m
	}
	m = m.Clone()
	m.Version++
	for p := range m.Partitions {
		m.Partitions[p].Syncing = nil
	}
	return m
}

// work counts what a sequence of moves costs the data plane: ownership
// changes and copies to fill.
type work struct{ owners, copies int }

func (w work) total() int { return w.owners + w.copies }

func (w *work) add(moves []Move) {
	for _, m := range moves {
		switch m.Kind {
		case MoveAssign, MoveTransfer, MovePromote:
			w.owners++
		case MoveAddCopy:
			w.copies++
		}
	}
}

// settle rebalances, marking every copy caught up between rounds, until
// the map stops changing, and returns the work it took.
func settle(t testing.TB, m Map, nodes []string, count, rf int) (Map, work) {
	t.Helper()
	var w work
	for range 8 {
		next, moves := mustRebalance(t, m, nodes, count, rf)
		w.add(moves)
		if len(moves) == 0 && !hasSyncing(next) {
			return next, w
		}
		m = catchUp(next)
	}
	t.Fatalf("no fixed point after 8 rounds for %v:\n%s", nodes, dump(m))
	return m, w
}

func hasSyncing(m Map) bool {
	for _, a := range m.Partitions {
		if len(a.Syncing) > 0 {
			return true
		}
	}
	return false
}

// checkStep checks the rules every Rebalance result obeys (doc.go).
func checkStep(prev, next Map, moves []Move, nodes []string, count, rf int) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if len(next.Partitions) != count {
		return fmt.Errorf("%d partitions, want %d", len(next.Partitions), count)
	}
	changed := len(prev.Partitions) != count
	live := map[string]bool{}
	for _, n := range nodes {
		if n != "" {
			live[n] = true
		}
	}
	r := min(rf, len(live))
	for p, b := range next.Partitions {
		var a Assignment
		if p < len(prev.Partitions) {
			a = prev.Partitions[p]
		}
		changed = changed || !a.equal(b)
		fresh := a.Owner == "" && len(a.Replicas) == 0
		var liveCaught []string
		for _, x := range a.Replicas {
			if live[x] && !slices.Contains(a.Syncing, x) {
				liveCaught = append(liveCaught, x)
			}
		}
		if (a.Owner != b.Owner) != (a.Epoch != b.Epoch) {
			return fmt.Errorf("partition %d: owner %q → %q but epoch %d → %d", p, a.Owner, b.Owner, a.Epoch, b.Epoch)
		}
		if a.Owner != b.Owner && b.Epoch != next.Version {
			return fmt.Errorf("partition %d: new owner with epoch %d, want version %d", p, b.Epoch, next.Version)
		}
		if b.Owner != "" && !live[b.Owner] {
			return fmt.Errorf("partition %d: owner %q is not live", p, b.Owner)
		}
		if b.Owner != a.Owner && b.Owner != "" && !fresh && !slices.Contains(liveCaught, b.Owner) {
			return fmt.Errorf("partition %d: ownership moved %q → %q, which held no caught-up copy", p, a.Owner, b.Owner)
		}
		if b.Owner == "" {
			if len(live) > 0 && (fresh || len(liveCaught) > 0) {
				return fmt.Errorf("partition %d: no owner though it could have one", p)
			}
			continue
		}
		var nextCaught int
		for _, x := range b.Replicas {
			if !live[x] {
				return fmt.Errorf("partition %d: replica %q is not live", p, x)
			}
			if !slices.Contains(b.Syncing, x) {
				nextCaught++
			}
		}
		if len(b.Replicas) < r {
			return fmt.Errorf("partition %d: %d copies, want at least %d", p, len(b.Replicas), r)
		}
		if !fresh && nextCaught < min(r, len(liveCaught)) {
			return fmt.Errorf("partition %d: caught-up copies went from %d to %d", p, len(liveCaught), nextCaught)
		}
	}
	switch {
	case changed && next.Version != prev.Version+1:
		return fmt.Errorf("changed, but version %d → %d", prev.Version, next.Version)
	case !changed && (next.Version != prev.Version || len(moves) > 0):
		return fmt.Errorf("unchanged, but version %d → %d and moves %v", prev.Version, next.Version, moves)
	}
	return nil
}

// checkBalanced checks a settled map: every partition not stranded has
// an owner and exactly r caught-up copies, and owners and copies are
// spread with max-min ≤ 1 over the live nodes.
func checkBalanced(m Map, nodes []string, rf int) error {
	if len(nodes) == 0 {
		return nil
	}
	owners, copies := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		owners[n], copies[n] = 0, 0
	}
	r := min(rf, len(nodes))
	for p, a := range m.Partitions {
		if a.Owner == "" {
			continue // stranded
		}
		if len(a.Replicas) != r || len(a.Syncing) > 0 {
			return fmt.Errorf("partition %d: replicas %v syncing %v, want %d caught-up copies", p, a.Replicas, a.Syncing, r)
		}
		owners[a.Owner]++
		for _, x := range a.Replicas {
			copies[x]++
		}
	}
	if spread(owners) > 1 || spread(copies) > 1 {
		return fmt.Errorf("owners %v, copies %v: spread above 1", owners, copies)
	}
	return nil
}

func spread(load map[string]int) int {
	lo, hi := -1, 0
	for _, v := range load {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return hi - lo
}

// naive is the layout a planner without memory would pick: owner
// nodes[p % n], copies on the next r-1 nodes of the sorted ring.
func naive(nodes []string, count, rf int) Map {
	nodes = slices.Sorted(slices.Values(nodes))
	m := Map{Partitions: make([]Assignment, count)}
	if len(nodes) == 0 {
		return m
	}
	for p := range m.Partitions {
		a := &m.Partitions[p]
		for i := range min(rf, len(nodes)) {
			a.Replicas = append(a.Replicas, nodes[(p+i)%len(nodes)])
		}
		a.Owner = a.Replicas[0]
	}
	return m
}

// naiveWork is the work of going from one naive layout to the next.
func naiveWork(a, b Map) work {
	var w work
	for p := range b.Partitions {
		if a.Partitions[p].Owner != b.Partitions[p].Owner {
			w.owners++
		}
		w.copies += len(sortedDiff(b.Partitions[p].Replicas, a.Partitions[p].Replicas))
	}
	return w
}
