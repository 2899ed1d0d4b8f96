package dataplane

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/signing"
)

// emptySessions is a SessionBroker that holds no session.
type emptySessions struct{}

func (emptySessions) TakeOver(string) (*broker.SessionState, bool)            { return nil, false }
func (emptySessions) ExportSession(string, bool) (*broker.SessionState, bool) { return nil, false }
func (emptySessions) ImportSession(*broker.SessionState) error                { return nil }
func (emptySessions) LendSession(string) (*broker.LentSession, bool)          { return nil, false }
func (emptySessions) ImportSessionAfter(_ *broker.SessionState, m *broker.Message) (*broker.Message, error) {
	return m, nil
}
func (emptySessions) PersistentSessions() []broker.SessionSummary { return nil }

// recorder is a client transport that keeps the last request sent to
// each path, byte for byte, as a host on the path between nodes would.
type recorder struct {
	mu   sync.Mutex
	last map[string]recorded
}

type recorded struct {
	header string
	body   []byte
}

func (t *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.last[r.URL.Path] = recorded{header: r.Header.Get(signing.RequestHeader), body: body}
	t.mu.Unlock()
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(out)
}

func sessionsNode(t *testing.T, name string, opts SessionOptions) (*Plane, *Sessions) {
	t.Helper()
	p, err := New(Options{NodeName: name, ClusterID: "c", Username: "cluster", Broker: nopBroker{},
		Signer: signing.New([]byte("sessions-secret"), nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	opts.Broker = emptySessions{}
	if opts.Members == nil {
		opts.Members = func() []string { return nil }
	}
	return p, p.NewSessions(opts)
}

// TestSessionRequestsReplayRefused sends each request of the session
// exchange through Sessions.post, records it on the way, and POSTs the
// same bytes again: refused as replayed (an export replayed would hand a
// session to whoever replays it); and to another path (an export request
// against the handover path): refused as signed for another. The first
// passed the checks (counted accepted).
func TestSessionRequestsReplayRefused(t *testing.T) {
	pb, b := sessionsNode(t, "node-b", SessionOptions{})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	rec := &recorder{last: map[string]recorded{}}
	_, a := sessionsNode(t, "node-a", SessionOptions{HTTP: &http.Client{Transport: rec, Timeout: 5 * time.Second},
		PeerOps: func(context.Context, string) string { return host }})

	paths := []string{SessionsTakeoverPath, SessionsExportPath, SessionsPartPath, SessionsDonePath, SessionsHandoverPath,
		SessionsDirectoryPath, SessionsFlushPath}
	for i, path := range paths {
		other := paths[(i+1)%len(paths)]
		t.Run(strings.TrimPrefix(path, SessionsPath+"/"), func(t *testing.T) {
			before := pb.requests.Stats()
			req := sessionReq{Client: "line-7", Lend: 1}
			var reply sessionReply
			if err := a.post("node-b", path, req, &reply); err != nil {
				t.Fatalf("the real request: %v", err)
			}
			if st := pb.requests.Stats(); st.Accepted != before.Accepted+1 {
				t.Fatalf("accepted %d, want %d", st.Accepted, before.Accepted+1)
			}
			rec.mu.Lock()
			got := rec.last[path]
			rec.mu.Unlock()
			for _, tc := range []struct {
				to, want string
			}{{path, "replayed"}, {other, "wrong_path"}} {
				hr, _ := http.NewRequest(http.MethodPost, srv.URL+tc.to, bytes.NewReader(got.body))
				hr.Header.Set(signing.RequestHeader, got.header)
				resp, err := http.DefaultClient.Do(hr)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tc.want) {
					t.Fatalf("the recorded request to %s: %s %q, want 403 %s", tc.to, resp.Status, body, tc.want)
				}
			}
			st := pb.requests.Stats()
			if st.Refused["replayed"] != before.Refused["replayed"]+1 || st.Refused["wrong_path"] != before.Refused["wrong_path"]+1 {
				t.Fatalf("refusals %v, were %v: want one more replayed and wrong_path", st.Refused, before.Refused)
			}
		})
	}
}

// TestSessionRequestLimitsPerPath: a takeover request (a client id) is
// refused beyond its small limit before its body is read, while a
// directory push may carry every session of its node.
func TestSessionRequestLimitsPerPath(t *testing.T) {
	pb, b := sessionsNode(t, "node-b", SessionOptions{})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	big := strings.Repeat("x", smallSessionMsg+1)
	q := signing.NewRequests(signing.New([]byte("sessions-secret"), nil), &signing.RequestOptions{Node: "node-a"})
	for _, tc := range []struct {
		path   string
		status int
	}{{SessionsTakeoverPath, http.StatusRequestEntityTooLarge}, {SessionsDirectoryPath, http.StatusOK}} {
		body := []byte(`{"clusterId":"c","from":"node-a","state":{"client":"` + big + `"}}`)
		rep, err := q.Post(context.Background(), srv.Client(), strings.TrimPrefix(srv.URL, "http://"), tc.path, "node-b", body, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != tc.status {
			t.Errorf("%d bytes to %s: %d %s, want %d", len(body), tc.path, rep.Status, rep.Body, tc.status)
		}
	}
	if n := pb.requests.Stats().Refused["too_large"]; n != 1 {
		t.Fatalf("too_large counted %d, want 1", n)
	}
}
