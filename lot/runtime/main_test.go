package runtime

import (
	"testing"

	"gantry/internal/leakcheck"
)

// TestMain fails the run when a goroutine of the engine, the scheduler or
// the broker outlives the tests: every test stops its engine and shuts its
// broker down in t.Cleanup, so by now none may remain.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "the engine, the scheduler or the broker",
		leakcheck.Running("gantry/lot/runtime.", "gantry/lot/schedule.", "gantry/broker."))
}
