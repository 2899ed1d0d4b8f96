package discovery

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

const svc = "gantry-headless.default.svc.cluster.local"

// newTestKubernetes returns a Kubernetes source on a fake resolver and a
// clock the test moves; this pod is 10.1.0.1.
func newTestKubernetes(t *testing.T) (*Kubernetes, *fakeResolver, *time.Time) {
	t.Helper()
	r := newFakeResolver()
	k, err := NewKubernetes(KubernetesOptions{ServiceDNS: svc, PeerPort: 9200, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	k.now = func() time.Time { return now }
	k.localIPs = func() ([]net.IP, error) { return ips("127.0.0.1", "10.1.0.1"), nil }
	return k, r, &now
}

func TestKubernetesPodsAppearAndLeave(t *testing.T) {
	k, r, now := newTestKubernetes(t)
	ctx := context.Background()
	t0 := *now
	peers := func(want ...string) {
		t.Helper()
		ps, err := k.Peers(ctx)
		if err != nil {
			t.Fatalf("Peers: %v", err)
		}
		if got := addrs(ps); !slices.Equal(got, want) {
			t.Fatalf("peers %v, want %v", got, want)
		}
	}
	if _, ok := k.AbsentSince("10.1.0.2:9200"); ok {
		t.Fatal("absence reported before any lookup")
	}

	r.set(svc, "10.1.0.1", "10.1.0.2")
	peers("10.1.0.2:9200") // this pod left out
	r.set(svc, "10.1.0.3", "10.1.0.1", "10.1.0.2")
	*now = t0.Add(5 * time.Second)
	peers("10.1.0.2:9200", "10.1.0.3:9200")
	if a := k.Absent(); len(a) != 0 {
		t.Fatalf("Absent = %v with every pod listed", a)
	}

	// Pod 2 leaves at t0+10s.
	r.set(svc, "10.1.0.1", "10.1.0.3")
	*now = t0.Add(10 * time.Second)
	peers("10.1.0.3:9200")
	*now = t0.Add(15 * time.Second)
	peers("10.1.0.3:9200")
	want := []Absence{{RaftAddr: "10.1.0.2:9200", Since: t0.Add(10 * time.Second)}}
	if a := k.Absent(); !slices.Equal(a, want) {
		t.Fatalf("Absent = %v, want %v (since the first lookup without it)", a, want)
	}
	if since, ok := k.AbsentSince("10.1.0.2:9200"); !ok || !since.Equal(want[0].Since) {
		t.Fatalf("AbsentSince(pod 2) = %v, %v", since, ok)
	}
	if _, ok := k.AbsentSince("10.1.0.3:9200"); ok {
		t.Fatal("a listed pod reported absent")
	}
	// A member this node never saw listed has been absent at least since
	// the first lookup: a leader started after it left can still act.
	if since, ok := k.AbsentSince("10.1.0.99:9200"); !ok || !since.Equal(t0) {
		t.Fatalf("AbsentSince(never listed) = %v, %v; want %v, true", since, ok, t0)
	}

	// A failing lookup is not an absence: nothing changes.
	r.fail(svc, errTemporary)
	*now = t0.Add(20 * time.Second)
	if _, err := k.Peers(ctx); err == nil {
		t.Fatal("Peers hid a DNS failure")
	}
	if _, ok := k.AbsentSince("10.1.0.3:9200"); ok {
		t.Fatal("a DNS failure made a listed pod absent")
	}

	// Pod 2 returns: no longer absent.
	r.set(svc, "10.1.0.1", "10.1.0.2", "10.1.0.3")
	*now = t0.Add(25 * time.Second)
	peers("10.1.0.2:9200", "10.1.0.3:9200")
	if a := k.Absent(); len(a) != 0 {
		t.Fatalf("Absent = %v after the pod returned", a)
	}

	// No ready pod at all: "no such host" is an empty Service.
	r.set(svc)
	*now = t0.Add(30 * time.Second)
	peers()
	if a := k.Absent(); len(a) != 3 || !a[0].Since.Equal(*now) {
		t.Fatalf("Absent = %v, want all three pods since %v", a, *now)
	}

	// Absences are forgotten after forgetAbsentAfter; AbsentSince then
	// still answers with an earlier time.
	*now = t0.Add(30*time.Second + forgetAbsentAfter + time.Second)
	peers()
	if a := k.Absent(); len(a) != 0 {
		t.Fatalf("Absent = %v, want old absences forgotten", a)
	}
	if since, ok := k.AbsentSince("10.1.0.2:9200"); !ok || !since.Equal(t0) {
		t.Fatalf("AbsentSince after forgetting = %v, %v; want %v, true", since, ok, t0)
	}
}

func TestKubernetesRunLooksUpPeriodically(t *testing.T) {
	checkNoLeak(t)
	r := newFakeResolver()
	rec, log := newLogRecorder()
	k, err := NewKubernetes(KubernetesOptions{ServiceDNS: svc, PeerPort: 9200, Resolver: r, Interval: 10 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.fail(svc, errTemporary)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	eventually(t, 5*time.Second, func() error {
		if n := r.lookups(); n < 5 {
			return errorf("%d lookups", n)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if n := len(rec.records("WARN", "cannot look up")); n != 1 {
		t.Fatalf("%d warnings for a lookup failing every 10 ms, want 1 (rate-limited):\n%s", n, rec)
	}
	if w := rec.records("WARN", ""); len(w) > 0 && w[0]["component"] != "discovery" {
		t.Fatalf("warning without component=discovery: %v", w[0])
	}
}

func TestKubernetesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts KubernetesOptions
		want string
	}{
		{"no service", KubernetesOptions{PeerPort: 9200}, "KubernetesServiceDns"},
		{"no port", KubernetesOptions{ServiceDNS: svc}, "KubernetesPeerPort = 0"},
		{"port too high", KubernetesOptions{ServiceDNS: svc, PeerPort: 70000}, "KubernetesPeerPort = 70000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewKubernetes(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
