package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/internal/leakcheck"
)

// eventually polls cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// ownFrame matches a stack frame in this package's non-test code or in
// the zeroconf library.
var ownFrame = regexp.MustCompile(`/cluster/discovery/[^/]+\.go:\d+|grandcat/zeroconf`)

// ownGoroutine reports whether a goroutine runs this package's non-test
// code or zeroconf's.
func ownGoroutine(stack string) bool {
	for _, line := range strings.Split(stack, "\n") {
		if strings.HasPrefix(line, "\t") && ownFrame.MatchString(line) && !strings.Contains(line, "_test.go") {
			return true
		}
	}
	return false
}

// discoveryGoroutines returns the stacks of goroutines running this
// package's code or zeroconf's, the caller's own excluded.
func discoveryGoroutines() []string { return leakcheck.Stacks(ownGoroutine) }

// noGoroutinesLeft waits up to timeout for discoveryGoroutines to be
// empty and returns the leftovers otherwise.
func noGoroutinesLeft(timeout time.Duration) error {
	return leakcheck.Wait(timeout, "package discovery or zeroconf", ownGoroutine)
}

// checkNoLeak fails t if goroutines of this package outlive the test.
func checkNoLeak(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := noGoroutinesLeft(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
}

// logRecorder is a slog handler target that keeps the records as JSON.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func newLogRecorder() (*logRecorder, *slog.Logger) {
	r := &logRecorder{}
	return r, slog.New(slog.NewJSONHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records returns the logged records at level (any level when "") whose
// message contains substr.
func (r *logRecorder) records(level, substr string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(r.buf.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		msg, _ := m["msg"].(string)
		if (level == "" || m["level"] == level) && strings.Contains(msg, substr) {
			out = append(out, m)
		}
	}
	return out
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// fakeResolver answers LookupHost from a table the test changes.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]string
	errs  map[string]error
	calls int
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{hosts: map[string][]string{}, errs: map[string]error{}}
}

func (f *fakeResolver) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.errs, host)
	if len(addrs) == 0 {
		delete(f.hosts, host)
		return
	}
	f.hosts[host] = addrs
}

func (f *fakeResolver) fail(host string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[host] = err
}

func (f *fakeResolver) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if err := f.errs[host]; err != nil {
		return nil, err
	}
	if a, ok := f.hosts[host]; ok {
		return append([]string(nil), a...), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// errTemporary is a DNS failure that is not "no such host".
var errTemporary = &net.DNSError{Err: "server misbehaving", Name: "dns", IsTemporary: true}

// addrs returns the RaftAddr of each peer.
func addrs(ps []Peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.RaftAddr
	}
	return out
}

// ips parses IP literals.
func ips(s ...string) []net.IP {
	out := make([]net.IP, len(s))
	for i, a := range s {
		out[i] = net.ParseIP(a)
	}
	return out
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
