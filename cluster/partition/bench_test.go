package partition

import "testing"

// BenchmarkRebalance times the planner on the largest map (4096
// partitions, rf 3) for the events that move the most.
func BenchmarkRebalance(b *testing.B) {
	six := []string{"a", "b", "c", "d", "e", "f"}
	seven := append(six[:6:6], "g")
	settled, _ := settle(b, Map{}, seven, MaxCount, 3)
	settledSix, _ := settle(b, Map{}, six, MaxCount, 3)
	joining, _ := mustRebalance(b, settledSix, seven, MaxCount, 3)
	cases := []struct {
		name  string
		prev  Map
		nodes []string
	}{
		{"first map, 7 nodes", Map{}, seven},
		{"node joins 6→7", settledSix, seven},
		{"joined node caught up", catchUp(joining), seven},
		{"node lost 7→6", settled, six},
		{"no change", settled, seven},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Rebalance(c.prev, c.nodes, MaxCount, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
