package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// InitialRootFile is written in the data directory when the root user is
// created with a random password.
const InitialRootFile = "initial-root-password"

// RootName is the administrator a node creates when it has none.
const RootName = "root"

// EnsureRoot makes sure the store holds an administrator. When none of its
// users is one (an empty store, or one where only ordinary users were
// added before the first start, as the seed's quick start does with its
// cluster user), it creates the administrator root with a random password
// and writes the password once to dir/initial-root-password (mode 0600),
// returning the file's path. A user already called root, not an
// administrator, is made one and keeps the password it was given (no file
// is written). With an administrator present it does nothing. The check
// and the change happen under the store's file lock, so a concurrent
// -addUser -admin is either seen or sees root.
func EnsureRoot(s *Store, dir string) (string, error) {
	if s.Admins() > 0 {
		return "", nil
	}
	var b [18]byte
	rand.Read(b[:])
	password := encodePassword(b[:])
	created, err := s.addFirstAdmin(RootName, password)
	if err != nil || !created {
		return "", err
	}
	path := filepath.Join(dir, InitialRootFile)
	if err := writeFileAtomic(path, []byte(password+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// InitialRootPending returns the path of dir's initial-root-password file
// when it still exists (nobody has read and deleted it yet), else "".
func InitialRootPending(dir string) string {
	path := filepath.Join(dir, InitialRootFile)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func encodePassword(b []byte) string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = alphabet[int(c)%len(alphabet)]
	}
	return string(out)
}

// Authenticator checks MQTT credentials against a Store.
type Authenticator struct {
	store    *Store
	throttle *Throttle
	log      *slog.Logger

	// FailureDelay is how long a failed login waits before it is
	// answered (1 s by default).
	FailureDelay time.Duration

	key   [32]byte
	mu    sync.Mutex // guards cache
	cache map[string]cached

	Failures atomic.Uint64 // failed logins
}

type cached struct {
	mac     [32]byte
	expires time.Time
	gen     uint64 // the users store's contents it was checked against
}

const cacheTTL = 5 * time.Minute

// NewAuthenticator returns an Authenticator over store; throttle may be
// nil for none.
func NewAuthenticator(store *Store, throttle *Throttle, log *slog.Logger) *Authenticator {
	a := &Authenticator{store: store, throttle: throttle, log: log, FailureDelay: time.Second, cache: map[string]cached{}}
	rand.Read(a.key[:])
	return a
}

// Authenticate implements broker.Authenticator.
func (a *Authenticator) Authenticate(info *broker.ConnInfo) error {
	ip := sourceIP(info.RemoteAddr)
	if a.throttle != nil && a.throttle.Blocked(ip) {
		a.Failures.Add(1)
		return packet.ConnectionRateExceeded
	}
	gen := a.currentGen() // before the check: a change meanwhile makes the entry stale at once
	if a.cachedOK(info.Username, info.Password, gen) {
		return nil
	}
	if _, err := a.store.Verify(info.Username, info.Password); err != nil {
		a.Failures.Add(1)
		if a.throttle != nil && a.throttle.Fail(ip) {
			a.log.Warn("login failures from one address: throttled", "component", "auth", "remote", ip)
		}
		a.log.Info("login failed", "component", "auth", "user", info.Username, "remote", ip)
		time.Sleep(a.FailureDelay) // slows guessing; runs on that client's own goroutine
		return packet.BadUserNameOrPassword
	}
	a.remember(info.Username, info.Password, gen)
	return nil
}

func (a *Authenticator) mac(user string, password []byte) [32]byte {
	h := hmac.New(sha256.New, a.key[:])
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write(password)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func (a *Authenticator) currentGen() uint64 {
	a.store.reload()
	a.store.mu.RLock()
	defer a.store.mu.RUnlock()
	return a.store.gen
}

func (a *Authenticator) cachedOK(user string, password []byte, gen uint64) bool {
	a.mu.Lock()
	c, ok := a.cache[user]
	a.mu.Unlock()
	want := a.mac(user, password)
	return ok && c.gen == gen && time.Now().Before(c.expires) && hmac.Equal(c.mac[:], want[:])
}

func (a *Authenticator) remember(user string, password []byte, gen uint64) {
	c := cached{mac: a.mac(user, password), expires: time.Now().Add(cacheTTL), gen: gen}
	a.mu.Lock()
	if len(a.cache) > 10000 {
		clear(a.cache)
	}
	a.cache[user] = c
	a.mu.Unlock()
}

func sourceIP(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if t, ok := addr.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// Throttle counts login failures per source address. After Burst failures
// within Window an address is blocked for Block, doubling on each new
// block up to MaxBlock.
type Throttle struct {
	Burst    int
	Window   time.Duration
	Block    time.Duration
	MaxBlock time.Duration

	mu    sync.Mutex // guards addrs
	addrs map[string]*addrState
	now   func() time.Time

	Throttled atomic.Uint64 // blocks started
}

type addrState struct {
	failures     []time.Time
	blockedUntil time.Time
	lastBlock    time.Duration
}

// NewThrottle returns a throttle with production defaults: 5 failures in
// a minute block the address for 30 s, doubling up to 15 minutes.
func NewThrottle() *Throttle {
	return &Throttle{Burst: 5, Window: time.Minute, Block: 30 * time.Second, MaxBlock: 15 * time.Minute,
		addrs: map[string]*addrState{}, now: time.Now}
}

// Blocked reports whether ip is blocked now.
func (t *Throttle) Blocked(ip string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.addrs[ip]
	return st != nil && t.now().Before(st.blockedUntil)
}

// Fail records a failure from ip and reports whether it started a block.
func (t *Throttle) Fail(ip string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	st := t.addrs[ip]
	if st == nil {
		st = &addrState{}
		t.addrs[ip] = st
	}
	keep := st.failures[:0]
	for _, f := range st.failures {
		if now.Sub(f) < t.Window {
			keep = append(keep, f)
		}
	}
	st.failures = append(keep, now)
	if len(st.failures) < t.Burst {
		return false
	}
	st.lastBlock = min(max(st.lastBlock*2, t.Block), t.MaxBlock)
	st.blockedUntil = now.Add(st.lastBlock)
	st.failures = st.failures[:0]
	t.Throttled.Add(1)
	return true
}

// sweep forgets addresses with no recent failure and no block, bounding
// memory under a spray of source addresses.
func (t *Throttle) sweep(now time.Time) {
	if len(t.addrs) < 4096 {
		return
	}
	for ip, st := range t.addrs {
		if now.After(st.blockedUntil.Add(t.MaxBlock)) && (len(st.failures) == 0 || now.Sub(st.failures[len(st.failures)-1]) > t.Window) {
			delete(t.addrs, ip)
		}
	}
}
