package dataplane

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/signing"
	"gantry/cluster/signing/signingtest"
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
	rec := signingtest.NewRecorder()
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
			got := rec.Last(path)
			for _, tc := range []struct {
				to, want string
			}{{path, "replayed"}, {other, "wrong_path"}} {
				if status, body := signingtest.Replay(t, srv.URL, tc.to, got); status != http.StatusForbidden || !strings.Contains(body, tc.want) {
					t.Fatalf("the recorded request to %s: %d %q, want 403 %s", tc.to, status, body, tc.want)
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
