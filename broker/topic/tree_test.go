package topic

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"gantry/broker/packet"
)

// sess stands for the broker's session: the Tree is keyed by its pointer.
type sess struct{ id int }

func newSessions(n int) []*sess {
	s := make([]*sess, n)
	for i := range s {
		s[i] = &sess{id: i}
	}
	return s
}

// keys renders matched entries as sorted "client filter" strings.
func keys(es []*Entry[*sess]) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%d %s", e.Client.id, e.Filter)
	}
	sort.Strings(out)
	return out
}

func TestTreeMatchCases(t *testing.T) {
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tree[*sess]
			tr.Subscribe(Entry[*sess]{Client: &sess{}, Filter: tc.filter})
			got := tr.Match(tc.topic, nil, nil)
			if (len(got) == 1) != tc.want || len(got) > 1 {
				t.Fatalf("Match(%q) with filter %q: %d entries, want match %v", tc.topic, tc.filter, len(got), tc.want)
			}
		})
	}
}

func TestTreeMatchMany(t *testing.T) {
	filters := []string{"sport/tennis/player1/#", "sport/#", "sport/+", "sport/tennis/+", "#", "+/+",
		"+", "/+", "$SYS/#", "$SYS/+", "a//b", "a/+/b", "sport/", "sport", "+/tennis/#"}
	var tr Tree[*sess]
	s := newSessions(len(filters))
	for i, f := range filters {
		tr.Subscribe(Entry[*sess]{Client: s[i], Filter: f})
	}
	topics := []string{"sport", "sport/", "sport/tennis", "sport/tennis/player1", "sport/tennis/player1/ranking",
		"/finance", "finance", "$SYS", "$SYS/uptime", "$SYS/a/b", "a//b", "a/x/b", "a/b", "/"}
	for _, topic := range topics {
		var want []string
		for i, f := range filters {
			if Matches(f, topic) {
				want = append(want, fmt.Sprintf("%d %s", s[i].id, f))
			}
		}
		sort.Strings(want)
		if got := keys(tr.Match(topic, nil, nil)); !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %q, want %q", topic, got, want)
		}
	}
}

func TestTreeOverlappingSubscriptionsOfOneClient(t *testing.T) {
	var tr Tree[*sess]
	c := &sess{}
	for _, f := range []string{"a/+", "a/#", "a/b", "$share/g/a/b"} {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: f})
	}
	if got := tr.Match("a/b", nil, nil); len(got) != 4 {
		t.Fatalf("one entry per matching subscription: got %d, want 4", len(got))
	}
}

func TestTreeSubscribeReplace(t *testing.T) {
	var tr Tree[*sess]
	c := &sess{}
	first := Entry[*sess]{Client: c, Filter: "a/+", Options: packet.SubOptions{QoS: 0}, SubID: 1}
	if tr.Subscribe(first) {
		t.Fatal("first Subscribe reported existed")
	}
	old := tr.Match("a/b", nil, nil)[0]
	second := first
	second.Options.QoS, second.SubID = 2, 7
	if !tr.Subscribe(second) {
		t.Fatal("second Subscribe did not report existed")
	}
	if tr.Count() != 1 {
		t.Fatalf("Count = %d after replace, want 1", tr.Count())
	}
	got := tr.Match("a/b", nil, nil)
	if len(got) != 1 || got[0].Options.QoS != 2 || got[0].SubID != 7 {
		t.Fatalf("after replace Match = %+v, want one entry with QoS 2 SubID 7", got)
	}
	if old.Options.QoS != 0 || old.SubID != 1 {
		t.Fatalf("old snapshot was written through: %+v", old)
	}
	other := Entry[*sess]{Client: &sess{}, Filter: "a/+"}
	if tr.Subscribe(other) || tr.Count() != 2 {
		t.Fatalf("another client on the same filter: Count = %d, want 2", tr.Count())
	}
}

func TestTreeSharedReplaceKeepsOneMember(t *testing.T) {
	var tr Tree[*sess]
	c := &sess{}
	e := Entry[*sess]{Client: c, Filter: "$share/g/a", Group: "ignored"}
	if tr.Subscribe(e) {
		t.Fatal("first Subscribe reported existed")
	}
	e.Options.QoS = 1
	if !tr.Subscribe(e) || tr.Count() != 1 {
		t.Fatalf("replace in group: Count = %d, want 1", tr.Count())
	}
	got := tr.Match("a", nil, nil)
	if len(got) != 1 || got[0].Group != "g" || got[0].Options.QoS != 1 || got[0].Filter != "$share/g/a" {
		t.Fatalf("Match = %+v, want the replaced member of group g", got)
	}
}

func TestTreeUnsubscribe(t *testing.T) {
	var tr Tree[*sess]
	a, b := &sess{id: 1}, &sess{id: 2}
	tr.Subscribe(Entry[*sess]{Client: a, Filter: "x/+"})
	tr.Subscribe(Entry[*sess]{Client: a, Filter: "$share/g/x/+"})
	cases := []struct {
		name   string
		client *sess
		filter string
		want   bool
	}{
		{"unknown filter", a, "y", false},
		{"prefix of a filter", a, "x", false},
		{"other client", b, "x/+", false},
		{"other group", a, "$share/h/x/+", false},
		{"shared as plain", a, "x/#", false},
		{"plain", a, "x/+", true},
		{"plain again", a, "x/+", false},
		{"shared", a, "$share/g/x/+", true},
		{"shared again", a, "$share/g/x/+", false},
	}
	for _, tc := range cases {
		if got := tr.Unsubscribe(tc.client, tc.filter); got != tc.want {
			t.Errorf("%s: Unsubscribe(%d, %q) = %v, want %v", tc.name, tc.client.id, tc.filter, got, tc.want)
		}
	}
	if tr.Count() != 0 || tr.Nodes() != 0 {
		t.Fatalf("Count = %d, Nodes = %d, want 0 0", tr.Count(), tr.Nodes())
	}
}

func TestTreePrune(t *testing.T) {
	filters := []string{"a/b/c", "a/b/+", "a/b/#", "a/#", "+/+/+", "#", "a//b", "a/", "/",
		"$SYS/#", "$share/g/a/b/c", "$share/h/a/b/c", "$share/g/+/x", "deep/1/2/3/4/5/6/7/8"}
	var tr Tree[*sess]
	s := newSessions(30)
	for _, c := range s {
		for _, f := range filters {
			tr.Subscribe(Entry[*sess]{Client: c, Filter: f})
		}
	}
	if tr.Count() != len(s)*len(filters) {
		t.Fatalf("Count = %d, want %d", tr.Count(), len(s)*len(filters))
	}
	peak := tr.Nodes()
	for i, c := range s {
		if n := tr.RemoveClient(c, filters); n != len(filters) {
			t.Fatalf("RemoveClient removed %d, want %d", n, len(filters))
		}
		if i < len(s)-1 && tr.Nodes() != peak {
			t.Fatalf("nodes dropped to %d while subscribers remain (peak %d)", tr.Nodes(), peak)
		}
	}
	if tr.Count() != 0 || tr.Nodes() != 0 {
		t.Fatalf("after removal Count = %d, Nodes = %d, want 0 0", tr.Count(), tr.Nodes())
	}
	r := &tr.root
	if r.children != nil || r.plus != nil || r.hash != nil || r.groups != nil || r.subs.list != nil {
		t.Fatalf("root not empty: %+v", r)
	}
}

func TestTreePruneKeepsSiblings(t *testing.T) {
	var tr Tree[*sess]
	c := &sess{}
	tr.Subscribe(Entry[*sess]{Client: c, Filter: "a/b/c"})
	tr.Subscribe(Entry[*sess]{Client: c, Filter: "a/b"})
	tr.Subscribe(Entry[*sess]{Client: c, Filter: "a/x/y"})
	if tr.Nodes() != 5 {
		t.Fatalf("Nodes = %d, want 5", tr.Nodes())
	}
	tr.Unsubscribe(c, "a/b/c") // drops c only: a/b still holds an entry
	if tr.Nodes() != 4 || len(tr.Match("a/b", nil, nil)) != 1 {
		t.Fatalf("Nodes = %d, want 4 and a/b still matched", tr.Nodes())
	}
	tr.Unsubscribe(c, "a/x/y") // drops y and x
	if tr.Nodes() != 2 || len(tr.Match("a/b", nil, nil)) != 1 {
		t.Fatalf("Nodes = %d, want 2 and a/b still matched", tr.Nodes())
	}
}

func TestTreeManySubscribersOneFilter(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(200) // well past rosterScan: the position map is built and dropped
	for _, c := range s {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "f/+"})
	}
	order := slices.Clone(s)
	for i, j := range []int{7, 3, 11, 5} {
		order[i], order[j] = order[j], order[i]
	}
	slices.Reverse(order[50:])
	live := map[*sess]bool{}
	for _, c := range s {
		live[c] = true
	}
	for _, c := range order {
		if !tr.Unsubscribe(c, "f/+") || tr.Unsubscribe(c, "f/+") {
			t.Fatalf("Unsubscribe of client %d: want true then false", c.id)
		}
		delete(live, c)
		got := tr.Match("f/x", nil, nil)
		if len(got) != len(live) {
			t.Fatalf("Match after removing %d: %d entries, want %d", c.id, len(got), len(live))
		}
		for _, e := range got {
			if !live[e.Client] {
				t.Fatalf("removed client %d still matched", e.Client.id)
			}
		}
	}
	if tr.Nodes() != 0 {
		t.Fatalf("Nodes = %d, want 0", tr.Nodes())
	}
}

// tally counts, over n messages, how many each client received.
func tally(tr *Tree[*sess], topic string, n int, accept func(*sess) bool) map[int]int {
	got := map[int]int{}
	dst := make([]*Entry[*sess], 0, 8)
	for range n {
		dst = tr.Match(topic, dst[:0], accept)
		for _, e := range dst {
			got[e.Client.id]++
		}
	}
	return got
}

func TestTreeSharedRoundRobin(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(5)
	for _, c := range s[:3] {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/workers/jobs/+"})
	}
	tr.Subscribe(Entry[*sess]{Client: s[3], Filter: "jobs/#"})                 // plain: every message
	tr.Subscribe(Entry[*sess]{Client: s[4], Filter: "$share/audit/jobs/+"})    // another group
	tr.Subscribe(Entry[*sess]{Client: s[0], Filter: "$share/workers/other/+"}) // no match
	got := tally(&tr, "jobs/1", 300, nil)
	want := map[int]int{0: 100, 1: 100, 2: 100, 3: 300, 4: 300}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("client %d received %d, want %d (all: %v)", id, got[id], n, got)
		}
	}
}

func TestTreeSharedAccept(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(3)
	for _, c := range s {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/g/t"})
	}
	cases := []struct {
		name    string
		offline map[int]bool
		want    map[int]int
	}{
		{"all online", map[int]bool{}, map[int]int{0: 100, 1: 100, 2: 100}},
		{"middle offline", map[int]bool{1: true}, map[int]int{0: 150, 2: 150}},
		{"first offline", map[int]bool{0: true}, map[int]int{1: 150, 2: 150}},
		{"two offline", map[int]bool{0: true, 2: true}, map[int]int{1: 300}},
		{"all offline falls back", map[int]bool{0: true, 1: true, 2: true}, map[int]int{0: 100, 1: 100, 2: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tally(&tr, "t", 300, func(c *sess) bool { return !tc.offline[c.id] })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("received %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTreeSharedGroupRemoval(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(3)
	for _, c := range s {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: "$share/g/t"})
	}
	tr.Unsubscribe(s[1], "$share/g/t")
	if got := tally(&tr, "t", 100, nil); got[0] != 50 || got[2] != 50 || len(got) != 2 {
		t.Fatalf("after removing a member: %v, want 50 each for 0 and 2", got)
	}
	tr.Unsubscribe(s[0], "$share/g/t")
	tr.Unsubscribe(s[2], "$share/g/t")
	if tr.Nodes() != 0 || len(tr.Match("t", nil, nil)) != 0 {
		t.Fatalf("emptied group left Nodes = %d", tr.Nodes())
	}
}

func TestTreeConcurrent(t *testing.T) {
	var tr Tree[*sess]
	s := newSessions(16)
	filters := []string{"a/+", "a/#", "$share/g/a/b", "+/b", "a/b", "#"}
	var wg sync.WaitGroup
	for w, c := range s {
		wg.Go(func() {
			for i := range 300 {
				f := filters[(w+i)%len(filters)]
				tr.Subscribe(Entry[*sess]{Client: c, Filter: f, SubID: uint32(i)})
				if i%3 == 0 {
					tr.Unsubscribe(c, f)
				}
			}
		})
		wg.Go(func() {
			dst := make([]*Entry[*sess], 0, 128)
			for range 300 {
				dst = tr.Match("a/b", dst[:0], func(x *sess) bool { return x.id%2 == 0 })
				for _, e := range dst {
					_ = e.Options.QoS + byte(e.SubID) // read snapshots outside the lock
				}
				_ = tr.Count() + tr.Nodes()
			}
		})
	}
	wg.Wait()
	for _, c := range s {
		tr.RemoveClient(c, filters)
	}
	if tr.Count() != 0 || tr.Nodes() != 0 {
		t.Fatalf("Count = %d, Nodes = %d after removing all", tr.Count(), tr.Nodes())
	}
}

func TestTreeInvalidFilterIsHarmless(t *testing.T) {
	var tr Tree[*sess]
	c := &sess{}
	for _, f := range []string{"a/#/b", "#/x", "a+", "$share/g", "$share//a", ""} {
		tr.Subscribe(Entry[*sess]{Client: c, Filter: f})
	}
	for _, topic := range []string{"a/x/b", "a", "x", "", "/", strings.Repeat("/", 100)} {
		_ = tr.Match(topic, nil, nil)
	}
	for _, f := range []string{"a/#/b", "#/x", "a+", "$share/g", "$share//a", ""} {
		if !tr.Unsubscribe(c, f) {
			t.Errorf("Unsubscribe(%q) = false", f)
		}
	}
	if tr.Nodes() != 0 {
		t.Fatalf("Nodes = %d, want 0", tr.Nodes())
	}
}
