package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRandomMembership drives the planner through random joins, losses,
// permanent removals, partial catch-ups and configuration changes, and
// checks after every call the rules of doc.go (checkStep: ownership only
// to caught-up copies, epochs, versions, no lost caught-up copy) and,
// whenever the map is settled, the balance (checkBalanced).
func TestRandomMembership(t *testing.T) {
	configs := []struct{ count, rf int }{{32, 3}, {32, 1}, {64, 2}, {7, 3}, {1, 3}, {100, 5}, {512, 3}}
	for _, cfg := range configs {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("count=%d/rf=%d/seed=%d", cfg.count, cfg.rf, seed), func(t *testing.T) {
				t.Parallel()
				randomWalk(t, rand.New(rand.NewPCG(seed, uint64(cfg.count*10+cfg.rf))), cfg.count, cfg.rf, 60)
			})
		}
	}
}

func randomWalk(t *testing.T, rng *rand.Rand, count, rf, steps int) {
	universe := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	live := slices.Clone(universe[:1+rng.IntN(4)])
	m, _ := settle(t, Map{}, live, count, rf)
	var gone []string // lost nodes not yet forgotten
	for step := range steps {
		switch e := rng.IntN(10); {
		case e < 3 && len(live) < 7: // a node joins (maybe one that was lost)
			out := slices.DeleteFunc(slices.Clone(universe), func(n string) bool { return slices.Contains(live, n) })
			n := out[rng.IntN(len(out))]
			live = append(live, n)
			gone = slices.DeleteFunc(gone, func(g string) bool { return g == n })
		case e < 5 && len(live) > 0: // a node is lost
			i := rng.IntN(len(live))
			gone = append(gone, live[i])
			live = slices.Delete(live, i, i+1)
		case e < 6 && len(gone) > 0: // lost nodes are removed for good
			m = m.Forget(gone...)
			if err := m.Validate(); err != nil {
				t.Fatalf("step %d: Forget(%v): %v", step, gone, err)
			}
			gone = nil
		case e < 8: // the data plane reports some copies caught up
			m = catchUpSome(rng, m)
		case e < 9 && rng.IntN(4) == 0: // the operator changes the configuration
			rf = 1 + rng.IntN(MaxReplicationFactor)
			if rng.IntN(3) == 0 {
				count = 1 + rng.IntN(2*count)
			}
		}
		next, _ := mustRebalance(t, m, live, count, rf)
		checkDeterministic(t, rng, m, next, live, count, rf)
		m = next
		if rng.IntN(3) == 0 {
			m, _ = settle(t, m, live, count, rf)
			if err := checkBalanced(m, live, rf); err != nil {
				t.Fatalf("step %d, settled on %v: %v\n%s", step, live, err, dump(m))
			}
		}
	}
}

// catchUpSome marks about half of the syncing copies caught up.
func catchUpSome(rng *rand.Rand, m Map) Map {
	for p := range m.Partitions {
		for _, s := range slices.Clone(m.Partitions[p].Syncing) {
			if rng.IntN(2) == 0 {
				m, _ = m.MarkCaughtUp(p, s)
			}
		}
	}
	return m
}

// checkDeterministic replans from the same input with the nodes in
// another order and one duplicated, and wants the same map.
func checkDeterministic(t *testing.T, rng *rand.Rand, prev, want Map, live []string, count, rf int) {
	t.Helper()
	nodes := slices.Clone(live)
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	if len(nodes) > 0 {
		nodes = append(nodes, nodes[0])
	}
	got, _, err := Rebalance(prev.Clone(), nodes, count, rf)
	if err != nil || !got.Equal(want) {
		t.Fatalf("nodes %v instead of %v: got %v\n%s\nwant\n%s", nodes, live, err, dump(got), dump(want))
	}
}

// TestMovesVersusNaive replays membership histories, settling after each
// change, and compares the data-plane work (ownership changes plus copies
// to fill) with the least possible and with a naive re-spread that
// recomputes a ring layout from scratch. Run with -v for the table.
func TestMovesVersusNaive(t *testing.T) {
	histories := []struct {
		name      string
		count, rf int
		steps     [][]string // membership after each change
	}{
		{"3→4→5 joins", 32, 3, [][]string{{"a", "b", "c"}, {"a", "b", "c", "d"}, {"a", "b", "c", "d", "e"}}},
		{"5→4→3 losses", 32, 3, [][]string{{"a", "b", "c", "d", "e"}, {"a", "b", "c", "e"}, {"a", "c", "e"}}},
		{"rolling replace", 32, 3, [][]string{{"a", "b", "c"}, {"b", "c"}, {"b", "c", "d"}, {"c", "d"}, {"c", "d", "e"}, {"d", "e"}, {"d", "e", "f"}}},
		{"3→4 joins, rf 1", 32, 1, [][]string{{"a", "b", "c"}, {"a", "b", "c", "d"}}},
		{"7 nodes, lose one", 256, 3, [][]string{{"a", "b", "c", "d", "e", "f", "g"}, {"a", "b", "c", "e", "f", "g"}}},
		{"7 nodes, add one", 256, 3, [][]string{{"a", "b", "c", "d", "e", "f"}, {"a", "b", "c", "d", "e", "f", "g"}}},
		{"1→7 one by one", 4096, 3, [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}, {"a", "b", "c", "d"}, {"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e", "f"}, {"a", "b", "c", "d", "e", "f", "g"}}},
	}
	t.Logf("%-20s %5s %3s | %14s | %14s | %14s", "history", "count", "rf", "ours own+copy", "least own+copy", "naive own+copy")
	for _, h := range histories {
		m, _ := settle(t, Map{}, h.steps[0], h.count, h.rf)
		var ours, least, nv work
		for i := 1; i < len(h.steps); i++ {
			before := m
			var w work
			m, w = settle(t, m, h.steps[i], h.count, h.rf)
			if err := checkBalanced(m, h.steps[i], h.rf); err != nil {
				t.Fatalf("%s step %d: %v", h.name, i, err)
			}
			ours.owners += w.owners
			ours.copies += w.copies
			l := leastWork(before, h.steps[i-1], h.steps[i], h.count, h.rf)
			least.owners += l.owners
			least.copies += l.copies
			n := naiveWork(naive(h.steps[i-1], h.count, h.rf), naive(h.steps[i], h.count, h.rf))
			nv.owners += n.owners
			nv.copies += n.copies
		}
		t.Logf("%-20s %5d %3d | %6d+%-7d | %6d+%-7d | %6d+%-7d", h.name, h.count, h.rf,
			ours.owners, ours.copies, least.owners, least.copies, nv.owners, nv.copies)
		if ours.copies > least.copies || ours.owners > least.owners+least.owners/4+1 {
			t.Errorf("%s: ours %+v, least %+v", h.name, ours, least)
		}
		if ours.total() > nv.total() {
			t.Errorf("%s: ours %+v worse than naive %+v", h.name, ours, nv)
		}
	}
}

// leastWork is a lower bound of the work of going from the settled map m
// on nodes a to a balanced map on nodes b: the copies the lost nodes held
// that the new replication still needs, and the fair share of owners and
// copies of each new node; owners of lost nodes must all move.
func leastWork(m Map, a, b []string, count, rf int) work {
	var w work
	ra, rb := min(rf, len(a)), min(rf, len(b))
	lostCopies := 0
	for _, n := range a {
		if !slices.Contains(b, n) {
			w.owners += len(m.OwnedBy(n))
			for _, x := range m.Partitions {
				if slices.Contains(x.Replicas, n) {
					lostCopies++
				}
			}
		}
	}
	w.copies = max(0, lostCopies-count*(ra-rb))
	joined := 0
	for _, n := range b {
		if !slices.Contains(a, n) {
			joined++
		}
	}
	if joined > 0 {
		w.owners = max(w.owners, joined*(count/len(b)))
		w.copies = max(w.copies, joined*(count*rb/len(b)))
	}
	return w
}

// TestSettlesInTwoRounds: from a settled map, one node joining or being
// removed settles in two changing rounds (the plan with the new copies;
// after they caught up, the ownership transfers and dropped copies); the
// third call changes nothing.
func TestSettlesInTwoRounds(t *testing.T) {
	universe := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6"}
	worst := 0
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 1))
		count := []int{1, 7, 32, 100, 512}[rng.IntN(5)]
		rf := 1 + rng.IntN(MaxReplicationFactor)
		live := slices.Clone(universe[:1+rng.IntN(len(universe))])
		m, _ := settle(t, Map{}, live, count, rf)
		for range 10 {
			if out := slices.DeleteFunc(slices.Clone(universe), func(n string) bool { return slices.Contains(live, n) }); len(out) > 0 && (rng.IntN(2) == 0 || len(live) == 1) {
				live = append(live, out[rng.IntN(len(out))])
			} else {
				i := rng.IntN(len(live))
				m = m.Forget(live[i])
				live = slices.Delete(live, i, i+1)
			}
			calls := 0
			for {
				next, moves := mustRebalance(t, m, live, count, rf)
				calls++
				if len(moves) == 0 && !hasSyncing(next) {
					break
				}
				if calls == 3 {
					t.Fatalf("seed %d: still changing after 3 calls on %v (count %d, rf %d)", seed, live, count, rf)
				}
				m = catchUp(next)
			}
			worst = max(worst, calls)
		}
	}
	t.Logf("at most %d calls to settle", worst)
}
