package partition

import (
	"errors"
	"slices"
	"testing"
)

func TestRebalanceCases(t *testing.T) {
	abc := []string{"a", "b", "c"}
	cases := []struct {
		name      string
		prev      Map
		nodes     []string
		count, rf int
		want      Map    // the expected next map
		moves     []Move // the expected moves
	}{
		{
			name: "first map on three nodes", nodes: abc, count: 6, rf: 3,
			want: Map{Version: 1, Partitions: []Assignment{
				part(1, "a", "b", "c"), part(1, "b", "a", "c"), part(1, "c", "a", "b"),
				part(1, "a", "b", "c"), part(1, "b", "a", "c"), part(1, "c", "a", "b"),
			}},
		},
		{
			name: "one node holds everything whatever rf", nodes: []string{"a"}, count: 3, rf: 3,
			want: Map{Version: 1, Partitions: []Assignment{part(1, "a"), part(1, "a"), part(1, "a")}},
			moves: []Move{
				{0, MoveAssign, "", "a"}, {0, MoveAddCopy, "", "a"},
				{1, MoveAssign, "", "a"}, {1, MoveAddCopy, "", "a"},
				{2, MoveAssign, "", "a"}, {2, MoveAddCopy, "", "a"},
			},
		},
		{
			name: "rf above the node count gives every node a copy", nodes: []string{"b", "a"}, count: 2, rf: 7,
			want: Map{Version: 1, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a")}},
		},
		{
			name: "no nodes: partitions exist without owners", count: 2, rf: 3,
			want: Map{Version: 1, Partitions: []Assignment{{}, {}}},
		},
		{
			name:  "all nodes lost: owners empty, last copies remembered",
			prev:  Map{Version: 5, Partitions: []Assignment{part(2, "a", "b"), part(5, "b", "a", "c*")}},
			count: 2, rf: 3,
			want: Map{Version: 6, Partitions: []Assignment{part(6, "", "a", "b"), part(6, "", "a", "b")}},
			moves: []Move{
				{0, MoveStrand, "a", ""},
				{1, MoveStrand, "b", ""}, {1, MoveDropCopy, "c", ""},
			},
		},
		{
			name:  "lost owner: a caught-up copy is promoted, never a syncing one",
			prev:  Map{Version: 3, Partitions: []Assignment{part(1, "a", "b*", "c")}},
			nodes: []string{"b", "c", "d"}, count: 1, rf: 3,
			want:  Map{Version: 4, Partitions: []Assignment{part(4, "c", "b*", "d*")}},
			moves: []Move{{0, MovePromote, "a", "c"}, {0, MoveDropCopy, "a", ""}, {0, MoveAddCopy, "", "d"}},
		},
		{
			name:  "lost owner with only a syncing copy left: stranded",
			prev:  Map{Version: 3, Partitions: []Assignment{part(1, "a", "b*")}},
			nodes: []string{"b"}, count: 1, rf: 2,
			want:  Map{Version: 4, Partitions: []Assignment{part(4, "", "a")}},
			moves: []Move{{0, MoveStrand, "a", ""}, {0, MoveDropCopy, "b", ""}},
		},
		{
			name:  "stranded partition: its holder returns and owns it again",
			prev:  Map{Version: 6, Partitions: []Assignment{part(6, "", "a")}},
			nodes: []string{"a", "b"}, count: 1, rf: 2,
			want:  Map{Version: 7, Partitions: []Assignment{part(7, "a", "b*")}},
			moves: []Move{{0, MovePromote, "", "a"}, {0, MoveAddCopy, "", "b"}},
		},
		{
			name:  "stranded partition stays stranded while its holders are away",
			prev:  Map{Version: 6, Partitions: []Assignment{part(6, "", "a"), part(6, "b", "c")}},
			nodes: []string{"b", "c"}, count: 2, rf: 2,
			want: Map{Version: 6, Partitions: []Assignment{part(6, "", "a"), part(6, "b", "c")}},
		},
		{
			name:  "forgotten copies: the partition starts afresh anywhere",
			prev:  Map{Version: 6, Partitions: []Assignment{part(6, "", "a")}}.Forget("a"),
			nodes: []string{"b", "c"}, count: 1, rf: 2,
			want:  Map{Version: 8, Partitions: []Assignment{part(8, "b", "c")}},
			moves: []Move{{0, MoveAssign, "", "b"}, {0, MoveAddCopy, "", "b"}, {0, MoveAddCopy, "", "c"}},
		},
		{
			name:  "lost replica is re-created on another node",
			prev:  Map{Version: 2, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "c")}},
			nodes: abc, count: 2, rf: 2,
			want: Map{Version: 2, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "c")}},
		},
		{
			name:  "lost node: its copies move to the nodes with the fewest",
			prev:  Map{Version: 2, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "c"), part(1, "c", "a")}},
			nodes: []string{"a", "b", "d"}, count: 3, rf: 2,
			want: Map{Version: 3, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "d*"), part(3, "a", "d*")}},
			moves: []Move{
				{1, MoveDropCopy, "c", ""}, {1, MoveAddCopy, "", "d"},
				{2, MovePromote, "c", "a"}, {2, MoveDropCopy, "c", ""}, {2, MoveAddCopy, "", "d"},
			},
		},
		{
			name:  "joining node gets copies first, no ownership",
			prev:  Map{Version: 2, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a"), part(1, "a", "b"), part(1, "b", "a")}},
			nodes: abc, count: 4, rf: 2,
			want: Map{Version: 3, Partitions: []Assignment{part(1, "a", "b", "c*"), part(1, "b", "a", "c*"), part(1, "a", "b"), part(1, "b", "a")}},
		},
		{
			name:  "joining node caught up: takes ownership of its share, extra copies dropped",
			prev:  Map{Version: 5, Partitions: []Assignment{part(1, "a", "b", "c"), part(1, "b", "a", "c"), part(1, "a", "b"), part(1, "b", "a")}},
			nodes: abc, count: 4, rf: 2,
			want:  Map{Version: 6, Partitions: []Assignment{part(1, "a", "c"), part(6, "c", "b"), part(1, "a", "b"), part(1, "b", "a")}},
			moves: []Move{{0, MoveDropCopy, "b", ""}, {1, MoveTransfer, "b", "c"}, {1, MoveDropCopy, "a", ""}},
		},
		{
			name:  "more partitions: old ones stay, new ones placed with caught-up copies",
			prev:  Map{Version: 4, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a")}},
			nodes: []string{"a", "b"}, count: 4, rf: 2,
			want: Map{Version: 5, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a"), part(5, "a", "b"), part(5, "b", "a")}},
		},
		{
			name:  "fewer partitions: the rest are retired",
			prev:  Map{Version: 4, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a"), part(1, "a", "b"), part(1, "b", "a")}},
			nodes: []string{"a", "b"}, count: 2, rf: 2,
			want:  Map{Version: 5, Partitions: []Assignment{part(1, "a", "b"), part(1, "b", "a")}},
			moves: []Move{{2, MoveRetire, "a", ""}, {3, MoveRetire, "b", ""}},
		},
		{
			name:  "lower rf: surplus copies dropped at once",
			prev:  Map{Version: 4, Partitions: []Assignment{part(1, "a", "b", "c"), part(1, "b", "a", "c"), part(1, "c", "a", "b")}},
			nodes: abc, count: 3, rf: 2,
			want: Map{Version: 5, Partitions: []Assignment{part(1, "a", "c"), part(1, "b", "a"), part(1, "c", "b")}},
		},
		{
			name:  "higher rf: new copies are syncing",
			prev:  Map{Version: 4, Partitions: []Assignment{part(1, "a"), part(1, "b"), part(1, "c")}},
			nodes: abc, count: 3, rf: 2,
			want: Map{Version: 5, Partitions: []Assignment{part(1, "a", "b*"), part(1, "b", "c*"), part(1, "c", "a*")}},
		},
		{
			name:  "settled map is left alone",
			prev:  Map{Version: 9, Partitions: []Assignment{part(3, "a", "b"), part(7, "b", "c"), part(9, "c", "a")}},
			nodes: []string{"c", "b", "a", "a", ""}, count: 3, rf: 2,
			want: Map{Version: 9, Partitions: []Assignment{part(3, "a", "b"), part(7, "b", "c"), part(9, "c", "a")}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, moves := mustRebalance(t, tc.prev, tc.nodes, tc.count, tc.rf)
			if !next.Equal(tc.want) {
				t.Errorf("got\n%swant\n%s", dump(next), dump(tc.want))
			}
			if tc.moves != nil && !slices.Equal(moves, tc.moves) {
				t.Errorf("moves\n got %v\nwant %v", moves, tc.moves)
			}
			again, more := mustRebalance(t, next, tc.nodes, tc.count, tc.rf)
			if len(more) > 0 || !again.Equal(next) {
				t.Errorf("not idempotent: a second call moves %v", more)
			}
		})
	}
}

func TestRebalanceRefusesBadInput(t *testing.T) {
	bad := Map{Version: 1, Partitions: []Assignment{part(1, "a", "a")}}
	cases := []struct {
		name      string
		prev      Map
		nodes     []string
		count, rf int
		want      error
	}{
		{"count 0", Map{}, nil, 0, 3, ErrOutOfRange},
		{"count above 4096", Map{}, nil, MaxCount + 1, 3, ErrOutOfRange},
		{"rf 0", Map{}, nil, 32, 0, ErrOutOfRange},
		{"rf 8", Map{}, nil, 32, 8, ErrOutOfRange},
		{"node name too long", Map{}, []string{string(make([]byte, MaxNodeName+1))}, 32, 3, ErrOutOfRange},
		{"invalid prev", bad, []string{"a"}, 1, 1, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, moves, err := Rebalance(tc.prev, tc.nodes, tc.count, tc.rf)
			if !errors.Is(err, tc.want) || moves != nil || !next.Equal(tc.prev) {
				t.Fatalf("got %v, %v, %v; want %v and prev unchanged", next, moves, err, tc.want)
			}
			t.Log(err)
		})
	}
}

// The two-step join, counted: the new node takes exactly its fair share
// of owners and copies, and only those move.
func TestJoinTakesFairShare(t *testing.T) {
	const count, rf = 32, 3
	m, _ := settle(t, Map{}, []string{"a", "b", "c"}, count, rf)
	nodes := []string{"a", "b", "c", "d"}
	step1, moves := mustRebalance(t, m, nodes, count, rf)
	var w work
	w.add(moves)
	if got := len(step1.OwnedBy("d")); got != 0 || w.owners != 0 {
		t.Fatalf("d owns %d before holding data, %d owner moves", got, w.owners)
	}
	if w.copies != 24 {
		t.Errorf("step 1 added %d copies, want d's 24 (96/4)", w.copies)
	}
	step2, moves := mustRebalance(t, catchUp(step1), nodes, count, rf)
	w = work{}
	w.add(moves)
	if got := len(step2.OwnedBy("d")); got != 8 || w.owners != 8 || w.copies != 0 {
		t.Errorf("step 2: d owns %d, %d owner moves, %d copies added; want 8, 8, 0", got, w.owners, w.copies)
	}
	for _, mv := range moves {
		if mv.Kind == MoveTransfer && mv.To != "d" {
			t.Errorf("ownership moved between old nodes: %v", mv)
		}
	}
	if err := checkBalanced(step2, nodes, rf); err != nil {
		t.Fatal(err)
	}
}
