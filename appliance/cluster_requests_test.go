package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry/cluster/signing"
	"gantry/cluster/signing/signingtest"
)

// refusedMetrics reads coreflux_cluster_requests_refused_total by reason
// from a node's /metrics.
func refusedMetrics(t *testing.T, ip string) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + ip + ":9100/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^coreflux_cluster_requests_refused_total\{reason="(\w+)"\} (\d+)$`).FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(out) != len(signing.RefusalReasons()) {
		t.Fatalf("/metrics lists %d refusal reasons, want %d:\n%s", len(out), len(signing.RefusalReasons()), grepLines(string(body), "requests"))
	}
	return out
}

// TestKeptRequestsReplayRefused plays broker-b sending broker-a kept
// values and asking for its own (POST /cluster/kept, /cluster/kept/all),
// signed with the cluster's secret as a node signs them: the same bytes
// POSTed again are refused as replayed, and POSTed to the other path as
// signed for another; /metrics counts both, and nothing else was refused
// while the real nodes exchanged their own requests.
func TestKeptRequestsReplayRefused(t *testing.T) {
	nodes := clusterOf(t, 2)
	agreeOnLeader(t, nodes, 2, 30*time.Second, "")
	a := nodes[0]
	q := signing.NewRequests(signing.New([]byte("a-long-random-secret"), nil), &signing.RequestOptions{Node: "broker-b"})
	post := func(path, header string, body []byte) (int, string) {
		return signingtest.Replay(t, "http://"+a.ip+":9100", path, signingtest.Recorded{Header: header, Body: body})
	}
	for i, tc := range []struct{ path, other, body string }{
		{"/cluster/kept", "/cluster/kept/all", `{"clusterId":"factory-floor","from":"broker-b","values":[]}`},
		{"/cluster/kept/all", "/cluster/kept", `{"clusterId":"factory-floor","from":"broker-b"}`},
	} {
		_, header := q.SignRequest(http.MethodPost, tc.path, "broker-a", []byte(tc.body))
		if status, body := post(tc.path, header, []byte(tc.body)); status != http.StatusOK {
			t.Fatalf("%s: %d %q, want 200", tc.path, status, body)
		}
		if status, body := post(tc.path, header, []byte(tc.body)); status != http.StatusForbidden || !strings.Contains(body, "replayed") {
			t.Fatalf("%s again: %d %q, want 403 replayed", tc.path, status, body)
		}
		if status, body := post(tc.other, header, []byte(tc.body)); status != http.StatusForbidden || !strings.Contains(body, "wrong_path") {
			t.Fatalf("%s signed for %s: %d %q, want 403 wrong_path", tc.other, tc.path, status, body)
		}
		want := map[string]int{"replayed": i + 1, "wrong_path": i + 1}
		got := refusedMetrics(t, a.ip)
		for reason, n := range got {
			if n != want[reason] {
				t.Errorf("after %s: refused %s %d, want %d (%v)", tc.path, reason, n, want[reason], got)
			}
		}
	}
	var view struct{ Requests signing.RequestStats }
	resp, err := http.Get("http://" + a.ip + ":9100/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		t.Fatal(err)
	}
	if r := view.Requests; r.Refused["replayed"] != 2 || r.Refused["wrong_path"] != 2 || r.Accepted < 2 || r.Cached < 2 {
		t.Errorf("GET /cluster requests %+v, want 2 replayed, 2 wrong_path, at least the 2 accepted and cached", r)
	}
	if t.Failed() {
		t.Log(grepLines(a.stderr(), "refused a request"))
	}
}

// TestLoTSelfSigned: GET /cluster/lot (a node's part of lot, which its
// members ask each other for) answers only a request signed for it, with
// a reply signed for that request, while GET /cluster stays open; the
// members' own asks are taken (each sees the other's part, and nothing
// but the unsigned GET is refused).
func TestLoTSelfSigned(t *testing.T) {
	nodes := clusterOf(t, 2)
	agreeOnLeader(t, nodes, 2, 30*time.Second, "")
	a := nodes[0]
	resp, err := http.Get("http://" + a.ip + ":9100/cluster/lot")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an unsigned GET /cluster/lot: %d, want 403", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + a.ip + ":9100/cluster"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /cluster: %v %v, want 200 without a signature", resp, err)
	} else {
		resp.Body.Close()
	}
	q := signing.NewRequests(signing.New([]byte("a-long-random-secret"), nil), &signing.RequestOptions{Node: "broker-b"})
	rep, err := q.Get(context.Background(), http.DefaultClient, a.ip+":9100", "/cluster/lot", "broker-a", 64<<10)
	if err != nil || rep.Err != nil || rep.Status != http.StatusOK {
		t.Fatalf("a signed GET /cluster/lot: %+v, %v", rep, err)
	}
	var self struct{ Node string }
	if err := json.Unmarshal(rep.Body, &self); err != nil || self.Node != "broker-a" {
		t.Fatalf("answer %q (%v), want broker-a's part", rep.Body, err)
	}
	eventually(t, 10*time.Second, func() error {
		for _, nd := range nodes {
			v, err := lotOf(nd.ip)
			if err != nil {
				return err
			}
			for _, ns := range v.Nodes {
				if ns.Behind {
					return fmt.Errorf("%s says %s is behind: %s", nd.ip, ns.Node, ns.Reason)
				}
			}
		}
		return nil
	})
	for reason, n := range refusedMetrics(t, a.ip) {
		if want := map[string]int{"unsigned": 1}[reason]; n != want {
			t.Errorf("refused %s %d, want %d", reason, n, want)
		}
	}
}
