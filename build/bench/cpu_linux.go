package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// cpuMask is a Linux cpu_set_t for up to 1024 CPUs.
type cpuMask [16]uint64

// pinSelf restricts every thread of this process to cpus and sets
// GOMAXPROCS to match. Threads the runtime starts later inherit the mask
// of the thread that creates them; the task list is walked twice so that
// a thread created during the first walk is caught by the second.
func pinSelf(cpus []int) error {
	var mask cpuMask
	for _, c := range cpus {
		if c < 0 || c >= len(mask)*64 {
			return fmt.Errorf("CPU %d out of range", c)
		}
		mask[c/64] |= 1 << (c % 64)
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid),
				unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
			if errno != 0 && errno != syscall.ESRCH {
				return fmt.Errorf("sched_setaffinity: %w", errno)
			}
		}
	}
	runtime.GOMAXPROCS(len(cpus))
	return nil
}

// raiseFileLimit raises the soft open-file limit to the hard one and
// returns it. Setting it explicitly (rather than relying on the Go
// runtime's own raise) makes child processes inherit it.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Max, nil
}
