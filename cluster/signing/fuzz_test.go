package signing

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzVerify checks that Verify never panics, and that whatever it accepts
// is exactly an envelope the same secret could have produced: a payload
// between the header and the MAC, the MAC of everything before it.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_740_830_400, 0)
	opts := &Options{Now: func() time.Time { return now }}
	signed, unsigned := New([]byte("fuzz-secret"), opts), New(nil, opts)
	f.Add(signed.Sign([]byte("hello")))
	f.Add(signed.Sign(nil))
	f.Add(unsigned.Sign([]byte("hello")))
	f.Add([]byte("GS\x01\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, s := range []*Signer{signed, unsigned} {
			orig := bytes.Clone(in)
			m, err := s.Verify(in)
			if !bytes.Equal(in, orig) {
				t.Fatal("Verify modified its input")
			}
			if err != nil {
				continue
			}
			want := len(in) - HeaderSize
			if m.Signed {
				want -= MACSize
			}
			if len(m.Payload) != want || !bytes.Equal(m.Payload, in[HeaderSize:HeaderSize+want]) {
				t.Fatalf("payload %q, want the %d bytes after the header", m.Payload, want)
			}
			if m.Signed != s.Enabled() {
				t.Fatalf("accepted signed=%v with a signer enabled=%v", m.Signed, s.Enabled())
			}
		}
	})
}

// FuzzVerifyRequest checks that VerifyRequest never panics on any header
// and body, and that what it accepts is a request signed with the secret
// for exactly that method, path, node and body, accepted once.
func FuzzVerifyRequest(f *testing.F) {
	now := time.Unix(1_740_830_400, 0)
	s := New([]byte("fuzz-secret"), &Options{Now: func() time.Time { return now }})
	sender := NewRequests(s, nil)
	_, h := sender.SignRequest(http.MethodPost, "/cluster/a", "node-b", []byte(`{"x":1}`))
	f.Add(h, []byte(`{"x":1}`))
	f.Add(h, []byte(`{"x":2}`))
	f.Add(sender.SignReply("0123", []byte("{}")), []byte("{}"))
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		q := NewRequests(s, &RequestOptions{Node: "node-b"})
		verify := func() (*Request, error) {
			r := httptest.NewRequest(http.MethodPost, "http://node-b/cluster/a", bytes.NewReader(body))
			r.Header.Set(RequestHeader, header)
			return q.VerifyRequest(httptest.NewRecorder(), r, "/cluster/a", 1<<10)
		}
		req, err := verify()
		if err != nil {
			return
		}
		req.Done()
		if !bytes.Equal(req.Body, body) || req.ID == "" {
			t.Fatalf("accepted body %q id %q, sent %q", req.Body, req.ID, body)
		}
		if _, err := verify(); !errors.Is(err, ErrReplayed) {
			t.Fatalf("accepted twice: %v", err)
		}
	})
}
