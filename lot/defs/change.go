package defs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is a kind of definition.
type Kind string

// Kinds of definitions. DEFINE ROUTE is an alias of DEFINE CONNECTOR: both
// are Connector.
const (
	Model     Kind = "model"
	Action    Kind = "action"
	Connector Kind = "connector"
	Rule      Kind = "rule"
)

// Kinds returns the kinds in load order (LOT.md §9.4: models, actions,
// routes, rules): a definition may refer to those of earlier kinds.
func Kinds() []Kind { return []Kind{Model, Action, Connector, Rule} }

// rank is the position of k in load order, -1 when k is unknown.
func (k Kind) rank() int {
	switch k {
	case Model:
		return 0
	case Action:
		return 1
	case Connector:
		return 2
	case Rule:
		return 3
	}
	return -1
}

// Valid reports whether k is one of the kinds.
func (k Kind) Valid() bool { return k.rank() >= 0 }

// ParseKind returns the kind named s, ignoring case and a plural s; "route"
// is Connector.
func ParseKind(s string) (Kind, error) {
	k := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "s")
	if k == "route" {
		return Connector, nil
	}
	if Kind(k).Valid() {
		return Kind(k), nil
	}
	return "", fmt.Errorf("defs: unknown kind %q (want action, model, rule, connector or route)", s)
}

// MaxNameLen is the longest definition name, in bytes.
const MaxNameLen = 128

// ValidateName checks a definition name (LOT.md §1.2): 1 to MaxNameLen
// letters, digits and '_', plus '-' and '.' (which the vendor's linter
// tolerates) after the first character. Names are case-sensitive. The
// name is also a file name, which these rules keep safe.
func ValidateName(kind Kind, name string) error {
	if name == "" {
		return fmt.Errorf("defs: %s name is empty", kind)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("defs: %s name %q is %d bytes, more than %d", kind, name, len(name), MaxNameLen)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		case (r == '-' || r == '.') && i > 0:
		default:
			what := fmt.Sprintf("%q", r)
			if r == utf8.RuneError {
				what = "invalid UTF-8"
			}
			return fmt.Errorf("defs: %s name %q has %s at byte %d; use letters, digits and '_' (and '-' or '.' after the first character)",
				kind, name, what, i)
		}
	}
	return nil
}

// Errors wrapped by Apply's errors.
var (
	// ErrNotFound: a Delete names a definition that does not exist.
	ErrNotFound = errors.New("defs: not found")
	// ErrInvalid: the change is malformed (kind, name, source, duplicates).
	ErrInvalid = errors.New("defs: invalid change")
	// ErrLimit: the change would exceed a bound of the store.
	ErrLimit = errors.New("defs: limit exceeded")
	// ErrStale: ApplyAt was given a version not above the store's.
	ErrStale = errors.New("defs: stale version")
	// ErrConflict: a store that commits elsewhere (a cluster) refused the
	// change because the definitions changed since it was checked; the
	// store now holds the newer ones, and the change is to be checked
	// again on them.
	ErrConflict = errors.New("defs: the definitions changed meanwhile")
)

// Definition is one stored definition.
type Definition struct {
	Kind   Kind
	Name   string
	Source string // LoT text, verbatim
	// Version is the version of the change that last wrote it.
	Version uint64
}

// Put adds or replaces a definition.
type Put struct {
	Kind   Kind
	Name   string
	Source string
}

// Delete removes one definition, or every definition of Kind when Name is
// empty.
type Delete struct {
	Kind Kind
	Name string
}

// Change is applied all or nothing: Deletes first, then Puts. Deleting every
// action and putting a project's actions is one Change.
type Change struct {
	Deletes []Delete
	Puts    []Put
}

// Op is what a change did to one definition.
type Op uint8

// Ops.
const (
	Added Op = iota + 1
	Replaced
	// Unchanged: put again with the same source (a redeploy of the same
	// code: ON START does not run again, timers keep their phase).
	Unchanged
	Removed
)

func (o Op) String() string {
	switch o {
	case Added:
		return "added"
	case Replaced:
		return "replaced"
	case Unchanged:
		return "unchanged"
	case Removed:
		return "removed"
	}
	return "unknown"
}

// Event is the effect of a change on one definition.
type Event struct {
	Op     Op
	Kind   Kind
	Name   string
	Source string // the new source; empty for Removed
	// Previous is the source before the change; empty for Added.
	Previous string
}

// Applied describes a change once it is durable. Events list removals
// first (rules, connectors, actions, models: dependents before what they
// depend on), then the puts in load order of their kinds (models, actions,
// connectors, rules) and, within a kind, in the order of Change.Puts.
type Applied struct {
	Version uint64
	Events  []Event
}

// Store holds the definitions. Apply is local on a single node; in a cluster
// it commits through the Raft leader, and Version is the Raft index.
type Store interface {
	// Apply applies c all or nothing and returns what it did once it is
	// durable and every watcher has been told.
	Apply(ctx context.Context, c Change) (Applied, error)
	// Get returns one definition.
	Get(kind Kind, name string) (Definition, bool)
	// List returns the definitions of kind ("" for all) in load order,
	// then by name.
	List(kind Kind) []Definition
	// Version is the version of the last applied change (0: none).
	Version() uint64
	// Watch calls fn with every change applied from now on, in order, and
	// returns the definitions and version it starts from: nothing is
	// missed or seen twice. fn runs on the applying goroutine before Apply
	// returns and must not call Apply or Watch. cancel stops the calls.
	Watch(fn func(Applied)) (snapshot []Definition, version uint64, cancel func())
}

// key identifies a definition.
type key struct {
	kind Kind
	name string
}

// validate checks the change on its own, reporting every problem.
func (c Change) validate(maxSource int) error {
	var errs []error
	if len(c.Deletes) == 0 && len(c.Puts) == 0 {
		errs = append(errs, errors.New("the change is empty"))
	}
	for _, d := range c.Deletes {
		if !d.Kind.Valid() {
			errs = append(errs, fmt.Errorf("delete: unknown kind %q", d.Kind))
		} else if d.Name != "" {
			errs = append(errs, ValidateName(d.Kind, d.Name))
		}
	}
	seen := map[key]bool{}
	for _, p := range c.Puts {
		if !p.Kind.Valid() {
			errs = append(errs, fmt.Errorf("put: unknown kind %q", p.Kind))
			continue
		}
		if err := ValidateName(p.Kind, p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		k := key{p.Kind, p.Name}
		if seen[k] {
			errs = append(errs, fmt.Errorf("%s %q is put twice", p.Kind, p.Name))
		}
		seen[k] = true
		errs = append(errs, validateSource(p, maxSource))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func validateSource(p Put, maxSource int) error {
	switch {
	case strings.TrimSpace(p.Source) == "":
		return fmt.Errorf("%s %q: the source is empty", p.Kind, p.Name)
	case len(p.Source) > maxSource:
		return fmt.Errorf("%s %q: the source is %d bytes, more than %d", p.Kind, p.Name, len(p.Source), maxSource)
	case !utf8.ValidString(p.Source):
		return fmt.Errorf("%s %q: the source is not valid UTF-8", p.Kind, p.Name)
	}
	return nil
}

// apply computes the state after c over cur (which it does not modify) and
// the events; version stamps the definitions c writes.
func apply(cur map[key]Definition, c Change, version uint64) (map[key]Definition, []Event, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[key]Definition{}
	}
	if err := applyDeletes(next, c.Deletes); err != nil {
		return nil, nil, err
	}
	var events []Event
	for _, p := range c.Puts {
		k := key{p.Kind, p.Name}
		ev := Event{Op: Added, Kind: p.Kind, Name: p.Name, Source: p.Source}
		if old, had := cur[k]; had {
			ev.Op, ev.Previous = Replaced, old.Source
			if old.Source == p.Source {
				ev.Op = Unchanged
			}
		}
		events = append(events, ev)
		next[k] = Definition{Kind: p.Kind, Name: p.Name, Source: p.Source, Version: version}
	}
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.Kind.rank(), b.Kind.rank()) })
	return next, append(removals(cur, next), events...), nil
}

// applyDeletes removes what ds names from m, failing on a name m lacks.
func applyDeletes(m map[key]Definition, ds []Delete) error {
	var errs []error
	for _, d := range ds {
		if d.Name == "" {
			maps.DeleteFunc(m, func(k key, _ Definition) bool { return k.kind == d.Kind })
			continue
		}
		if _, ok := m[key{d.Kind, d.Name}]; !ok {
			errs = append(errs, fmt.Errorf("%w: %s %q", ErrNotFound, d.Kind, d.Name))
			continue
		}
		delete(m, key{d.Kind, d.Name})
	}
	return errors.Join(errs...)
}

// removals lists what is in cur and not in next, dependents first (rules,
// connectors, actions, models), then by name.
func removals(cur, next map[key]Definition) []Event {
	var out []Event
	for k, d := range cur {
		if _, ok := next[k]; !ok {
			out = append(out, Event{Op: Removed, Kind: k.kind, Name: k.name, Previous: d.Source})
		}
	}
	slices.SortFunc(out, func(a, b Event) int {
		return cmp.Or(cmp.Compare(b.Kind.rank(), a.Kind.rank()), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// sorted returns the definitions of m of kind ("" for all) in load order,
// then by name.
func sorted(m map[key]Definition, kind Kind) []Definition {
	out := make([]Definition, 0, len(m))
	for k, d := range m {
		if kind == "" || k.kind == kind {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Definition) int {
		return cmp.Or(cmp.Compare(a.Kind.rank(), b.Kind.rank()), cmp.Compare(a.Name, b.Name))
	})
	return out
}
