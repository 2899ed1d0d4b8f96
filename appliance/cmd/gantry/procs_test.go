package main

import (
	"runtime"
	"testing"
)

// A node that fsyncs on the publish path runs with at least two Ps on a
// one-CPU machine; one that does not, or whose GOMAXPROCS is set, keeps
// what it has.
func TestTuneProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	cases := []struct {
		name   string
		env    bool
		fsyncs bool
		want   int
	}{
		{"fsyncs", false, true, minProcsForFsync},
		{"no fsyncs", false, false, 1},
		{"GOMAXPROCS set", true, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env {
				t.Setenv("GOMAXPROCS", "1")
			}
			runtime.GOMAXPROCS(1)
			tuneProcs(c.fsyncs)
			if got := runtime.GOMAXPROCS(0); got != c.want {
				t.Fatalf("GOMAXPROCS %d, want %d", got, c.want)
			}
		})
	}
	runtime.GOMAXPROCS(4)
	tuneProcs(true)
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("GOMAXPROCS lowered to %d from 4", got)
	}
}
