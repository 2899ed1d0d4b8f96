package partition

import (
	"testing"
)

// FuzzDecode: Decode never panics; what it accepts is valid and survives
// a round trip.
func FuzzDecode(f *testing.F) {
	for _, m := range []Map{{}, sampleMap()} {
		b, _ := m.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid map: %v", err)
		}
		again, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again)
		if err != nil || !back.Equal(m) {
			t.Fatalf("round trip: %v\n%s\n%s", err, dump(m), dump(back))
		}
	})
}

var fuzzNodes = []string{"a", "b", "c", "d", "e", "f", "g", "h"}

// FuzzRebalance plans from any valid map (decoded from the fuzzer's
// bytes, so not only maps the planner made) for any membership, count and
// rf, and checks the rules of doc.go on the step, then settles and checks
// the balance.
func FuzzRebalance(f *testing.F) {
	b, _ := sampleMap().MarshalBinary()
	f.Add(b, uint8(0b1011), uint16(4), uint8(2))
	f.Add([]byte{1, 0, 0, 0}, uint8(0b111), uint16(32), uint8(3))
	f.Add([]byte{1, 0, 0, 0}, uint8(0), uint16(3), uint8(3))
	joined, _ := Map{Version: 5, Partitions: []Assignment{part(1, "a", "b", "c"), part(1, "b", "a", "c*"), part(1, "a", "b"), part(1, "b", "a")}}.MarshalBinary()
	f.Add(joined, uint8(0b0111), uint16(4), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, mask uint8, count uint16, rf uint8) {
		prev, err := Decode(b)
		if err != nil {
			return
		}
		var nodes []string
		for i, n := range fuzzNodes {
			if mask&(1<<i) != 0 {
				nodes = append(nodes, n)
			}
		}
		c := 1 + int(count)%MaxCount
		r := 1 + int(rf)%MaxReplicationFactor
		if c > 512 {
			c = 1 + c%512 // keep each run fast
		}
		next, moves, err := Rebalance(prev, nodes, c, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkStep(prev, next, moves, nodes, c, r); err != nil {
			t.Fatalf("%v\nprev %s\nnext %s", err, dump(prev), dump(next))
		}
		settled, _ := settle(t, next, nodes, c, r)
		if err := checkBalanced(settled, nodes, r); err != nil {
			t.Fatalf("%v\n%s", err, dump(settled))
		}
	})
}
