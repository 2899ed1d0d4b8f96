package defs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
)

// Options configure a Local store. The zero value of a field means its
// default.
type Options struct {
	// MaxSourceBytes bounds one definition's source (default 1 MiB).
	MaxSourceBytes int
	// MaxDefinitions bounds the definitions held (default 10,000).
	MaxDefinitions int
	// Logger receives the problems found at open and failed clean-ups;
	// nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options { return Options{MaxSourceBytes: 1 << 20, MaxDefinitions: 10_000} }

// Validate checks the options.
func (o Options) Validate() error {
	if o.MaxSourceBytes < 0 {
		return fmt.Errorf("defs: Options.MaxSourceBytes = %d, want 0 (default) or more", o.MaxSourceBytes)
	}
	if o.MaxDefinitions < 0 {
		return fmt.Errorf("defs: Options.MaxDefinitions = %d, want 0 (default) or more", o.MaxDefinitions)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	d := DefaultOptions()
	var out Options
	if o != nil {
		out = *o
	}
	if out.MaxSourceBytes == 0 {
		out.MaxSourceBytes = d.MaxSourceBytes
	}
	if out.MaxDefinitions == 0 {
		out.MaxDefinitions = d.MaxDefinitions
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Local is the Store of a single node: definitions persisted under one
// directory (DataDir/lot). See the package documentation for the layout
// and the crash guarantees.
type Local struct {
	dir      string
	opts     Options
	problems []error

	applyMu sync.Mutex // serialises Apply, ApplyAt and Watch; held while watchers run
	gen     string     // live generation directory; guarded by applyMu

	mu      sync.RWMutex // guards defs and version
	defs    map[key]Definition
	version uint64

	watchMu  sync.Mutex // guards watchers and nextID
	watchers map[int]func(Applied)
	nextID   int
}

var _ Store = (*Local)(nil)

// OpenLocal opens (creating it if needed) the store in dir and loads the
// live generation. Damaged files are skipped, logged and listed by
// Problems, each naming its path; OpenLocal fails only when dir cannot be
// created or read.
func OpenLocal(dir string, opts *Options) (*Local, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("defs: create %s: %w", dir, err)
	}
	ld, err := readStore(dir, o.MaxSourceBytes)
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir, opts: o, problems: ld.problems, gen: ld.gen, defs: ld.defs, version: ld.version,
		watchers: map[int]func(Applied){}}
	for _, err := range removeOtherGenerations(dir, ld.gen) {
		l.opts.Logger.Warn("definitions store clean-up", "component", "lot/defs", "err", err)
	}
	for _, p := range l.problems {
		l.opts.Logger.Error("definitions store", "component", "lot/defs", "err", p)
	}
	return l, nil
}

// Dir returns the store's directory.
func (l *Local) Dir() string { return l.dir }

// Problems returns what OpenLocal skipped or repaired, each error naming a
// path.
func (l *Local) Problems() []error { return l.problems }

// Apply implements Store: the change gets the next version.
func (l *Local) Apply(ctx context.Context, c Change) (Applied, error) {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	return l.applyLocked(ctx, c, l.Version()+1)
}

// ApplyAt applies c with the given version, which must exceed the store's:
// the cluster applies committed changes with their Raft index.
func (l *Local) ApplyAt(ctx context.Context, version uint64, c Change) (Applied, error) {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	if cur := l.Version(); version <= cur {
		return Applied{}, fmt.Errorf("%w: version %d, the store is at %d", ErrStale, version, cur)
	}
	return l.applyLocked(ctx, c, version)
}

func (l *Local) applyLocked(ctx context.Context, c Change, version uint64) (Applied, error) {
	if err := ctx.Err(); err != nil {
		return Applied{}, err
	}
	if err := c.validate(l.opts.MaxSourceBytes); err != nil {
		return Applied{}, err
	}
	l.mu.RLock()
	cur := l.defs
	l.mu.RUnlock()
	next, events, err := apply(cur, c, version)
	if err != nil {
		return Applied{}, err
	}
	if len(next) > l.opts.MaxDefinitions {
		return Applied{}, fmt.Errorf("%w: %d definitions, more than Options.MaxDefinitions = %d", ErrLimit, len(next), l.opts.MaxDefinitions)
	}
	if err := ctx.Err(); err != nil {
		return Applied{}, err
	}
	gen, err := writeGeneration(l.dir, l.gen, version, sorted(next, ""), cur)
	if err != nil {
		return Applied{}, err
	}
	old := l.gen
	l.gen = gen
	l.mu.Lock()
	l.defs, l.version = next, version
	l.mu.Unlock()
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			l.opts.Logger.Warn("definitions store clean-up", "component", "lot/defs", "err", err)
		}
	}
	a := Applied{Version: version, Events: events}
	l.notify(a)
	return a, nil
}

func (l *Local) notify(a Applied) {
	l.watchMu.Lock()
	ids := make([]int, 0, len(l.watchers))
	for id := range l.watchers {
		ids = append(ids, id)
	}
	l.watchMu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		l.watchMu.Lock()
		fn := l.watchers[id]
		l.watchMu.Unlock()
		if fn != nil { // cancelled by an earlier watcher
			fn(a)
		}
	}
}

// Get implements Store.
func (l *Local) Get(kind Kind, name string) (Definition, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	d, ok := l.defs[key{kind, name}]
	return d, ok
}

// List implements Store.
func (l *Local) List(kind Kind) []Definition {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sorted(l.defs, kind)
}

// Version implements Store.
func (l *Local) Version() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.version
}

// Watch implements Store. Watchers are called in the order they registered.
func (l *Local) Watch(fn func(Applied)) ([]Definition, uint64, func()) {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	l.watchMu.Lock()
	id := l.nextID
	l.nextID++
	l.watchers[id] = fn
	l.watchMu.Unlock()
	l.mu.RLock()
	snap, v := sorted(l.defs, ""), l.version
	l.mu.RUnlock()
	var once sync.Once
	return snap, v, func() {
		once.Do(func() {
			l.watchMu.Lock()
			delete(l.watchers, id)
			l.watchMu.Unlock()
		})
	}
}
