package dataplane

import (
	"fmt"
	"testing"

	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// TestInterestHeardIncremental: additions and snapshots change a peer's
// view one filter at a time; a snapshot removes what it no longer lists,
// shared subscriptions are counted as they come and go.
func TestInterestHeardIncremental(t *testing.T) {
	p := reviewPlane(t, "a", "", 64, nil, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	defer p.Stop()
	steps := []struct {
		name    string
		op      byte
		filters []string
		wants   map[string]bool
		shared  bool
	}{
		{"unknown peer gets everything", 0, nil, map[string]bool{"x/1": true, "y": true}, false},
		{"snapshot", wire.InterestSnapshot, []string{"x/+"}, map[string]bool{"x/1": true, "y": false}, false},
		{"addition", wire.InterestAdd, []string{"y", "$share/g/z/#"}, map[string]bool{"x/1": true, "y": true, "z/q": true}, true},
		{"snapshot drops", wire.InterestSnapshot, []string{"y"}, map[string]bool{"x/1": false, "y": true, "z/q": false}, false},
	}
	for _, s := range steps {
		if s.op != 0 {
			p.heard("b", s.op, s.filters)
		}
		for tp, want := range s.wants {
			if got := p.wants("b", tp); got != want {
				t.Fatalf("%s: wants(%q) = %v, want %v", s.name, tp, got, want)
			}
		}
		if got := p.sharedPeers.Load() == 1; got != s.shared {
			t.Fatalf("%s: a peer with shared subscriptions: %v, want %v", s.name, got, s.shared)
		}
	}
	ri := p.remote("b")
	if ri.tree.Count() != 1 || len(ri.filters) != 1 {
		t.Fatalf("after the last snapshot: %d in the tree, %d filters, want 1", ri.tree.Count(), len(ri.filters))
	}
}

// BenchmarkInterestAdd: one addition to a peer's view that holds b.N
// filters already costs one insertion (it rebuilt the whole tree).
func BenchmarkInterestAdd(b *testing.B) {
	p, err := New(Options{NodeName: "a", Username: "cluster", Broker: nopBroker{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	p.heard("b", wire.InterestSnapshot, nil)
	b.ResetTimer()
	for i := range b.N {
		p.heard("b", wire.InterestAdd, []string{fmt.Sprintf("many/%d/+", i)})
	}
}
