package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/rules"
	"gantry/lot/syntax"
)

// RulesCountTopic holds the number of deployed DEFINE RULE definitions
// (seed and user rules, not the locked built-ins), retained.
const RulesCountTopic = "$SYS/Coreflux/Config/Rules"

// RestoreRules implements command.RuleRestorer: the three seed rules are
// stored again as a new broker has them, replacing rules of the same
// names; the other rules stay. It is the way back for an operator who
// removed AllowConnect and locked ordinary clients out.
func (e *Engine) RestoreRules(ctx context.Context, _ command.Caller) ([]string, error) {
	var puts []defs.Put
	var names []string
	for _, r := range rules.Seeds() {
		puts = append(puts, defs.Put{Kind: defs.Rule, Name: r.Name, Source: r.Source})
		names = append(names, r.Name)
	}
	if _, err := e.apply(ctx, defs.Change{Puts: puts}); err != nil {
		return nil, err
	}
	return names, nil
}

// publishRuleCount publishes RulesCountTopic for a deployment's rule set.
func (e *Engine) publishRuleCount(set *rules.Set) {
	n := 0
	if set != nil {
		for _, r := range set.Rules() {
			if !r.Builtin {
				n++
			}
		}
	}
	e.publishSys(RulesCountTopic, []byte(strconv.Itoa(n)))
}

// ListEnv implements command.EnvironmentEditor: the values of -setEnv.
func (e *Engine) ListEnv(context.Context, command.Caller) (map[string]string, error) {
	e.env.mu.RLock()
	defer e.env.mu.RUnlock()
	return maps.Clone(e.env.vals.Env), nil
}

// RemoveEnv implements command.EnvironmentEditor.
func (e *Engine) RemoveEnv(_ context.Context, _ command.Caller, name string) error {
	if _, ok := e.env.Env(name); !ok {
		return command.ErrNotFound
	}
	return e.env.DeleteEnv(name, false)
}

// ListSecrets implements command.EnvironmentEditor: the names only, never
// a value.
func (e *Engine) ListSecrets(context.Context, command.Caller) ([]string, error) {
	e.env.mu.RLock()
	defer e.env.mu.RUnlock()
	return slices.Sorted(maps.Keys(e.env.vals.Secrets)), nil
}

// RemoveSecret implements command.EnvironmentEditor.
func (e *Engine) RemoveSecret(_ context.Context, _ command.Caller, name string) error {
	if _, ok := e.env.Secret(name); !ok {
		return command.ErrNotFound
	}
	return e.env.DeleteEnv(name, true)
}

var (
	_ command.RuleRestorer      = (*Engine)(nil)
	_ command.EnvironmentEditor = (*Engine)(nil)
	_ command.Diagnostician     = (*Engine)(nil)
)

// diagnosticEntry is one finding of -lotDiagnostic.
type diagnosticEntry struct {
	Severity string `json:"severity"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Message  string `json:"message"`
	Hint     string `json:"hint,omitempty"`
	Source   string `json:"sourceLine,omitempty"`
}

// Diagnose implements command.Diagnostician: the stored definition is
// checked against the other stored ones, as a deploy checks it, and every
// finding is returned, warnings included, with whether it runs.
func (e *Engine) Diagnose(_ context.Context, _ command.Caller, kind defs.Kind, name string) (any, error) {
	if _, ok := e.o.Store.Get(kind, name); !ok {
		return nil, fmt.Errorf("%w: %s %q", command.ErrNotFound, kind, name)
	}
	list := e.o.Store.List("")
	d := &deployment{parsed: map[defKey]syntax.Def{}}
	key := defKey{kind, name}
	fails, diags := d.checkAll(list, &key)
	out := map[string]any{"kind": kind, "name": name, "running": true, "diagnostics": []diagnosticEntry{}}
	entries := []diagnosticEntry{}
	for _, g := range diags {
		entries = append(entries, diagnosticEntry{Severity: g.Severity.String(), Line: g.Pos.Line, Column: g.Pos.Col,
			Message: g.Msg, Hint: g.Hint, Source: g.Line})
	}
	out["diagnostics"] = entries
	for _, f := range fails {
		if f.key == key && len(diags) == 0 {
			entries = append(entries, diagnosticEntry{Severity: "error", Message: f.err.Error()}) // does not parse
			out["diagnostics"] = entries
		}
	}
	e.mu.Lock()
	if err := e.broken[key]; err != nil {
		out["running"], out["error"] = false, err.Error()
	}
	e.mu.Unlock()
	return out, nil
}
