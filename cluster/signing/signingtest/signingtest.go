// Package signingtest records the signed requests a node sends between
// nodes and sends them again byte for byte, for the tests that prove a
// replayed request, or one sent to another path than it was signed for,
// is refused (the peer protocol, the session exchange).
//
// A Recorder is safe for concurrent use: it is an http.RoundTripper that
// the client of the node under test carries.
package signingtest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"gantry/cluster/signing"
)

// Recorded is a request as it left its node: its signature header and
// its body.
type Recorded struct {
	Header string
	Body   []byte
}

// Recorder is a client transport that keeps the last request sent to
// each path, byte for byte, as a host on the path between nodes would,
// and passes it on with http.DefaultTransport.
type Recorder struct {
	mu   sync.Mutex
	last map[string]Recorded // by URL path; guarded by mu
}

// NewRecorder returns a Recorder that has recorded nothing yet.
func NewRecorder() *Recorder { return &Recorder{last: map[string]Recorded{}} }

// RoundTrip records r and sends it.
func (rec *Recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	rec.last[r.URL.Path] = Recorded{Header: r.Header.Get(signing.RequestHeader), Body: body}
	rec.mu.Unlock()
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(out)
}

// Last returns the last request sent to path (zero if none).
func (rec *Recorder) Last(path string) Recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last[path]
}

// Replay POSTs a recorded request's exact bytes to path of base (an
// http:// URL) and returns the answer's status and body.
func Replay(t testing.TB, base, path string, r Recorded) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(signing.RequestHeader, r.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
