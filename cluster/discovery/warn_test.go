package discovery

import (
	"fmt"
	"testing"
	"time"
)

func TestLimitedLog(t *testing.T) {
	rec, log := newLogRecorder()
	l := newLimitedLog(log)
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }

	for range 100 { // 100 in under a minute: one line
		l.Warn("forged|10.0.0.9", "forged")
		now = now.Add(500 * time.Millisecond)
	}
	l.Warn("forged|10.0.0.8", "forged") // another source: its own line
	now = now.Add(warnEvery)
	l.Warn("forged|10.0.0.9", "forged") // a minute later: one line with the count held back
	got := rec.records("WARN", "forged")
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(got), rec)
	}
	if got[2]["repeated"] != float64(99) {
		t.Fatalf("third line %v, want repeated=99", got[2])
	}

	// Keys from the network cannot grow the table without bound.
	for i := range 3 * maxWarnKeys {
		l.Warn(fmt.Sprintf("forged|%d", i), "spoofed source")
	}
	l.mu.Lock()
	n := len(l.seen)
	l.mu.Unlock()
	if n > maxWarnKeys+1 {
		t.Fatalf("%d keys kept, want at most %d", n, maxWarnKeys+1)
	}
	if lines := len(rec.records("WARN", "")); lines > 3+maxWarnKeys+1 {
		t.Fatalf("%d lines for %d spoofed sources", lines, 3*maxWarnKeys)
	}
}
