package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// warnEvery is how often one repeated problem (a forged announcement every
// second, a DNS name that does not resolve) is logged.
const warnEvery = time.Minute

// maxWarnKeys bounds the limiter's memory when the keys come from the
// network (one per source address): beyond it, old keys are dropped and
// new ones share one overflow key.
const maxWarnKeys = 1024

// limitedLog logs a message at most once per warnEvery per key, adding the
// number of occurrences it held back since the previous line.
type limitedLog struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex           // guards seen
	seen map[string]*repeated // by key
}

type repeated struct {
	logged time.Time
	held   int
}

func newLimitedLog(log *slog.Logger) *limitedLog {
	return &limitedLog{log: log, now: time.Now, seen: map[string]*repeated{}}
}

// Log writes msg at level unless key was logged less than warnEvery ago.
func (l *limitedLog) Log(level slog.Level, key, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	now := l.now()
	l.mu.Lock()
	r := l.seen[key]
	if r == nil {
		if len(l.seen) >= maxWarnKeys {
			l.prune(now)
		}
		if len(l.seen) >= maxWarnKeys {
			key, msg = "overflow", "discovery: many different problems; some are not logged"
			args = nil
			r = l.seen[key]
		}
	}
	if r == nil {
		r = &repeated{}
		l.seen[key] = r
	} else if now.Sub(r.logged) < warnEvery {
		r.held++
		l.mu.Unlock()
		return
	}
	held := r.held
	r.logged, r.held = now, 0
	l.mu.Unlock()
	if held > 0 {
		args = append(args, "repeated", held)
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// prune drops the keys not logged within warnEvery. Called with mu held.
func (l *limitedLog) prune(now time.Time) {
	for k, r := range l.seen {
		if now.Sub(r.logged) >= warnEvery {
			delete(l.seen, k)
		}
	}
}

// Warn is Log at warning level.
func (l *limitedLog) Warn(key, msg string, args ...any) { l.Log(slog.LevelWarn, key, msg, args...) }

// Debug is Log at debug level.
func (l *limitedLog) Debug(key, msg string, args ...any) { l.Log(slog.LevelDebug, key, msg, args...) }
