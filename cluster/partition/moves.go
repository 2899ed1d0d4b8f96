package partition

import (
	"fmt"
	"slices"
)

// MoveKind says what a Move does.
type MoveKind uint8

// The kinds of Move, in the order Rebalance lists them for one partition.
const (
	// MoveAssign gives a fresh partition (no data anywhere) its first owner.
	MoveAssign MoveKind = iota + 1
	// MoveTransfer moves ownership from a live owner to a live node that
	// holds a caught-up copy.
	MoveTransfer
	// MovePromote replaces a lost owner by a live node that holds a
	// caught-up copy (failover).
	MovePromote
	// MoveStrand takes ownership from a lost owner when no live node holds
	// a caught-up copy: the partition has no owner until one returns.
	MoveStrand
	// MoveDropCopy: From no longer holds a copy.
	MoveDropCopy
	// MoveAddCopy: To now holds a copy, to be filled by the data plane
	// unless the partition is fresh.
	MoveAddCopy
	// MoveRetire: the partition is beyond the new count; From was its owner.
	MoveRetire
)

func (k MoveKind) String() string {
	switch k {
	case MoveAssign:
		return "assign"
	case MoveTransfer:
		return "transfer"
	case MovePromote:
		return "promote"
	case MoveStrand:
		return "strand"
	case MoveDropCopy:
		return "drop-copy"
	case MoveAddCopy:
		return "add-copy"
	case MoveRetire:
		return "retire"
	}
	return fmt.Sprintf("MoveKind(%d)", uint8(k))
}

// Move is one change between two maps, for logs and metrics.
type Move struct {
	Partition int
	Kind      MoveKind
	From, To  string // node names; "" when not applicable
}

func (m Move) String() string {
	return fmt.Sprintf("partition %d: %s %q → %q", m.Partition, m.Kind, m.From, m.To)
}

// diff lists the moves from prev to next, by partition, ownership first,
// then dropped copies, then added ones, each in name order.
func diff(prev, next Map, live func(string) bool) []Move {
	var moves []Move
	for p, b := range next.Partitions {
		var a Assignment
		if p < len(prev.Partitions) {
			a = prev.Partitions[p]
		}
		if a.Owner != b.Owner {
			kind := MoveTransfer
			switch {
			case a.Owner == "" && len(a.Replicas) == 0:
				kind = MoveAssign
			case b.Owner == "":
				kind = MoveStrand
			case a.Owner == "" || !live(a.Owner):
				kind = MovePromote
			}
			moves = append(moves, Move{Partition: p, Kind: kind, From: a.Owner, To: b.Owner})
		}
		for _, r := range sortedDiff(a.Replicas, b.Replicas) {
			moves = append(moves, Move{Partition: p, Kind: MoveDropCopy, From: r})
		}
		for _, r := range sortedDiff(b.Replicas, a.Replicas) {
			moves = append(moves, Move{Partition: p, Kind: MoveAddCopy, To: r})
		}
	}
	for p := len(next.Partitions); p < len(prev.Partitions); p++ {
		moves = append(moves, Move{Partition: p, Kind: MoveRetire, From: prev.Partitions[p].Owner})
	}
	return moves
}

// sortedDiff returns the names in a and not in b, sorted.
func sortedDiff(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
