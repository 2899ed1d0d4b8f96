package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/cluster/discovery"
)

// newBareNode opens a node on 127.0.0.1 that is not started: its peer
// protocol answers, its control loop does not run.
func newBareNode(t *testing.T, name string, adjust func(*Options)) *Node {
	t.Helper()
	o := DefaultOptions()
	o.ClusterID = "test-cluster"
	o.NodeName = name
	o.BindAddr, o.AdvertiseAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.SharedSecret = []byte("peer-test-secret")
	if adjust != nil {
		adjust(&o)
	}
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return n
}

func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// TestHelloReplayRefused records a node's signed answer to one peer
// question and serves it again from elsewhere: the asker refuses it,
// because it does not carry the nonce of the new question, while the
// real node's fresh answers are taken.
func TestHelloReplayRefused(t *testing.T) {
	a, b := newBareNode(t, "node-a", nil), newBareNode(t, "node-b", nil)
	real := httptest.NewServer(a.PeerHandler())
	defer real.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if h, err := b.fetchHello(ctx, hostOf(real)); err != nil || h.NodeName != "node-a" {
		t.Fatalf("fresh answer: %+v, %v; want node-a's hello", h, err)
	}
	resp, err := http.Get(real.URL + PeerPath + "?" + NonceParam + "=" + newNonce())
	if err != nil {
		t.Fatal(err)
	}
	recorded, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	replayer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(recorded) }))
	defer replayer.Close()
	if h, err := b.fetchHello(ctx, hostOf(replayer)); !errors.Is(err, errReplayed) {
		t.Fatalf("replayed answer: %+v, %v; want %v", h, err, errReplayed)
	} else {
		t.Logf("replay refused: %v", err)
	}

	for _, q := range []string{"", "?" + NonceParam + "=xyz", "?" + NonceParam + "=" + strings.Repeat("ab", 33)} {
		resp, err := http.Get(real.URL + PeerPath + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), NonceParam) {
			t.Errorf("GET %s%s: %s %q, want 400 naming the %s", PeerPath, q, resp.Status, body, NonceParam)
		}
	}
}

// staticPeers is discovery that lists fixed peers.
type staticPeers []discovery.Peer

func (s staticPeers) Peers(context.Context) ([]discovery.Peer, error) { return s, nil }

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestForeignPeerNamedForWhatItIs gives a fresh node, past its bootstrap
// grace, one peer of another cluster and one that does not answer: it
// does not form a cluster (BootstrapPeerCheck), and its log and
// GET /cluster say that the first answers for another cluster and the
// second does not answer.
func TestForeignPeerNamedForWhatItIs(t *testing.T) {
	other := newBareNode(t, "plant-2-a", func(o *Options) { o.ClusterID = "plant-2" })
	otherSrv := httptest.NewServer(other.PeerHandler())
	defer otherSrv.Close()
	silent := httptest.NewServer(http.NotFoundHandler())
	silentAddr := hostOf(silent)
	silent.Close() // nothing listens there any more
	logs := &syncBuffer{}
	n := newBareNode(t, "node-1", func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Discovery = staticPeers{
			{RaftAddr: other.RaftAddr(), OpsAddr: hostOf(otherSrv)},
			{RaftAddr: "127.0.0.1:1", OpsAddr: silentAddr},
		}
	})
	n.seekCluster(context.Background()) // started is zero: the grace has passed
	if n.isMember() {
		t.Fatal("formed a cluster although a peer did not answer")
	}
	wantForeign := other.RaftAddr() + ` (plant-2-a) answers for another cluster \"plant-2\"`
	got := logs.String()
	if !strings.Contains(got, "these peers answer for another cluster") || !strings.Contains(got, wantForeign) {
		t.Errorf("log does not say the peer answers for another cluster:\n%s", got)
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "do not answer") && (strings.Contains(line, other.RaftAddr()) || !strings.Contains(line, "127.0.0.1:1")) {
			t.Errorf("log does not tell the silent peer from the foreign one:\n%s", got)
		}
	}
	if !strings.Contains(got, "these peers do not answer") {
		t.Errorf("log does not name the peer that does not answer:\n%s", got)
	}
	st := n.Status()
	if st.Role != "joining" || !strings.Contains(st.Waiting, strings.ReplaceAll(wantForeign, `\"`, `"`)) ||
		!strings.Contains(st.Waiting, "127.0.0.1:1 does not answer") || !strings.Contains(st.Waiting, `ClusterId is "test-cluster"`) {
		t.Errorf("status: role %q, waiting %q", st.Role, st.Waiting)
	}
	t.Logf("log:\n%swaiting: %s", got, st.Waiting)
}
