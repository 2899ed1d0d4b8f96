package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gantry/cluster/signing/signingtest"
)

// TestPeerRequestsReplayRefused sends each request of the peer protocol
// through its real sender (join, users, LoT, catch-up report), records
// it on the way, and POSTs the same bytes again: refused as replayed; and
// to another path: refused as signed for another. The first is answered
// by the node (not leader, here): it passed the checks (counted accepted).
func TestPeerRequestsReplayRefused(t *testing.T) {
	a := newBareNode(t, "node-a", nil)
	srv := httptest.NewServer(a.PeerHandler())
	defer srv.Close()
	rec := signingtest.NewRecorder()
	b := newBareNode(t, "node-b", func(o *Options) { o.HTTPClient = &http.Client{Transport: rec, Timeout: 5 * time.Second} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host := hostOf(srv)

	for _, tc := range []struct {
		path, other string
		send        func() error
	}{
		{JoinPath, CaughtUpPath, func() error {
			_, err := b.requestJoin(ctx, Hello{NodeName: "node-a", OpsAddr: host})
			return err
		}},
		{UsersPath, LoTPath, func() error {
			_, err := PostUsers(ctx, b.http, b.requests, host, "node-a", UsersRequest{ClusterID: "test-cluster", From: "node-b",
				Users: []User{{Name: "root", Hash: "h", Admin: true}}})
			return err
		}},
		{LoTPath, UsersPath, func() error {
			_, err := PostLoT(ctx, b.http, b.requests, host, "node-a", LoTRequest{ClusterID: "test-cluster", From: "node-b"})
			return err
		}},
		{CaughtUpPath, JoinPath, func() error {
			// ReportCaughtUp's own call, past its wait for a leader.
			_, err := postRequest(ctx, b.http, b.requests, host, CaughtUpPath, "node-a",
				CaughtUpRequest{ClusterID: "test-cluster", From: "node-b", Partition: 3, Node: "node-b"}, &struct{}{})
			return err
		}},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/cluster/"), func(t *testing.T) {
			before := a.requests.Stats()
			err := tc.send() // answered "not leader": node-a is not started
			got := rec.Last(tc.path)
			if got.Header == "" {
				t.Fatalf("no signed request recorded for %s", tc.path)
			}
			if st := a.requests.Stats(); st.Accepted != before.Accepted+1 {
				t.Fatalf("accepted %d, want %d (the real request: %v)", st.Accepted, before.Accepted+1, err)
			}
			if status, body := signingtest.Replay(t, srv.URL, tc.path, got); status != http.StatusForbidden || !strings.Contains(body, "replayed") {
				t.Fatalf("the same request again: %d %q, want 403 replayed", status, body)
			}
			if status, body := signingtest.Replay(t, srv.URL, tc.other, got); status != http.StatusForbidden || !strings.Contains(body, "wrong_path") {
				t.Fatalf("the request sent to %s: %d %q, want 403 wrong_path", tc.other, status, body)
			}
			st := a.requests.Stats()
			if st.Refused["replayed"] != before.Refused["replayed"]+1 || st.Refused["wrong_path"] != before.Refused["wrong_path"]+1 {
				t.Fatalf("refusals %v, were %v: want one more replayed and wrong_path", st.Refused, before.Refused)
			}
		})
	}
}

// TestPeerRequestForAnotherNodeRefused: a request node-b signed for
// node-c is refused by node-a, which holds the same secret.
func TestPeerRequestForAnotherNodeRefused(t *testing.T) {
	a := newBareNode(t, "node-a", nil)
	srv := httptest.NewServer(a.PeerHandler())
	defer srv.Close()
	b := newBareNode(t, "node-b", nil)
	_, err := PostUsers(context.Background(), b.http, b.requests, hostOf(srv), "node-c", UsersRequest{ClusterID: "test-cluster", From: "node-b"})
	if err == nil || !strings.Contains(err.Error(), "wrong_node") {
		t.Fatalf("a user change for node-c sent to node-a: %v, want refused (wrong_node)", err)
	}
	if n := a.requests.Stats().Refused["wrong_node"]; n != 1 {
		t.Fatalf("wrong_node counted %d, want 1", n)
	}
}
