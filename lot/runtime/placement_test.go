package runtime

import (
	"sync"
	"testing"
	"time"
)

// fakePlacement runs here what the test says.
type fakePlacement struct {
	mu   sync.Mutex
	here map[string]bool
}

func (p *fakePlacement) RunsHere(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.here[key]
}

func (p *fakePlacement) set(key string, here bool) {
	p.mu.Lock()
	p.here[key] = here
	p.mu.Unlock()
}

// TestPlacement: with a Placement a timer runs only while it says here;
// ON START does not run at deploy but through RunStart, only with the
// deployed code; Work lists the timers and ON START actions.
func TestPlacement(t *testing.T) {
	p := &fakePlacement{here: map[string]bool{}}
	h := newHarness(t, func(h *harness) { h.engineOpts = func(o *Options) { o.Placement = p } })
	h.mustCommand(`-addAction DEFINE ACTION Beat ON EVERY 10 SECONDS DO PUBLISH TOPIC "beat" WITH "b"`)
	h.mustCommand(`-addAction DEFINE ACTION Boot ON START DO PUBLISH TOPIC "boot" WITH "s"`)
	work := h.eng.Work()
	if len(work) != 2 || work[0].Key != WorkTimer+"Beat" || work[1].Key != WorkStart+"Boot" || work[1].Code == "" {
		t.Fatalf("Work = %+v", work)
	}
	h.clock.Advance(10 * time.Second)
	h.settle(h.root)
	if got := h.root.on("beat"); len(got) != 0 {
		t.Fatalf("a timer owned elsewhere ran: %q", got)
	}
	if got := h.root.on("boot"); len(got) != 0 {
		t.Fatalf("ON START ran at deploy under a placement: %q", got)
	}
	p.set(WorkTimer+"Beat", true)
	h.clock.Advance(10 * time.Second)
	if got := h.root.await(t, "beat"); got != "b" {
		t.Fatalf("beat = %q", got)
	}
	if h.eng.RunStart("Boot", "stale-code") {
		t.Fatal("RunStart ran an ON START action with other code")
	}
	if !h.eng.RunStart("Boot", work[1].Code) {
		t.Fatal("RunStart did not run")
	}
	if got := h.root.await(t, "boot"); got != "s" {
		t.Fatalf("boot = %q", got)
	}
}
