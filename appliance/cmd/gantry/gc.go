package main

import (
	"bufio"
	"os"
	"runtime"
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

// minProcsForFsync is the fewest Ps a node that fsyncs on the publish
// path (durability, or a cluster's Raft log) runs with.
const minProcsForFsync = 2

// tuneProcs raises GOMAXPROCS to minProcsForFsync on a one-CPU machine
// (or a process confined to one CPU) when the node fsyncs on the publish
// path, unless GOMAXPROCS is set. With one P, the store's writer holds it
// in fdatasync until the runtime's monitor hands it to another thread;
// when the call returns, the writer waits in the global run queue behind
// every client's reader. Acknowledgements then waited about 30 ms at the
// median, and a durable node confined to one core acknowledged 25,513 QoS 1 messages/s
// of 16 B; with two Ps, 204,787 (see docs/operations.md for the command).
// Without fsyncs the second P only adds thread switches: pinned fan-in at
// QoS 1 fell by a fifth with it, so other nodes keep one.
func tuneProcs(fsyncs bool) {
	if _, ok := os.LookupEnv("GOMAXPROCS"); ok || !fsyncs {
		return
	}
	if runtime.GOMAXPROCS(0) < minProcsForFsync {
		runtime.GOMAXPROCS(minProcsForFsync)
	}
}
