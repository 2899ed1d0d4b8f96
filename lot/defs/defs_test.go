package defs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var ctx = context.Background()

func src(kind Kind, name, body string) string {
	return fmt.Sprintf("DEFINE %s %s\n%s\n", strings.ToUpper(string(kind)), name, body)
}

func put(kind Kind, name, body string) Put {
	return Put{Kind: kind, Name: name, Source: src(kind, name, body)}
}

func open(t *testing.T, dir string) *Local {
	t.Helper()
	l, err := OpenLocal(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustApply(t *testing.T, l *Local, c Change) Applied {
	t.Helper()
	a, err := l.Apply(ctx, c)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return a
}

// events renders Applied.Events as "op kind/name" strings.
func events(a Applied) string {
	var out []string
	for _, e := range a.Events {
		out = append(out, fmt.Sprintf("%s %s/%s", e.Op, e.Kind, e.Name))
	}
	return strings.Join(out, ", ")
}

func names(ds []Definition) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s/%s@%d", d.Kind, d.Name, d.Version))
	}
	return strings.Join(out, " ")
}

func TestApplySequence(t *testing.T) {
	l := open(t, t.TempDir())
	steps := []struct {
		name   string
		change Change
		events string
		state  string
	}{
		{"add across kinds, load order", Change{Puts: []Put{
			put(Rule, "R", "ALLOW"), put(Action, "B", "x"), put(Action, "A", "x"), put(Model, "M", "m"),
		}}, "added model/M, added action/B, added action/A, added rule/R",
			"model/M@1 action/A@1 action/B@1 rule/R@1"},
		{"replace, redeploy, add a connector", Change{Puts: []Put{
			put(Action, "A", "changed"), put(Action, "B", "x"), put(Connector, "C", "c"),
		}}, "replaced action/A, unchanged action/B, added connector/C",
			"model/M@1 action/A@2 action/B@2 connector/C@2 rule/R@1"},
		{"delete one", Change{Deletes: []Delete{{Kind: Model, Name: "M"}}}, "removed model/M",
			"action/A@2 action/B@2 connector/C@2 rule/R@1"},
		{"project load: all actions replaced", Change{Deletes: []Delete{{Kind: Action}}, Puts: []Put{
			put(Action, "B", "x"), put(Action, "D", "d"),
		}}, "removed action/A, unchanged action/B, added action/D",
			"action/B@4 action/D@4 connector/C@2 rule/R@1"},
		{"remove everything, dependents first", Change{Deletes: []Delete{{Kind: Action}, {Kind: Rule}, {Kind: Connector}, {Kind: Model}}},
			"removed rule/R, removed connector/C, removed action/B, removed action/D", ""},
	}
	for i, s := range steps {
		a := mustApply(t, l, s.change)
		if a.Version != uint64(i+1) || l.Version() != a.Version {
			t.Fatalf("%s: version %d (store %d), want %d", s.name, a.Version, l.Version(), i+1)
		}
		if got := events(a); got != s.events {
			t.Fatalf("%s: events\n got %s\nwant %s", s.name, got, s.events)
		}
		if got := names(l.List("")); got != s.state {
			t.Fatalf("%s: state\n got %s\nwant %s", s.name, got, s.state)
		}
	}
}

func TestGetListAndReplacedSource(t *testing.T) {
	l := open(t, t.TempDir())
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "one"), put(Rule, "R", "ALLOW")}})
	a := mustApply(t, l, Change{Puts: []Put{put(Action, "A", "two")}})
	if e := a.Events[0]; e.Previous != src(Action, "A", "one") || e.Source != src(Action, "A", "two") {
		t.Fatalf("event sources: %+v", e)
	}
	d, ok := l.Get(Action, "A")
	if !ok || d.Source != src(Action, "A", "two") || d.Version != 2 {
		t.Fatalf("Get = %+v, %v", d, ok)
	}
	if _, ok := l.Get(Model, "A"); ok {
		t.Fatal("Get found a model named like an action")
	}
	if got := names(l.List(Rule)); got != "rule/R@1" {
		t.Fatalf("List(rule) = %s", got)
	}
}

func TestRefusedChangesChangeNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLocal(dir, &Options{MaxSourceBytes: 64, MaxDefinitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "x")}})
	big := strings.Repeat("x", 65)
	tests := []struct {
		name   string
		change Change
		is     error
		want   []string
	}{
		{"empty", Change{}, ErrInvalid, []string{"the change is empty"}},
		{"unknown kind", Change{Puts: []Put{{Kind: "panel", Name: "P", Source: "x"}}}, ErrInvalid, []string{`unknown kind "panel"`}},
		{"bad name", Change{Puts: []Put{{Kind: Action, Name: "my action", Source: "x"}}}, ErrInvalid,
			[]string{`action name "my action" has ' ' at byte 2`}},
		{"quoted name", Change{Puts: []Put{{Kind: Action, Name: `"A"`, Source: "x"}}}, ErrInvalid, []string{`has '"' at byte 0`}},
		{"empty source", Change{Puts: []Put{{Kind: Action, Name: "B", Source: " \n"}}}, ErrInvalid, []string{`action "B": the source is empty`}},
		{"large source", Change{Puts: []Put{{Kind: Action, Name: "B", Source: big}}}, ErrInvalid, []string{"65 bytes, more than 64"}},
		{"bad utf-8", Change{Puts: []Put{{Kind: Action, Name: "B", Source: "\xff"}}}, ErrInvalid, []string{"not valid UTF-8"}},
		{"twice", Change{Puts: []Put{put(Action, "B", "1"), put(Action, "B", "2")}}, ErrInvalid, []string{`action "B" is put twice`}},
		{"every problem reported", Change{Puts: []Put{{Kind: "x"}, {Kind: Rule, Name: "-r", Source: "x"}}}, ErrInvalid,
			[]string{`unknown kind "x"`, `rule name "-r"`}},
		{"delete missing, with a valid put", Change{Deletes: []Delete{{Kind: Model, Name: "Nope"}}, Puts: []Put{put(Action, "B", "x")}},
			ErrNotFound, []string{`model "Nope"`}},
		{"too many", Change{Puts: []Put{put(Action, "B", "x"), put(Action, "C", "x"), put(Action, "D", "x")}}, ErrLimit,
			[]string{"4 definitions, more than Options.MaxDefinitions = 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Apply(ctx, tc.change)
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
			if l.Version() != 1 || names(l.List("")) != "action/A@1" {
				t.Fatalf("a refused change changed the store: v%d %s", l.Version(), names(l.List("")))
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Apply(cctx, Change{Puts: []Put{put(Action, "B", "x")}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context = %v", err)
	}
	if got := names(open(t, dir).List("")); got != "action/A@1" {
		t.Fatalf("on disk after refusals: %s", got)
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "a"), put(Model, "M", "m")}})
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "a2"), put(Rule, "R", "ALLOW")}})
	r := open(t, dir)
	if len(r.Problems()) != 0 {
		t.Fatalf("problems on a clean reopen: %v", r.Problems())
	}
	if r.Version() != 2 || names(r.List("")) != names(l.List("")) {
		t.Fatalf("reopened v%d %s, want v2 %s", r.Version(), names(r.List("")), names(l.List("")))
	}
	if d, _ := r.Get(Action, "A"); d.Source != src(Action, "A", "a2") {
		t.Fatalf("reopened source %q", d.Source)
	}
	gens, _ := filepath.Glob(filepath.Join(dir, genPrefix+"*"))
	if len(gens) != 1 || filepath.Base(gens[0]) != genName(2) {
		t.Fatalf("generations on disk: %v", gens)
	}
	if _, err := os.Stat(filepath.Join(gens[0], "action", "A.lot")); err != nil {
		t.Fatalf("definition file: %v", err)
	}
}

func TestApplyAt(t *testing.T) {
	l := open(t, t.TempDir())
	a, err := l.ApplyAt(ctx, 40, Change{Puts: []Put{put(Action, "A", "a")}})
	if err != nil || a.Version != 40 || l.Version() != 40 {
		t.Fatalf("ApplyAt(40) = %+v, %v", a, err)
	}
	if _, err := l.ApplyAt(ctx, 40, Change{Puts: []Put{put(Action, "B", "b")}}); !errors.Is(err, ErrStale) {
		t.Fatalf("ApplyAt(40) again = %v", err)
	}
	if a, _ := l.Apply(ctx, Change{Puts: []Put{put(Action, "B", "b")}}); a.Version != 41 {
		t.Fatalf("Apply after ApplyAt(40) got version %d", a.Version)
	}
}

func TestWatch(t *testing.T) {
	l := open(t, t.TempDir())
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "a")}})
	var mu sync.Mutex
	var seen []uint64
	snap, v, cancel := l.Watch(func(a Applied) {
		if d, ok := l.Get(a.Events[0].Kind, a.Events[0].Name); !ok || d.Version != a.Version {
			t.Errorf("watcher of v%d does not see the change applied", a.Version)
		}
		mu.Lock()
		seen = append(seen, a.Version)
		mu.Unlock()
	})
	if v != 1 || names(snap) != "action/A@1" {
		t.Fatalf("snapshot v%d %s", v, names(snap))
	}
	var self func()
	calls := 0
	_, _, self = l.Watch(func(Applied) { calls++; self() }) // cancels itself from its callback
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Apply(ctx, Change{Puts: []Put{put(Action, fmt.Sprintf("W%d", i), "w")}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	cancel()
	mustApply(t, l, Change{Puts: []Put{put(Action, "Z", "z")}})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 8 {
		t.Fatalf("watcher saw %d changes, want 8: %v", len(seen), seen)
	}
	for i, v := range seen {
		if v != uint64(i+2) {
			t.Fatalf("changes out of order: %v", seen)
		}
	}
	if calls != 1 {
		t.Fatalf("self-cancelling watcher called %d times", calls)
	}
}

func TestParseKindAndNames(t *testing.T) {
	kinds := map[string]Kind{"action": Action, "Actions": Action, "ROUTE": Connector, "routes": Connector,
		"connector": Connector, "model": Model, "rule": Rule}
	for in, want := range kinds {
		if got, err := ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseKind("panel"); err == nil || !strings.Contains(err.Error(), `"panel"`) {
		t.Errorf("ParseKind(panel) = %v", err)
	}
	valid := []string{"A", "_x", "Press1", "my-action.v2", "9lives", strings.Repeat("n", MaxNameLen)}
	for _, n := range valid {
		if err := ValidateName(Action, n); err != nil {
			t.Errorf("ValidateName(%q) = %v", n, err)
		}
	}
	invalid := map[string]string{
		"":                                "action name is empty",
		".hidden":                         `has '.' at byte 0`,
		"..":                              `has '.' at byte 0`,
		"a/b":                             `has '/' at byte 1`,
		"é":                               `has 'é' at byte 0`,
		"\xff":                            "invalid UTF-8 at byte 0",
		strings.Repeat("n", MaxNameLen+1): "more than 128",
	}
	for n, want := range invalid {
		if err := ValidateName(Action, n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateName(%q) = %v, want %q", n, err, want)
		}
	}
}
