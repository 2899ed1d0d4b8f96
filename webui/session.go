package webui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"time"
)

// Cookie names. The session cookie is HttpOnly and SameSite=Strict, and
// Secure whenever the console is reached over TLS.
const (
	sessionCookie = "gantry_session"
	preCookie     = "gantry_pre" // before login: the nonce the login and setup forms' CSRF token is bound to
	themeCookie   = "gantry_theme"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
)

// Session lifetimes: idle and absolute.
const (
	sessionIdle     = 30 * time.Minute
	sessionLifetime = 12 * time.Hour
	maxSessions     = 1000
)

// session is one logged-in browser.
type session struct {
	id      string
	user    string
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions is the set of logged-in browsers, in memory: a restart of the
// node logs everyone out.
type sessions struct {
	mu  sync.Mutex // guards m
	m   map[string]*session
	key [32]byte // binds pre-login CSRF tokens to their cookie
	now func() time.Time
}

func newSessions() *sessions {
	s := &sessions{m: map[string]*session{}, now: time.Now}
	rand.Read(s.key[:])
	return s
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// create starts a session for user, evicting the oldest one beyond
// maxSessions.
func (s *sessions) create(user string) *session {
	now := s.now()
	ss := &session{id: randomToken(), user: user, csrf: randomToken(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		var oldest *session
		for _, o := range s.m {
			if oldest == nil || o.seen.Before(oldest.seen) {
				oldest = o
			}
		}
		delete(s.m, oldest.id)
	}
	s.m[ss.id] = ss
	return ss
}

// get returns the live session of a cookie value and marks it seen.
func (s *sessions) get(id string) *session {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil {
		return nil
	}
	if now.Sub(ss.seen) > sessionIdle || now.Sub(ss.created) > sessionLifetime {
		delete(s.m, id)
		return nil
	}
	ss.seen = now
	return ss
}

// alive reports whether a session still lives, without counting as use:
// a page left open on live data still expires when nobody touches it.
func (s *sessions) alive(id string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	return ss != nil && now.Sub(ss.seen) <= sessionIdle && now.Sub(ss.created) <= sessionLifetime
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// removeUser ends every session of user (removed, or password changed by
// someone else).
func (s *sessions) removeUser(user, except string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ss := range s.m {
		if ss.user == user && id != except {
			delete(s.m, id)
		}
	}
}

// preToken is the CSRF token of a pre-login nonce.
func (s *sessions) preToken(nonce string) string {
	h := hmac.New(sha256.New, s.key[:])
	h.Write([]byte("pre:" + nonce))
	return hex.EncodeToString(h.Sum(nil))
}

func secureRequest(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteStrictMode})
}

// preNonce returns the request's pre-login nonce, setting a new cookie when
// there is none.
func preNonce(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(preCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	n := randomToken()
	setCookie(w, r, preCookie, n, 0)
	return n
}

// tokenOK compares the CSRF token of a request (form field or header)
// with want in constant time.
func tokenOK(r *http.Request, want string) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	return want != "" && len(got) == len(want) && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// clientIP is the source address of a request, for the login throttle.
// X-Forwarded-For is ignored: it is whatever the client says.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
