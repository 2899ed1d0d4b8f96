package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is the garbage collector's target when GOGC is not set. A
// broker allocates a message per publish and keeps little alive, so with
// Go's default (100) it collects several times a second under load, and
// each collection delays deliveries on a gateway's few cores; 400 collects
// a quarter as often, for a heap up to five times the live data (tens of
// megabytes). See docs/operations.md.
const gcPercent = 400

// tuneGC sets gcPercent unless GOGC is set, and, unless GOMEMLIMIT is set,
// a soft memory limit of half the machine's memory, so that a
// small gateway collects sooner rather than grows.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		if total := memTotal(); total > 0 {
			debug.SetMemoryLimit(total / 2)
		}
	}
}

// memTotal reads MemTotal from /proc/meminfo, in bytes; 0 when unknown.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
