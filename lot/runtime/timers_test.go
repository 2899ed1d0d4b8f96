package runtime

import (
	"strings"
	"testing"
	"time"
)

// TestTimers: timers run on the engine's clock (here a manual one): a
// redeploy with the same schedule keeps the phase and runs the new body, a
// new schedule starts over, wall-clock schedules fire at their time, and a
// timer faster than the scheduler allows is refused at deploy.
func TestTimers(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addAction DEFINE ACTION Beat ON EVERY 10 SECONDS DO PUBLISH TOPIC "beat" WITH "v1"`)
	h.clock.Advance(6 * time.Second)
	h.mustCommand(`-addAction DEFINE ACTION Beat ON EVERY 10 SECONDS DO PUBLISH TOPIC "beat" WITH "v2"`)
	h.clock.Advance(4 * time.Second) // 10 s after the first deploy: the phase is kept
	if got := h.root.await(t, "beat"); got != "v2" {
		t.Errorf("beat = %q, want v2 from the redeployed body", got)
	}
	h.mustCommand(`-addAction DEFINE ACTION Beat ON EVERY 5 SECONDS DO PUBLISH TOPIC "beat" WITH "v3"`)
	h.clock.Advance(4 * time.Second)
	h.settle(h.root)
	if got := h.root.on("beat"); len(got) != 1 {
		t.Errorf("beat = %q: a new schedule fired before its interval", got)
	}
	h.clock.Advance(time.Second)
	if got := h.root.await(t, "beat"); got != "v3" {
		t.Errorf("beat = %q, want v3", got)
	}

	// The clock starts on Monday 2025-03-17 08:00 local time.
	h.mustCommand(`-addAction DEFINE ACTION Morning ON EVERY MONDAY AT "08:30" DO PUBLISH TOPIC "morning" WITH "m"`)
	h.mustCommand(`-addAction DEFINE ACTION Daily ON EVERY DAY AT "08:30" DO PUBLISH TOPIC "daily" WITH "d"`)
	h.mustCommand(`-addAction DEFINE ACTION Once ON TIMESTAMP "17-03-2025 09:00:00" DO PUBLISH TOPIC "once" WITH "o"`)
	h.mustCommand(`-removeAction Beat`)
	h.clock.Advance(29 * time.Minute)
	h.settle(h.root)
	if got := h.root.on("morning"); len(got) != 0 {
		t.Errorf("morning fired early: %q", got)
	}
	h.clock.Advance(time.Minute)
	if got := h.root.await(t, "morning"); got != "m" {
		t.Errorf("morning = %q", got)
	}
	h.clock.Advance(8 * 24 * time.Hour)
	h.settle(h.root)
	if got := h.root.on("once"); len(got) != 1 {
		t.Errorf("once = %q, want one run", got)
	}
	if got := h.root.on("daily"); len(got) != 9 {
		t.Errorf("daily = %q, want nine days", got)
	}
	if got := h.root.on("morning"); len(got) != 2 {
		t.Errorf("morning = %q, want two Mondays", got)
	}
	if got := h.root.on("beat"); len(got) != 2 {
		t.Errorf("beat = %q: a removed timer ran", got)
	}

	r := h.command(`-addAction DEFINE ACTION Fast ON EVERY 5 MILLISECONDS DO PUBLISH TOPIC "fast" WITH "x"`)
	if r.Success || len(r.Errors) == 0 || r.Errors[0].Line != 1 || !strings.Contains(r.Message, "shortest timer") {
		t.Errorf("a 5 ms timer: %+v, want it refused with a position", r)
	}
}

// TestModelRetainAndQoS: a model's RETAIN and QoS apply to what it
// publishes.
func TestModelRetainAndQoS(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addModel DEFINE MODEL R WITH TOPIC \"r/out\" WITH RETAIN AND QOS1\n    ADD STRING \"v\" WITH TOPIC \"r/in\" AS TRIGGER")
	h.root.publish(t, "r/in", "hello", 0)
	if got := h.root.await(t, "r/out"); got != `{"v":"hello"}` {
		t.Errorf("r/out = %q", got)
	}
	if got, ok := h.retained("r/out"); !ok || got != `{"v":"hello"}` {
		t.Errorf("retained r/out = %q (%v)", got, ok)
	}
	late := h.connect("alice", "alice-1")
	late.subscribe(t, "r/out")
	if got := late.await(t, "r/out"); got != `{"v":"hello"}` {
		t.Errorf("a late subscriber got %q", got)
	}
	if r := h.command("-removeModel R"); !r.Success {
		t.Errorf("-removeModel: %+v", r)
	}
}
