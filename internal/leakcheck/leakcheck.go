package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Stacks returns the stacks of the goroutines that match picks, the
// caller's own left out.
func Stacks(match func(stack string) bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n")[1:] { // the first is the caller's
		if match(g) {
			out = append(out, g)
		}
	}
	return out
}

// Wait waits up to timeout for no goroutine to match, and otherwise
// returns an error that says how many of what remain, with their stacks.
func Wait(timeout time.Duration, what string, match func(stack string) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		left := Stacks(match)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d goroutines of %s remain after the tests:\n\n%s",
				len(left), what, strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// Main runs the tests of m and exits with their code, or with 1 when they
// passed but goroutines that match (of what, as the error names them) are
// still running 5 s later: every test stops what it started in t.Cleanup,
// so by then none may remain.
func Main(m *testing.M, what string, match func(stack string) bool) {
	code := m.Run()
	if code == 0 {
		if err := Wait(5*time.Second, what, match); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Running returns a match for the goroutines whose stack names any of
// the given strings (a package path with its trailing dot, as
// "gantry/broker.", names its functions, and the functions that created
// a goroutine).
func Running(names ...string) func(stack string) bool {
	return func(stack string) bool {
		for _, s := range names {
			if strings.Contains(stack, s) {
				return true
			}
		}
		return false
	}
}
