package dataplane

import (
	"fmt"
	"testing"
)

func TestSeqRanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		adds   [][2]uint64
		dropTo uint64
		want   string
	}{
		{"one", [][2]uint64{{3, 5}}, 0, "[{3 5}]"},
		{"empty range", [][2]uint64{{5, 4}}, 0, "[]"},
		{"apart, in any order", [][2]uint64{{10, 12}, {3, 5}, {7, 7}}, 0, "[{3 5} {7 7} {10 12}]"},
		{"adjacent merge", [][2]uint64{{3, 5}, {6, 8}}, 0, "[{3 8}]"},
		{"adjacent below merge", [][2]uint64{{6, 8}, {3, 5}}, 0, "[{3 8}]"},
		{"a gap fills", [][2]uint64{{3, 5}, {9, 12}, {6, 8}}, 0, "[{3 12}]"},
		{"overlap spans several", [][2]uint64{{3, 4}, {7, 8}, {11, 12}, {2, 11}}, 0, "[{2 12}]"},
		{"inside", [][2]uint64{{3, 9}, {4, 5}}, 0, "[{3 9}]"},
		{"drop whole ranges", [][2]uint64{{3, 5}, {7, 9}}, 5, "[{7 9}]"},
		{"drop part of one", [][2]uint64{{3, 5}, {7, 9}}, 7, "[{8 9}]"},
		{"drop all", [][2]uint64{{3, 5}, {7, 9}}, 9, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs seqRanges
			for _, a := range tc.adds {
				rs.add(a[0], a[1])
			}
			if tc.dropTo > 0 {
				rs.dropTo(tc.dropTo)
			}
			if got := fmt.Sprint([]seqRange(rs)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			for seq := uint64(0); seq < 20; seq++ {
				want := false
				for _, r := range rs {
					want = want || (seq >= r.from && seq <= r.to)
				}
				if rs.has(seq) != want {
					t.Fatalf("has(%d) = %v in %v", seq, !want, rs)
				}
			}
		})
	}
}
