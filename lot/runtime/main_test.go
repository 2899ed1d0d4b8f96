package runtime

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a goroutine of the engine, the scheduler or
// the broker outlives the tests: every test stops its engine and shuts its
// broker down in t.Cleanup, so by now none may remain.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := waitNoGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// leaked returns the stacks that run code of the engine, the scheduler or
// the broker.
func leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "gantry/lot/runtime.leaked") {
			continue // this one
		}
		if strings.Contains(g, "gantry/lot/runtime.") || strings.Contains(g, "gantry/lot/schedule.") ||
			strings.Contains(g, "gantry/broker.") {
			out = append(out, g)
		}
	}
	return out
}

func waitNoGoroutines(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := leaked()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d goroutines remain after every engine stopped:\n\n%s",
				len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for a condition
	}
}
