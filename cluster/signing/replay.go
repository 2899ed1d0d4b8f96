package signing

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of ReplayCache, besides ErrReplayed and ErrCacheFull.
var ErrBeforeStart = errors.New("signing: signed before this node started (a replay across its restart, or the sender's clock is behind)")

// ReplayCache makes a signed message with an id good once on this node:
// it remembers the ids it took for twice the signing window (a message is
// good from Window before the receiver's clock to Window after it) and
// refuses a message signed before the cache was made, which it cannot
// know whether an earlier process took (the cache is in memory: without
// that rule a restart would open the window again). It is bounded: full,
// it refuses rather than grows (ErrCacheFull). Safe for concurrent use.
//
// A sender whose clock is behind this node's by d has its messages
// refused for d after this node starts (ErrBeforeStart): with the clocks
// in sync (NTP), as the window already asks, that is a few milliseconds,
// and the senders try again (a link after its backoff, a request on its
// next round).
type ReplayCache struct {
	started time.Time
	keep    time.Duration
	now     func() time.Time
	max     int

	mu    sync.Mutex           // guards seen, order, head
	seen  map[string]time.Time // id → when it may be forgotten
	order []seenID             // the ids of seen, oldest first, from head
	head  int
}

type seenID struct {
	id      string
	expires time.Time
}

// NewReplayCache returns a cache for messages verified by s, holding at
// most max ids; it refuses messages signed before now (s's clock).
func NewReplayCache(s *Signer, max int) *ReplayCache {
	keep := 2 * DefaultWindow
	if w := s.Window(); w > 0 {
		keep = 2 * w
	}
	now := time.Now
	if s != nil && s.now != nil {
		now = s.now
	}
	return &ReplayCache{started: now(), keep: keep, now: now, max: max, seen: map[string]time.Time{}}
}

// Check reports whether Take would take id, signed at sentAt, without
// taking it: a caller that must do more work before it may spend the id
// refuses what it can at once.
func (c *ReplayCache) Check(id string, sentAt time.Time) error {
	return c.take(id, sentAt, false)
}

// Take spends id, signed at sentAt: it refuses a message signed before
// the cache was made (ErrBeforeStart), an id it took before
// (ErrReplayed) and, full, any other (ErrCacheFull).
func (c *ReplayCache) Take(id string, sentAt time.Time) error {
	return c.take(id, sentAt, true)
}

func (c *ReplayCache) take(id string, sentAt time.Time, spend bool) error {
	if sentAt.Before(c.started) {
		return fmt.Errorf("%w: signed %v before", ErrBeforeStart, c.started.Sub(sentAt).Round(time.Millisecond))
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	if _, ok := c.seen[id]; ok {
		return ErrReplayed
	}
	if len(c.seen) >= c.max {
		return fmt.Errorf("%w: %d ids", ErrCacheFull, c.max)
	}
	if spend {
		exp := now.Add(c.keep)
		c.seen[id] = exp
		c.order = append(c.order, seenID{id: id, expires: exp})
	}
	return nil
}

// expireLocked forgets the ids past their time. The caller holds mu.
func (c *ReplayCache) expireLocked(now time.Time) {
	for c.head < len(c.order) && !c.order[c.head].expires.After(now) {
		delete(c.seen, c.order[c.head].id)
		c.order[c.head] = seenID{}
		c.head++
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// Len returns the number of ids remembered now.
func (c *ReplayCache) Len() int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	return len(c.seen)
}
