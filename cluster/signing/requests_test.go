package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const (
	pathA = "/cluster/a"
	pathB = "/cluster/b"
)

// reqRig is a sender and a receiver (node "node-b") sharing a secret and a
// clock.
type reqRig struct {
	now      time.Time
	from, to *Requests
}

func newReqRig(opts *RequestOptions) *reqRig {
	g := &reqRig{now: t0}
	clock := &Options{Now: fixedClock(&g.now)}
	o := RequestOptions{}
	if opts != nil {
		o = *opts
	}
	o.Node = "node-b"
	g.from = NewRequests(New([]byte("secret"), clock), &RequestOptions{Node: "node-a"})
	g.to = NewRequests(New([]byte("secret"), clock), &o)
	return g
}

// signed returns a request as the sender signs it: its exact bytes can be
// sent again with send.
type signed struct {
	method, path, header string
	body                 []byte
}

func (g *reqRig) sign(method, path, to, body string) signed {
	_, h := g.from.SignRequest(method, path, to, []byte(body))
	return signed{method: method, path: path, header: h, body: []byte(body)}
}

// send delivers s to the receiver, which serves path with limit max.
func (g *reqRig) send(s signed, path string, max int64) (*Request, error) {
	r := httptest.NewRequest(s.method, "http://node-b"+s.path, bytes.NewReader(s.body))
	r.Header.Set(RequestHeader, s.header)
	return g.to.VerifyRequest(httptest.NewRecorder(), r, path, max)
}

func (g *reqRig) refused(reason Reason) uint64 { return g.to.Stats().Refused[reason.String()] }

func TestRequestAcceptedOnce(t *testing.T) {
	g := newReqRig(nil)
	s := g.sign(http.MethodPost, pathA, "node-b", `{"x":1}`)
	req, err := g.send(s, pathA, 1024)
	if err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	req.Done()
	if string(req.Body) != `{"x":1}` || req.ID == "" || !req.SentAt.Equal(t0) {
		t.Fatalf("request %+v", req)
	}
	g.now = g.now.Add(30 * time.Second) // within the window
	if _, err := g.send(s, pathA, 1024); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the same bytes again: %v, want %v", err, ErrReplayed)
	}
	if n := g.refused(ReasonReplayed); n != 1 {
		t.Fatalf("replayed counted %d, want 1", n)
	}
	if st := g.to.Stats(); st.Accepted != 1 || st.Cached != 1 {
		t.Fatalf("stats %+v, want 1 accepted, 1 cached", st)
	}
}

func TestRequestRefusals(t *testing.T) {
	other := NewRequests(New([]byte("another secret"), nil), nil)
	unsigned := NewRequests(New(nil, nil), nil)
	for _, tc := range []struct {
		name   string
		make   func(g *reqRig) signed
		path   string
		want   error
		reason Reason
	}{
		{"another path", func(g *reqRig) signed {
			s := g.sign(http.MethodPost, pathA, "node-b", "{}")
			s.path = pathB
			return s
		}, pathB, ErrWrongPath, ReasonWrongPath},
		{"another method", func(g *reqRig) signed {
			s := g.sign(http.MethodPut, pathA, "node-b", "{}")
			s.method = http.MethodPost
			return s
		}, pathA, ErrWrongPath, ReasonWrongPath},
		{"another node", func(g *reqRig) signed { return g.sign(http.MethodPost, pathA, "node-c", "{}") }, pathA, ErrWrongNode, ReasonWrongNode},
		{"body changed", func(g *reqRig) signed {
			s := g.sign(http.MethodPost, pathA, "node-b", `{"admin":false}`)
			s.body = []byte(`{"admin":true!}`)
			return s
		}, pathA, ErrBadSignature, ReasonForged},
		{"another secret", func(g *reqRig) signed {
			_, h := other.SignRequest(http.MethodPost, pathA, "node-b", []byte("{}"))
			return signed{http.MethodPost, pathA, h, []byte("{}")}
		}, pathA, ErrBadSignature, ReasonForged},
		{"no secret", func(g *reqRig) signed {
			_, h := unsigned.SignRequest(http.MethodPost, pathA, "node-b", []byte("{}"))
			return signed{http.MethodPost, pathA, h, []byte("{}")}
		}, pathA, ErrUnsigned, ReasonUnsigned},
		{"no header", func(g *reqRig) signed { return signed{http.MethodPost, pathA, "", []byte("{}")} }, pathA, ErrUnsigned, ReasonUnsigned},
		{"garbage header", func(g *reqRig) signed { return signed{http.MethodPost, pathA, "!!", []byte("{}")} }, pathA, ErrMalformed, ReasonMalformed},
		{"a reply as a request", func(g *reqRig) signed {
			return signed{http.MethodPost, pathA, g.from.SignReply("abc", []byte("{}")), []byte("{}")}
		}, pathA, ErrMalformed, ReasonMalformed},
		{"a plain envelope", func(g *reqRig) signed {
			h := g.from.Signer().Sign([]byte(`{"m":"POST","p":"/cluster/a","t":"node-b","i":"1"}`))
			return signed{http.MethodPost, pathA, base64.RawURLEncoding.EncodeToString(h), []byte("{}")}
		}, pathA, ErrMalformed, ReasonMalformed},
		{"stale", func(g *reqRig) signed {
			s := g.sign(http.MethodPost, pathA, "node-b", "{}")
			g.now = g.now.Add(61 * time.Second)
			return s
		}, pathA, ErrStale, ReasonStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newReqRig(nil)
			s := tc.make(g)
			if _, err := g.send(s, tc.path, 1024); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := g.refused(tc.reason); n != 1 {
				t.Fatalf("%s counted %d, want 1 (%v)", tc.reason, n, g.to.Stats().Refused)
			}
			// No refused request spends its id (a forged body included:
			// TestForgedBodyDoesNotBurnTheID).
			if c := g.to.Stats().Cached; c != 0 {
				t.Fatalf("%d ids remembered, want 0", c)
			}
		})
	}
}

// TestForgedBodyDoesNotBurnTheID: a header read off the wire, sent first
// with another body, is refused as forged and leaves the id to the
// legitimate request, which is then taken, once; a replay of it is
// refused before any of its body is read.
func TestForgedBodyDoesNotBurnTheID(t *testing.T) {
	g := newReqRig(nil)
	s := g.sign(http.MethodPost, pathA, "node-b", `{"admin":false}`)
	forged := s
	forged.body = []byte(`{"admin":true}`)
	if _, err := g.send(forged, pathA, 1024); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("the forged body: %v, want %v", err, ErrBadSignature)
	}
	req, err := g.send(s, pathA, 1024)
	if err != nil {
		t.Fatalf("the legitimate request after a forged body with its header: %v", err)
	}
	req.Done()
	body := &countingReader{r: bytes.NewReader(s.body)}
	r := httptest.NewRequest(s.method, "http://node-b"+s.path, body)
	r.Header.Set(RequestHeader, s.header)
	if _, err := g.to.VerifyRequest(httptest.NewRecorder(), r, pathA, 1024); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the replay: %v, want %v", err, ErrReplayed)
	}
	if body.n != 0 {
		t.Fatalf("read %d bytes of a replay's body, want 0", body.n)
	}
	if st := g.to.Stats(); st.Accepted != 1 || st.Refused[ReasonForged.String()] != 1 || st.Refused[ReasonReplayed.String()] != 1 {
		t.Fatalf("stats %+v, want 1 accepted, 1 forged, 1 replayed", st)
	}
}

// TestRequestSignedBeforeStartRefused: the replay cache is in memory, so
// a restarted node refuses a request signed before it started (within the
// window, and never seen by this process), and takes the sender's next.
func TestRequestSignedBeforeStartRefused(t *testing.T) {
	g := newReqRig(nil)
	old := g.sign(http.MethodPost, pathA, "node-b", "{}")
	if req, err := g.send(old, pathA, 1024); err != nil {
		t.Fatal(err)
	} else {
		req.Done()
	}
	g.now = g.now.Add(time.Second)
	g.to = NewRequests(New([]byte("secret"), &Options{Now: fixedClock(&g.now)}), &RequestOptions{Node: "node-b"}) // restarted
	if _, err := g.send(old, pathA, 1024); !errors.Is(err, ErrBeforeStart) {
		t.Fatalf("a request signed before the restart: %v, want %v", err, ErrBeforeStart)
	}
	if n := g.refused(ReasonBeforeStart); n != 1 {
		t.Fatalf("before_start counted %d, want 1", n)
	}
	if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "{}"), pathA, 1024); err != nil {
		t.Fatalf("a request signed after the restart: %v", err)
	}
}

// countingReader counts what the receiver read of a body.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestRequestTooLargeReadsAtMostTheCap: a body beyond the path's limit is
// refused having read no more than the limit (plus the byte that shows
// it is beyond), whether its length is declared or not; the signature is
// checked before anything is read.
func TestRequestTooLargeReadsAtMostTheCap(t *testing.T) {
	g := newReqRig(nil)
	const max = 4096
	for _, tc := range []struct {
		name     string
		length   int64 // declared; -1 unknown (chunked)
		header   func() string
		want     error
		readUpTo int64
	}{
		{"declared beyond", 1 << 30, func() string { return g.sign(http.MethodPost, pathA, "node-b", "x").header }, ErrTooLarge, 0},
		{"undeclared, endless", -1, func() string { return g.sign(http.MethodPost, pathA, "node-b", "x").header }, ErrTooLarge, max + 1},
		{"forged, endless", -1, func() string { return "" }, ErrUnsigned, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingReader{r: zeros{}}
			r := httptest.NewRequest(http.MethodPost, "http://node-b"+pathA, body)
			r.ContentLength = tc.length
			r.Header.Set(RequestHeader, tc.header())
			if _, err := g.to.VerifyRequest(httptest.NewRecorder(), r, pathA, max); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if body.n > tc.readUpTo {
				t.Fatalf("read %d bytes of the body, want at most %d", body.n, tc.readUpTo)
			}
		})
	}
	if n := g.refused(ReasonTooLarge); n != 2 {
		t.Fatalf("too_large counted %d, want 2", n)
	}
}

// TestReplyBoundToItsRequest runs a real exchange, then feeds a recorded
// reply to another request: refused, as are a changed reply and an
// unsigned one.
func TestReplyBoundToItsRequest(t *testing.T) {
	g := newReqRig(nil)
	var last struct {
		header string
		body   []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == pathB { // a refusal: plain text
			http.Error(w, "no", http.StatusConflict)
			return
		}
		req, err := g.to.VerifyRequest(w, r, pathA, 1024)
		if err != nil {
			WriteRefusal(w, err)
			return
		}
		defer req.Done()
		payload := append([]byte("reply to "), req.Body...)
		g.to.WriteReply(w, http.StatusOK, req, payload)
		last.header, last.body = w.Header().Get(ReplyHeader), payload
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	rep, err := g.from.Post(ctx, srv.Client(), addr, pathA, "node-b", []byte("one"), 1024)
	if err != nil || rep.Err != nil || rep.Status != http.StatusOK || string(rep.Body) != "reply to one" {
		t.Fatalf("exchange: %+v, %v", rep, err)
	}
	id2, _ := g.from.SignRequest(http.MethodPost, pathA, "node-b", []byte("two"))
	if err := g.from.VerifyReply(id2, last.header, last.body); !errors.Is(err, ErrNotReply) {
		t.Fatalf("a recorded reply for another request: %v, want %v", err, ErrNotReply)
	}
	if err := g.from.VerifyReply(id2, g.to.SignReply(id2, []byte("yes")), []byte("no")); !errors.Is(err, ErrNotReply) {
		t.Fatalf("a changed reply: %v, want %v", err, ErrNotReply)
	}
	// A request header is not a reply, even with the same id.
	id3, h3 := g.from.SignRequest(http.MethodPost, pathA, "node-b", []byte("x"))
	if err := g.from.VerifyReply(id3, h3, []byte("x")); !errors.Is(err, ErrNotReply) {
		t.Fatalf("a request header as a reply: %v, want %v", err, ErrNotReply)
	}
	rep, err = g.from.Post(ctx, srv.Client(), addr, pathB, "node-b", []byte("x"), 1024)
	if err != nil || rep.Status != http.StatusConflict || !errors.Is(rep.Err, ErrUnsigned) || !strings.Contains(string(rep.Body), "no") {
		t.Fatalf("an unsigned refusal: %+v, %v; want its status and text, and ErrUnsigned", rep, err)
	}
	if _, err := g.from.Post(ctx, srv.Client(), addr, pathA, "node-b", bytes.Repeat([]byte("z"), 100), 50); err == nil {
		t.Fatal("a reply beyond maxReply was taken")
	}
}

// TestReplayCacheBoundedAndExpires: a full cache refuses (counted) rather
// than grow; its ids are forgotten twice the window after they arrived,
// and make room again.
func TestReplayCacheBoundedAndExpires(t *testing.T) {
	g := newReqRig(&RequestOptions{ReplayEntries: 3})
	first := g.sign(http.MethodPost, pathA, "node-b", "0")
	if _, err := g.send(first, pathA, 64); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		g.now = g.now.Add(10 * time.Second)
		if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "x"), pathA, 64); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "y"), pathA, 64); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("a fourth id in a cache of 3: %v, want %v", err, ErrCacheFull)
	}
	if n := g.refused(ReasonCacheFull); n != 1 {
		t.Fatalf("cache_full counted %d, want 1", n)
	}
	// 2 minutes after the first: it is forgotten, the others are not.
	g.now = t0.Add(2 * time.Minute)
	if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "z"), pathA, 64); err != nil {
		t.Fatalf("after the first id expired: %v", err)
	}
	if c := g.to.Stats().Cached; c != 3 {
		t.Fatalf("cached %d, want 3", c)
	}
	// The forgotten request itself is beyond the window by now.
	if _, err := g.send(first, pathA, 64); !errors.Is(err, ErrStale) {
		t.Fatalf("the first request after its id expired: %v, want %v", err, ErrStale)
	}
	g.now = t0.Add(10 * time.Minute)
	if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "w"), pathA, 64); err != nil {
		t.Fatal(err)
	}
	if c := g.to.Stats().Cached; c != 1 {
		t.Fatalf("cached %d after every id expired, want 1", c)
	}
}

// TestLargeRequestsLimited: with one slot, a second large request waits,
// then is refused (busy); small ones pass meanwhile; once the first is
// done, a large one is taken again.
func TestLargeRequestsLimited(t *testing.T) {
	g := newReqRig(&RequestOptions{LargeBody: 8, LargeRequests: 1, LargeWait: 50 * time.Millisecond})
	big := strings.Repeat("b", 100)
	held, err := g.send(g.sign(http.MethodPost, pathA, "node-b", big), pathA, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.send(g.sign(http.MethodPost, pathA, "node-b", big), pathA, 1024); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second large request: %v, want %v", err, ErrBusy)
	}
	small, err := g.send(g.sign(http.MethodPost, pathA, "node-b", "s"), pathA, 1024)
	if err != nil {
		t.Fatalf("a small request while a large one is served: %v", err)
	}
	small.Done()
	done := make(chan error)
	go func() {
		r, err := g.send(g.sign(http.MethodPost, pathA, "node-b", big), pathA, 1024)
		r.Done()
		done <- err
	}()
	held.Done()
	if err := <-done; err != nil {
		t.Fatalf("a large request after the first was done: %v", err)
	}
	if n := g.refused(ReasonBusy); n != 1 {
		t.Fatalf("busy counted %d, want 1", n)
	}
}

func TestWriteRefusalStatus(t *testing.T) {
	for err, want := range map[error]int{ErrReplayed: 403, ErrTooLarge: 413, ErrBusy: 503, ErrBadSignature: 403} {
		w := httptest.NewRecorder()
		WriteRefusal(w, err)
		if w.Code != want || w.Header().Get(ReplyHeader) != "" {
			t.Errorf("%v: %d, want %d unsigned", err, w.Code, want)
		}
	}
}

// slowBody is a body that arrives in chunks, gap apart: a slow link.
type slowBody struct {
	left, chunk int
	gap         time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap)
	n := min(len(p), b.chunk, b.left)
	for i := range n {
		p[i] = 'x'
	}
	b.left -= n
	return n, nil
}

// TestLargeBodyGivenTimeToArrive: behind a server whose ReadTimeout and
// WriteTimeout are shorter than a slow body takes, a signed request on a
// large path is read whole and answered (its deadlines moved for its
// length), while a body as slow on a small path is still cut off.
func TestLargeBodyGivenTimeToArrive(t *testing.T) {
	g := newReqRig(nil)
	g.now = time.Now() // real time: the server's timeouts are real
	g.to = NewRequests(New([]byte("secret"), &Options{Now: fixedClock(&g.now)}),
		&RequestOptions{Node: "node-b", LargeBody: 1 << 10, BodyRate: 8 << 10, BodyWait: 200 * time.Millisecond})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		max := int64(1 << 20)
		if r.URL.Path == pathB {
			max = 1 << 10 // a small path: not above LargeBody
		}
		req, err := g.to.VerifyRequest(w, r, r.URL.Path, max)
		if err != nil {
			WriteRefusal(w, err)
			return
		}
		defer req.Done()
		g.to.WriteReply(w, http.StatusOK, req, []byte(fmt.Sprintf("read %d", len(req.Body))))
	}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	srv.Start()
	defer srv.Close()
	send := func(path string, size, chunk int) (string, error) {
		id, header := g.from.SignRequest(http.MethodPost, path, "node-b", bytes.Repeat([]byte("x"), size))
		hr, _ := http.NewRequest(http.MethodPost, srv.URL+path, &slowBody{left: size, chunk: chunk, gap: 60 * time.Millisecond})
		hr.ContentLength = int64(size)
		hr.Header.Set(RequestHeader, header)
		resp, err := srv.Client().Do(hr)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if err := g.from.VerifyReply(id, resp.Header.Get(ReplyHeader), body); err != nil {
			return "", fmt.Errorf("%d %q: %w", resp.StatusCode, body, err)
		}
		return string(body), nil
	}
	// 8 KiB in 8 chunks, about 480 ms: given 200 ms + 1 s.
	if got, err := send(pathA, 8<<10, 1<<10); err != nil || got != "read 8192" {
		t.Fatalf("a slow large body: %q, %v; want it read whole and answered", got, err)
	}
	// 1 KiB in 4 chunks, about 240 ms: past the 200 ms of a small path.
	if got, err := send(pathB, 1<<10, 256); err == nil {
		t.Fatalf("a slow body on a small path was taken (%q): the server's ReadTimeout no longer holds it", got)
	}
	if n := g.refused(ReasonIncomplete); n != 1 {
		t.Fatalf("incomplete counted %d, want 1 (%v)", n, g.to.Stats().Refused)
	}
	// The same in one chunk is taken: only its pace cut it off.
	if got, err := send(pathB, 1<<10, 1<<10); err != nil || got != "read 1024" {
		t.Fatalf("a quick body on the small path: %q, %v", got, err)
	}
}
