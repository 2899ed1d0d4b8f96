package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lateResolver is a name server where a name appears late: it answers
// "no such host" to the first `after` lookups, and addr after that.
type lateResolver struct {
	mu    sync.Mutex
	calls int
	after int // -1: never resolves
	addr  string
}

func (r *lateResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.after >= 0 && r.calls > r.after {
		return []string{r.addr}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *lateResolver) resolved() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after >= 0 && r.calls > r.after
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdvertisedHostResolvesLate starts a node whose default advertised
// name (its NodeName) did not resolve at start, so it advertises an
// interface address: once the name resolves, within BootstrapGrace, the
// node advertises the name.
func TestAdvertisedHostResolvesLate(t *testing.T) {
	res := &lateResolver{after: 3, addr: "127.0.0.1"}
	logs := &syncBuffer{}
	n := newBareNode(t, "late", func(o *Options) {
		o.AdvertisedHost, o.Resolver = "late.gantry.test", res
		o.ReconcileInterval, o.BootstrapGrace = 20*time.Millisecond, 10*time.Second
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	_, port, _ := net.SplitHostPort(n.RaftAddr())
	n.Start()
	eventually(t, 5*time.Second, func() error {
		if got, want := n.RaftAddr(), "late.gantry.test:"+port; got != want {
			return fmt.Errorf("advertises %s, want %s", got, want)
		}
		return nil
	})
	for _, want := range []string{`AdvertisedHost \"late.gantry.test\" does not resolve yet`, "AdvertisedHost resolves now: advertising it"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// TestAdvertisedHostHoldsJoin starts a fresh node that advertises its
// AdvertisedHost, a name that resolves only after a few lookups, next to
// a member of a running cluster: it asks to be added only once its name
// resolves, so the leader never records a name nobody can resolve.
func TestAdvertisedHostHoldsJoin(t *testing.T) {
	res := &lateResolver{after: 5, addr: "127.0.0.1"}
	member := newBareNode(t, "member", nil) // signs as the cluster does
	type join struct {
		resolved bool
		raftAddr string
	}
	joins := make(chan join, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			var h Hello
			req, ok := member.readRequest(w, r, JoinPath, maxPeerBody, &h)
			if !ok {
				return
			}
			defer req.Done()
			joins <- join{res.resolved(), h.RaftAddr}
			member.writeReply(w, req, http.StatusConflict, joinReply{Error: "not now"})
			return
		}
		member.writeSigned(w, http.StatusOK, Hello{ClusterID: "test-cluster", NodeName: "member", RaftAddr: "127.0.0.1:1",
			HasState: true, Member: true, Leader: "member", Nonce: r.URL.Query().Get(NonceParam)})
	}))
	defer srv.Close()
	n := newBareNode(t, "fresh", func(o *Options) {
		o.AdvertiseAddr, o.AdvertisedHost, o.Resolver = "pod-1.gantry.test:0", "pod-1.gantry.test", res
		o.ReconcileInterval, o.BootstrapGrace = 20*time.Millisecond, 10*time.Second
		o.Discovery = staticPeers{{RaftAddr: "127.0.0.1:1", OpsAddr: hostOf(srv)}}
	})
	n.Start()
	select {
	case j := <-joins:
		if !j.resolved || !strings.HasPrefix(j.raftAddr, "pod-1.gantry.test:") {
			t.Errorf("first join request %+v: want one sent after the name resolved, for the name", j)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no join request")
	}
}

// TestAdvertisedHostNeverResolves gives up after BootstrapGrace: the log
// names the field and the grace, and the node goes on (here it forms a
// cluster alone).
func TestAdvertisedHostNeverResolves(t *testing.T) {
	logs := &syncBuffer{}
	n := newBareNode(t, "lonely", func(o *Options) {
		o.AdvertiseAddr, o.AdvertisedHost, o.Resolver = "never.gantry.test:0", "never.gantry.test", &lateResolver{after: -1}
		o.ReconcileInterval, o.BootstrapGrace = 20*time.Millisecond, 300*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	n.Start()
	eventually(t, 5*time.Second, func() error {
		if !n.IsLeader() {
			return fmt.Errorf("does not lead a cluster of its own")
		}
		return nil
	})
	want := `Cluster.AdvertisedHost = \"never.gantry.test\" does not resolve after BootstrapGraceSeconds (300ms)`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs)
	}
}
