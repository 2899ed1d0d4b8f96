package signing

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Headers of a signed request and of its reply (see doc.go, "Requests").
const (
	RequestHeader = "Gantry-Request"
	ReplyHeader   = "Gantry-Reply"
)

// Labels that open the signed metadata, so that a request's signature is
// never taken for a reply's, nor for any other envelope of the cluster.
const (
	requestLabel = "gantry/request/v1\n"
	replyLabel   = "gantry/reply/v1\n"
)

// Defaults of RequestOptions.
const (
	DefaultReplayEntries = 100_000
	DefaultLargeBody     = 1 << 20
	DefaultLargeRequests = 2
	DefaultLargeWait     = 5 * time.Second
	DefaultBodyRate      = 256 << 10 // bytes per second: about 2 Mbit/s
	DefaultBodyWait      = 10 * time.Second
	// serveWait is how long a large request may take to be served and
	// answered once its body is read: the operations server's own
	// WriteTimeout, which counts from the end of the request's header
	// and so is spent by a long read.
	serveWait = 30 * time.Second
)

// Errors of VerifyRequest and VerifyReply, besides Verify's own
// (ErrMalformed, ErrBadSignature, ErrUnsigned, ErrUnexpectedSignature,
// ErrStale).
var (
	ErrReplayed   = errors.New("signing: request id seen before (a replayed request)")
	ErrWrongPath  = errors.New("signing: request signed for another method or path")
	ErrWrongNode  = errors.New("signing: request addressed to another node")
	ErrTooLarge   = errors.New("signing: request body beyond the path's limit")
	ErrBusy       = errors.New("signing: too many large requests at once")
	ErrCacheFull  = errors.New("signing: replay cache full (more requests within the window than it holds)")
	ErrNotReply   = errors.New("signing: answer is not the signed reply to this request")
	ErrIncomplete = errors.New("signing: the body did not arrive whole (the connection failed, or was slower than the path allows)")
)

// Reason classifies a refused request, for the counters.
type Reason int

// Reasons of a refusal, in the order of RefusalReasons.
const (
	ReasonForged      Reason = iota // bad MAC, or a body that is not the one signed
	ReasonUnsigned                  // no signature, or one while this node has no secret (SharedSecret differs)
	ReasonStale                     // timestamp outside the window
	ReasonMalformed                 // the header does not decode
	ReasonReplayed                  // a request id already accepted
	ReasonWrongPath                 // signed for another method or path
	ReasonWrongNode                 // addressed to another node
	ReasonTooLarge                  // beyond the path's limit
	ReasonBusy                      // no slot for a large body in time
	ReasonCacheFull                 // the replay cache holds DefaultReplayEntries ids
	ReasonBeforeStart               // signed before this node started (ReplayCache)
	ReasonIncomplete                // the body did not arrive whole in time
	numReasons
)

var reasonNames = [numReasons]string{"forged", "unsigned", "stale", "malformed", "replayed", "wrong_path", "wrong_node",
	"too_large", "busy", "cache_full", "before_start", "incomplete"}

func (r Reason) String() string { return reasonNames[r] }

// RefusalReasons lists every Reason's name, as Stats reports them.
func RefusalReasons() []string { return append([]string(nil), reasonNames[:]...) }

// reasonOf classifies an error of VerifyRequest.
func reasonOf(err error) Reason {
	switch {
	case errors.Is(err, ErrBadSignature):
		return ReasonForged
	case errors.Is(err, ErrUnsigned), errors.Is(err, ErrUnexpectedSignature):
		return ReasonUnsigned
	case errors.Is(err, ErrStale):
		return ReasonStale
	case errors.Is(err, ErrReplayed):
		return ReasonReplayed
	case errors.Is(err, ErrWrongPath):
		return ReasonWrongPath
	case errors.Is(err, ErrWrongNode):
		return ReasonWrongNode
	case errors.Is(err, ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrBusy):
		return ReasonBusy
	case errors.Is(err, ErrCacheFull):
		return ReasonCacheFull
	case errors.Is(err, ErrBeforeStart):
		return ReasonBeforeStart
	case errors.Is(err, ErrIncomplete):
		return ReasonIncomplete
	}
	return ReasonMalformed
}

// RequestOptions tune Requests; nil means the defaults.
type RequestOptions struct {
	// Node is this node's name: a request addressed to another node is
	// refused. Empty: these Requests only send (the gantry command).
	Node string
	// ReplayEntries bounds the replay cache: beyond it a request is
	// refused (ErrCacheFull). 0 means DefaultReplayEntries.
	ReplayEntries int
	// LargeBody is the size above which a request body takes one of
	// LargeRequests slots while it is read and served (a body of unknown
	// length counts as large where the path allows more). 0 means
	// DefaultLargeBody, DefaultLargeRequests.
	LargeBody     int64
	LargeRequests int
	// LargeWait is how long a large request waits for a slot before it
	// is refused (ErrBusy). 0 means DefaultLargeWait.
	LargeWait time.Duration
	// A large body (one that takes a slot), and a reply above LargeBody,
	// may take BodyWait plus its length at BodyRate to arrive or leave:
	// the server's read and write deadlines are moved for it (the
	// operations server's ReadTimeout is meant for small requests). 0
	// means DefaultBodyRate, DefaultBodyWait.
	BodyRate int64
	BodyWait time.Duration
	// Logger takes the refusals, at most one line a minute per reason.
	Logger *slog.Logger
}

// Requests signs this node's requests to the other nodes and checks
// theirs: see doc.go, "Requests". Safe for concurrent use.
type Requests struct {
	s         *Signer
	node      string
	log       *slog.Logger
	large     chan struct{} // a slot per large body being read or served
	largeBody int64
	largeWait time.Duration
	bodyRate  int64
	bodyWait  time.Duration

	ids *ReplayCache

	mu      sync.Mutex // guards warned
	warned  [numReasons]time.Time
	refused [numReasons]atomic.Uint64
	taken   atomic.Uint64
}

// NewRequests returns the request signer and checker of s.
func NewRequests(s *Signer, opts *RequestOptions) *Requests {
	var o RequestOptions
	if opts != nil {
		o = *opts
	}
	if o.ReplayEntries <= 0 {
		o.ReplayEntries = DefaultReplayEntries
	}
	if o.LargeBody <= 0 {
		o.LargeBody = DefaultLargeBody
	}
	if o.LargeRequests <= 0 {
		o.LargeRequests = DefaultLargeRequests
	}
	if o.LargeWait <= 0 {
		o.LargeWait = DefaultLargeWait
	}
	if o.BodyRate <= 0 {
		o.BodyRate = DefaultBodyRate
	}
	if o.BodyWait <= 0 {
		o.BodyWait = DefaultBodyWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Requests{s: s, node: o.Node, log: o.Logger, large: make(chan struct{}, o.LargeRequests),
		largeBody: o.LargeBody, largeWait: o.LargeWait, bodyRate: o.BodyRate, bodyWait: o.BodyWait,
		ids: NewReplayCache(s, o.ReplayEntries)}
}

// Signer returns the Signer the requests are signed with.
func (q *Requests) Signer() *Signer { return q.s }

// requestMeta is what a request's signature covers: the body by its hash.
type requestMeta struct {
	Method string `json:"m"`
	Path   string `json:"p"`
	To     string `json:"t"`
	ID     string `json:"i"`
	Body   string `json:"h"` // SHA-256 of the body, hex
}

// replyMeta is what a reply's signature covers.
type replyMeta struct {
	ID   string `json:"i"` // the request's
	Body string `json:"h"`
}

func bodyHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SignRequest signs a request of method to path on node to, carrying
// body: it returns the request's fresh id and the value of its
// RequestHeader. The body travels as it is.
func (q *Requests) SignRequest(method, path, to string, body []byte) (id, header string) {
	id = newRequestID()
	meta, _ := json.Marshal(requestMeta{Method: method, Path: path, To: to, ID: id, Body: bodyHash(body)})
	return id, base64.RawURLEncoding.EncodeToString(q.s.Sign(append([]byte(requestLabel), meta...)))
}

// openHeader verifies a header's envelope and decodes what follows label.
func (q *Requests) openHeader(header, label string, v any) (time.Time, error) {
	if header == "" {
		if q.s.Enabled() {
			return time.Time{}, ErrUnsigned
		}
		return time.Time{}, fmt.Errorf("%w: no %s header", ErrMalformed, strings.TrimSuffix(label, "\n"))
	}
	env, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	m, err := q.s.Verify(env)
	if err != nil {
		return time.Time{}, err
	}
	rest, ok := bytes.CutPrefix(m.Payload, []byte(label))
	if !ok || json.Unmarshal(rest, v) != nil {
		return time.Time{}, fmt.Errorf("%w: not a %s", ErrMalformed, strings.TrimSuffix(label, "\n"))
	}
	return m.SentAt, nil
}

// Request is a verified request: hold it until it is answered, then
// call Done.
type Request struct {
	ID     string
	Body   []byte
	SentAt time.Time
	done   func()
}

// Done gives back the large-body slot the request holds, if any.
func (r *Request) Done() {
	if r != nil && r.done != nil {
		r.done()
		r.done = nil
	}
}

// VerifyRequest checks r as a request signed for path on this node, and
// reads its body, at most max bytes: the signature (before any of the
// body is read), the method and path, the node it is for, that its id
// was not accepted before and that it was signed after this node started
// (ReplayCache), then the body's size and hash; only then is the id
// spent. A body above
// LargeBody waits for a slot first. Every refusal is counted and logged
// (rate-limited); answer it with WriteRefusal. The caller calls Done on
// the request once it answered.
func (q *Requests) VerifyRequest(w http.ResponseWriter, r *http.Request, path string, max int64) (*Request, error) {
	req, err := q.verifyRequest(w, r, path, max)
	if err != nil {
		q.refuse(r, path, err)
		return nil, err
	}
	q.taken.Add(1)
	return req, nil
}

func (q *Requests) verifyRequest(w http.ResponseWriter, r *http.Request, path string, max int64) (*Request, error) {
	var meta requestMeta
	sentAt, err := q.openHeader(r.Header.Get(RequestHeader), requestLabel, &meta)
	if err != nil {
		return nil, err
	}
	switch {
	case meta.Method != r.Method || meta.Path != path:
		return nil, fmt.Errorf("%w: signed for %s %s, received as %s %s", ErrWrongPath, meta.Method, meta.Path, r.Method, path)
	case q.node != "" && meta.To != q.node:
		return nil, fmt.Errorf("%w: for %q, this is %q", ErrWrongNode, meta.To, q.node)
	case meta.ID == "":
		return nil, fmt.Errorf("%w: no request id", ErrMalformed)
	}
	// The id is checked here, so that a replay of a request served
	// already costs no read, but spent only once the body proved to be
	// the one signed (below): without TLS a header can be read off the
	// wire, and spent here it would let a forged body sent first burn
	// the legitimate request's id. A header whose id is not spent yet
	// may so get several bodies read, each sent in full by whoever
	// holds it and bounded like any other (the path's limit, the large
	// slots); only the one signed is served.
	if err := q.ids.Check(meta.ID, sentAt); err != nil {
		return nil, err
	}
	if r.ContentLength > max {
		return nil, fmt.Errorf("%w: %d bytes, %s takes at most %d", ErrTooLarge, r.ContentLength, path, max)
	}
	req := &Request{ID: meta.ID, SentAt: sentAt}
	if max > q.largeBody && (r.ContentLength < 0 || r.ContentLength > q.largeBody) {
		if req.done, err = q.acquire(r.Context()); err != nil {
			return nil, err
		}
		// Only here, for a signed request holding a slot: a slow client
		// without the secret, or on a small path, keeps the server's
		// ReadTimeout, and at most LargeRequests bodies take this long.
		size := r.ContentLength
		if size < 0 {
			size = max
		}
		q.extend(w, size, true)
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, max), r.ContentLength)
	if err == nil && bodyHash(body) != meta.Body {
		err = fmt.Errorf("%w: the body is not the one signed", ErrBadSignature)
	}
	if err != nil {
		req.Done()
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, fmt.Errorf("%w: %s takes at most %d bytes", ErrTooLarge, path, max)
		}
		if !errors.Is(err, ErrBadSignature) {
			err = fmt.Errorf("%w: %w", ErrIncomplete, err)
		}
		return nil, err
	}
	if err := q.ids.Take(meta.ID, sentAt); err != nil {
		req.Done() // taken meanwhile by the same request sent twice at once
		return nil, err
	}
	req.Body = body
	return req, nil
}

// transferTime is how long size bytes may take on the slowest link
// served: BodyWait plus size at BodyRate.
func (q *Requests) transferTime(size int64) time.Duration {
	return q.bodyWait + time.Duration(float64(size)/float64(q.bodyRate)*float64(time.Second))
}

// extend moves the connection's deadlines for size bytes to travel: the
// read deadline (when read) for the body, the write deadline for the
// body's read, the serving and a small reply, or for a reply of size.
// A ResponseWriter without deadlines (a test's recorder) keeps none.
func (q *Requests) extend(w http.ResponseWriter, size int64, read bool) {
	rc := http.NewResponseController(w)
	at := time.Now().Add(q.transferTime(size))
	if read {
		rc.SetReadDeadline(at)
		at = at.Add(serveWait)
	}
	rc.SetWriteDeadline(at)
}

// readBody reads a whole body, sized by its declared length when known.
func readBody(r io.Reader, length int64) ([]byte, error) {
	var buf bytes.Buffer
	if length > 0 {
		buf.Grow(int(length))
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// acquire waits for a large-body slot, up to LargeWait.
func (q *Requests) acquire(ctx context.Context) (func(), error) {
	t := time.NewTimer(q.largeWait)
	defer t.Stop()
	select {
	case q.large <- struct{}{}:
		return func() { <-q.large }, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: %d being read or served, waited %v", ErrBusy, cap(q.large), q.largeWait)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrBusy, ctx.Err())
	}
}

// refuse counts and logs a refusal.
func (q *Requests) refuse(r *http.Request, path string, err error) {
	reason := reasonOf(err)
	q.refused[reason].Add(1)
	now := time.Now()
	q.mu.Lock()
	quiet := now.Sub(q.warned[reason]) < time.Minute
	if !quiet {
		q.warned[reason] = now
	}
	q.mu.Unlock()
	if !quiet {
		q.log.Warn("refused a request from another node", "reason", reason.String(), "path", path, "from", r.RemoteAddr, "err", err)
	}
}

// WriteRefusal answers a request VerifyRequest refused: 413 beyond the
// limit, 503 while busy, 403 otherwise; the text names the reason only.
func WriteRefusal(w http.ResponseWriter, err error) {
	reason := reasonOf(err)
	status := http.StatusForbidden
	switch reason {
	case ReasonTooLarge:
		status = http.StatusRequestEntityTooLarge
	case ReasonBusy:
		status = http.StatusServiceUnavailable
	}
	http.Error(w, "request refused: "+reason.String(), status)
}

// SignReply returns the ReplyHeader value of payload answering request id.
func (q *Requests) SignReply(id string, payload []byte) string {
	meta, _ := json.Marshal(replyMeta{ID: id, Body: bodyHash(payload)})
	return base64.RawURLEncoding.EncodeToString(q.s.Sign(append([]byte(replyLabel), meta...)))
}

// WriteReply answers req with payload, signed for it; a payload above
// LargeBody is given the time it needs to leave (transferTime).
func (q *Requests) WriteReply(w http.ResponseWriter, status int, req *Request, payload []byte) {
	if int64(len(payload)) > q.largeBody {
		q.extend(w, int64(len(payload)), false)
	}
	w.Header().Set(ReplyHeader, q.SignReply(req.ID, payload))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(payload)
}

// VerifyReply checks that payload, with its ReplyHeader value header, is
// the reply signed for request id.
func (q *Requests) VerifyReply(id, header string, payload []byte) error {
	hash, err := q.openReply(id, header)
	if err == nil && hash != bodyHash(payload) {
		err = fmt.Errorf("%w: the body is not the one signed", ErrNotReply)
	}
	return err
}

// openReply checks a reply's header against request id and returns the
// hash of the body it signed.
func (q *Requests) openReply(id, header string) (string, error) {
	var meta replyMeta
	if _, err := q.openHeader(header, replyLabel, &meta); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotReply, err)
	}
	if meta.ID != id {
		return "", fmt.Errorf("%w: it answers request %s", ErrNotReply, meta.ID)
	}
	return meta.Body, nil
}

// Reply is an answer to Post.
type Reply struct {
	Status int
	Body   []byte // as received
	// Err is nil when Body is the reply signed for the request; otherwise
	// why not (a refusal's plain text has no signature; a forged or
	// replayed answer is refused).
	Err error
}

// maxUnsigned bounds what Post reads of an answer that is not a signed
// reply: a refusal's text.
const maxUnsigned = 64 << 10

// Post sends body, signed, as POST path to node to at addr (host:port),
// and returns the answer. The reply's header is checked before its body
// is read: a signed reply is read up to maxReply bytes, anything else up
// to 64 KiB (for its text). The error is the transport's, or a signed
// reply beyond maxReply.
func (q *Requests) Post(ctx context.Context, c *http.Client, addr, path, to string, body []byte, maxReply int64) (Reply, error) {
	return q.send(ctx, c, http.MethodPost, addr, path, to, body, maxReply)
}

// Get sends GET path, signed, to node to at addr, and returns the answer
// as Post does: for what a node tells only the other nodes.
func (q *Requests) Get(ctx context.Context, c *http.Client, addr, path, to string, maxReply int64) (Reply, error) {
	return q.send(ctx, c, http.MethodGet, addr, path, to, nil, maxReply)
}

func (q *Requests) send(ctx context.Context, c *http.Client, method, addr, path, to string, body []byte, maxReply int64) (Reply, error) {
	id, sig := q.SignRequest(method, path, to, body)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return Reply{}, err
	}
	hr.Header.Set(RequestHeader, sig)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(hr)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	hash, verr := q.openReply(id, resp.Header.Get(ReplyHeader))
	limit := maxReply
	if verr != nil {
		limit = min(maxReply, maxUnsigned)
	} else if resp.ContentLength > maxReply {
		return Reply{}, fmt.Errorf("signing: %s answered %d bytes, beyond %d", path, resp.ContentLength, maxReply)
	}
	raw, err := readBody(io.LimitReader(resp.Body, limit+1), min(resp.ContentLength, limit))
	if err != nil {
		return Reply{}, err
	}
	if int64(len(raw)) > limit {
		if verr == nil {
			return Reply{}, fmt.Errorf("signing: %s answered more than %d bytes", path, maxReply)
		}
		raw = raw[:limit]
	}
	if verr == nil && hash != bodyHash(raw) {
		verr = fmt.Errorf("%w: the body is not the one signed", ErrNotReply)
	}
	return Reply{Status: resp.StatusCode, Body: raw, Err: verr}, nil
}

// RequestStats are the counters of Requests.
type RequestStats struct {
	Accepted uint64            `json:"accepted"`
	Refused  map[string]uint64 `json:"refused"` // by reason (RefusalReasons), every reason present
	Cached   int               `json:"cached"`  // request ids remembered now
}

// Stats returns the counters.
func (q *Requests) Stats() RequestStats {
	st := RequestStats{Accepted: q.taken.Load(), Refused: make(map[string]uint64, numReasons)}
	for i := range numReasons {
		st.Refused[reasonNames[i]] = q.refused[i].Load()
	}
	st.Cached = q.ids.Len()
	return st
}
