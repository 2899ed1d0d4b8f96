package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gantry/broker/topic"
	"gantry/lot/check"
	"gantry/lot/defs"
	"gantry/lot/interp"
	"gantry/lot/rules"
	"gantry/lot/schedule"
	"gantry/lot/syntax"
)

// deployment is the compiled form of every stored definition. It is
// immutable once built: a change builds a new one.
type deployment struct {
	defs      []defs.Definition
	actions   map[string]*action
	models    map[string]*interp.Model
	onMessage []*action           // ON TOPIC and ON CHANGE, in deployment order
	triggers  topic.Tree[*action] // onMessage by filter: a message finds its actions in one walk
	onSession [3][]*action        // ON CONNECT, ON DISCONNECT, ON SUBSCRIBE
	triggered []*interp.Model     // models with AS TRIGGER fields
	exploding []*interp.Model     // models that explode JSON arriving on their topic
	rules     *rules.Set
	parsed    map[defKey]syntax.Def
	watch     []string // the trigger client's filters (watchFilters)
}

type defKey struct {
	kind defs.Kind
	name string
}

// action is one compiled action.
type action struct {
	name   string
	def    *syntax.Action
	prog   *interp.Program
	filter string         // ON TOPIC / ON CHANGE / ON SUBSCRIBE filter; "" for every subscription
	order  int            // position in deployment.onMessage
	timer  *schedule.Spec // ON EVERY, ON EVERY ... AT, ON TIMESTAMP
	source string
}

// Callable implements interp.Callables.
func (d *deployment) Callable(name string) (*interp.Program, bool) {
	a, ok := d.actions[name]
	if !ok || a.def.Trigger != nil {
		return nil, false
	}
	return a.prog, true
}

// Model implements interp.Models.
func (d *deployment) Model(name string) (*interp.Model, bool) {
	m, ok := d.models[name]
	return m, ok
}

// sessionIndex maps a session trigger to its slot in onSession.
func sessionIndex(k syntax.TriggerKind) int {
	switch k {
	case syntax.TriggerConnect:
		return 0
	case syntax.TriggerDisconnect:
		return 1
	}
	return 2
}

// kindOf maps a parsed definition's kind to the store's.
func kindOf(k syntax.DefKind) (defs.Kind, bool) {
	switch k {
	case syntax.KindAction:
		return defs.Action, true
	case syntax.KindModel:
		return defs.Model, true
	case syntax.KindRule:
		return defs.Rule, true
	case syntax.KindConnector:
		return defs.Connector, true
	}
	return "", false
}

// parseOne parses the stored source of one definition.
func parseOne(d defs.Definition) (syntax.Def, error) {
	f, err := syntax.Parse(d.Name, d.Source)
	if err != nil {
		return nil, err
	}
	if len(f.Defs) != 1 {
		return nil, fmt.Errorf("%s %q: the source holds %d definitions, want 1", d.Kind, d.Name, len(f.Defs))
	}
	return f.Defs[0], nil
}

// defError is the problem of one definition; key is zero for a problem of
// the whole set.
type defError struct {
	key defKey
	err error
}

// build compiles a set of definitions into a deployment. It checks them
// against each other (lot/check) and reports every problem; a deployment
// is returned only when there is none.
func build(list []defs.Definition, iopts *interp.Options) (*deployment, error) {
	d, fails := compile(list, iopts)
	if len(fails) > 0 {
		errs := make([]error, len(fails))
		for i, f := range fails {
			errs[i] = f.err
		}
		return nil, errors.Join(errs...)
	}
	return d, nil
}

// buildLenient builds what it can of list: the definitions that fail, and
// then those that depended on them, are left out and returned. It serves
// definitions that were stored before and no longer build (a newer
// version's stricter checks): one of them must not stop the others, and
// certainly not the access rules. The deployment is nil only when the set
// fails as a whole.
func buildLenient(list []defs.Definition, iopts *interp.Options) (*deployment, []defError) {
	var dropped []defError
	for {
		d, fails := compile(list, iopts)
		if len(fails) == 0 {
			return d, dropped
		}
		dropped = append(dropped, fails...)
		failed := map[defKey]bool{}
		for _, f := range fails {
			if f.key == (defKey{}) {
				return nil, dropped
			}
			failed[f.key] = true
		}
		list = slices.DeleteFunc(slices.Clone(list), func(def defs.Definition) bool {
			return failed[defKey{def.Kind, def.Name}]
		})
	}
}

// compile builds list into a deployment and returns the problems of each
// definition. Definitions are checked against each other first; when one
// fails the checks nothing is compiled.
func compile(list []defs.Definition, iopts *interp.Options) (*deployment, []defError) {
	d := &deployment{defs: list, actions: map[string]*action{}, models: map[string]*interp.Model{},
		parsed: map[defKey]syntax.Def{}}
	if fails := d.check(list); len(fails) > 0 {
		return nil, fails
	}
	fails := d.compileModels(list, iopts)
	for _, def := range list {
		if a, ok := d.parsed[defKey{def.Kind, def.Name}].(*syntax.Action); ok {
			if err := d.addAction(a, def.Source, iopts); err != nil {
				fails = append(fails, defError{defKey{def.Kind, def.Name}, err})
			}
		}
	}
	set, rfails := compileRules(list, d.parsed)
	fails = append(fails, rfails...)
	d.rules = set
	if len(fails) > 0 {
		return nil, fails
	}
	d.watch = watchFilters(d)
	return d, nil
}

// check parses every definition into d.parsed and checks each against all
// the others (lot/check), returning the problems of each.
func (d *deployment) check(list []defs.Definition) []defError {
	fails, _ := d.checkAll(list, nil)
	return fails
}

// checkAll is check; when one is not nil, it also returns every
// diagnostic (warnings too) of that definition (-lotDiagnostic).
func (d *deployment) checkAll(list []defs.Definition, one *defKey) ([]defError, []check.Diagnostic) {
	var fails []defError
	var diags []check.Diagnostic
	env := check.Deployed{Callables: map[string]check.Callable{}, Models: map[string]check.Model{}}
	for _, def := range list {
		pd, err := parseOne(def)
		if err != nil {
			fails = append(fails, defError{defKey{def.Kind, def.Name}, err})
			continue
		}
		d.parsed[defKey{def.Kind, def.Name}] = pd
		if a, ok := pd.(*syntax.Action); ok {
			if c, ok := check.CallableOf(a); ok {
				env.Callables[a.Name] = c
			}
		}
	}
	describeModels(d.parsed, env.Models)
	for _, def := range list {
		pd := d.parsed[defKey{def.Kind, def.Name}]
		if pd == nil {
			continue
		}
		var errs []error
		k := defKey{def.Kind, def.Name}
		for _, diag := range check.Check(&syntax.File{Name: def.Name, Src: def.Source, Defs: []syntax.Def{pd}}, env) {
			if one != nil && k == *one {
				diags = append(diags, diag)
			}
			if diag.Severity == check.Error {
				errs = append(errs, diagError{diag})
			}
		}
		if len(errs) > 0 {
			fails = append(fails, defError{k, errors.Join(errs...)})
		}
	}
	return fails, diags
}

// describeModels fills what the checker needs of every model, parents
// first (a FROM chain is resolved however the list is ordered).
func describeModels(parsed map[defKey]syntax.Def, out map[string]check.Model) {
	models := map[string]*syntax.Model{}
	for _, pd := range parsed {
		if m, ok := pd.(*syntax.Model); ok {
			models[m.Name] = m
		}
	}
	var describe func(name string, depth int) check.Model
	describe = func(name string, depth int) check.Model {
		if cm, ok := out[name]; ok {
			return cm
		}
		m := models[name]
		if m == nil || depth > 32 {
			return check.Model{}
		}
		parent := check.Model{}
		if m.From != "" {
			parent = describe(m.From, depth+1)
		}
		out[name] = check.ModelOf(m, parent)
		return out[name]
	}
	for name := range models {
		describe(name, 0)
	}
}

// compileModels compiles the models, each after its FROM parent, in the
// order of list otherwise (so that models publish in a stable order).
func (d *deployment) compileModels(list []defs.Definition, iopts *interp.Options) []defError {
	var pending []*syntax.Model
	for _, def := range list {
		if m, ok := d.parsed[defKey{def.Kind, def.Name}].(*syntax.Model); ok {
			pending = append(pending, m)
		}
	}
	waiting := func(name string) bool {
		return slices.ContainsFunc(pending, func(m *syntax.Model) bool { return m != nil && m.Name == name })
	}
	var errs []defError
	for left := len(pending); left > 0; {
		progress := false
		for i, m := range pending {
			if m == nil || (m.From != "" && waiting(m.From)) {
				continue // done, or parent first
			}
			pending[i], left, progress = nil, left-1, true
			cm, err := interp.CompileModel(m, d, iopts)
			if err != nil {
				errs = append(errs, defError{defKey{defs.Model, m.Name}, err})
				continue
			}
			d.models[m.Name] = cm
			if len(cm.Triggers()) > 0 {
				d.triggered = append(d.triggered, cm)
			}
			if cm.Explodes() {
				d.exploding = append(d.exploding, cm)
			}
		}
		if !progress {
			for _, m := range pending {
				if m != nil {
					errs = append(errs, defError{defKey{defs.Model, m.Name}, fmt.Errorf("model %q: its FROM chain is a cycle", m.Name)})
				}
			}
			break
		}
	}
	return errs
}

// addAction compiles an action and files it under its trigger.
func (d *deployment) addAction(a *syntax.Action, source string, iopts *interp.Options) error {
	prog, err := interp.Compile(a, iopts)
	if err != nil {
		return err
	}
	ac := &action{name: a.Name, def: a, prog: prog, source: source}
	d.actions[a.Name] = ac
	t := a.Trigger
	if t == nil {
		return nil
	}
	if t.Topic != nil {
		lit, ok := t.Topic.(*syntax.StringLit)
		if !ok {
			return fmt.Errorf("action %q: the %s topic must be a constant string", a.Name, t.Kind)
		}
		ac.filter = lit.Value
	}
	switch t.Kind {
	case syntax.TriggerTopic, syntax.TriggerChange:
		if err := topic.ValidateFilter(ac.filter); err != nil {
			return posError{t.Topic.Pos(), fmt.Errorf("action %q: %w", a.Name, err)}
		}
		if strings.HasPrefix(ac.filter, "$") {
			// The broker's own topics never trigger LoT: its statistics
			// and commands are not events of the plant.
			return posError{t.Topic.Pos(), fmt.Errorf("action %q: %s %q: LoT does not trigger on $ topics (they belong to the broker)",
				a.Name, t.Kind, ac.filter)}
		}
		ac.order = len(d.onMessage)
		d.onMessage = append(d.onMessage, ac)
		d.triggers.Subscribe(topic.Entry[*action]{Client: ac, Filter: ac.filter})
	case syntax.TriggerConnect, syntax.TriggerDisconnect, syntax.TriggerSubscribe:
		i := sessionIndex(t.Kind)
		d.onSession[i] = append(d.onSession[i], ac)
	case syntax.TriggerEvery, syntax.TriggerDaily, syntax.TriggerTimestamp:
		spec, err := timerSpec(t)
		if err != nil {
			return posError{t.Start, fmt.Errorf("action %q: %w", a.Name, err)}
		}
		ac.timer = &spec
	}
	return nil
}

// minTimerInterval is the shortest ON EVERY the engine runs: the
// scheduler's MinInterval, checked at deploy so that a faster timer is
// refused instead of being stored and never run.
const minTimerInterval = 10 * time.Millisecond

// fixedUnits are the ON EVERY units of a fixed length.
var fixedUnits = map[string]time.Duration{"MILLISECOND": time.Millisecond, "SECOND": time.Second,
	"MINUTE": time.Minute, "HOUR": time.Hour, "DAY": 24 * time.Hour, "WEEK": 7 * 24 * time.Hour}

// timerSpec turns a timer trigger into a schedule.
func timerSpec(t *syntax.Trigger) (schedule.Spec, error) {
	switch t.Kind {
	case syntax.TriggerEvery:
		unit := strings.ToUpper(t.Unit.String())
		if d, ok := fixedUnits[strings.TrimSuffix(unit, "S")]; ok && t.Count*float64(d) < float64(minTimerInterval) {
			return schedule.Spec{}, fmt.Errorf("ON EVERY %s %s is shorter than the shortest timer, %v", t.CountText, unit, minTimerInterval)
		}
		return schedule.ParseEvery(t.Count, unit)
	case syntax.TriggerDaily:
		return schedule.ParseWeekly(t.Day, t.At)
	}
	return schedule.ParseTimestamp(t.At)
}

// posError is an error at a place of a definition's source.
type posError struct {
	pos syntax.Pos
	err error
}

func (e posError) Error() string                { return e.err.Error() }
func (e posError) Unwrap() error                { return e.err }
func (e posError) Position() (line, column int) { return e.pos.Line, e.pos.Col }

// diagError makes a checker diagnostic a positioned error for command
// replies.
type diagError struct{ d check.Diagnostic }

func (e diagError) Error() string                { return e.d.Error() }
func (e diagError) Position() (line, column int) { return e.d.Pos.Line, e.d.Pos.Col }
func (e diagError) Suggestions() []string {
	if e.d.Hint == "" {
		return nil
	}
	return []string{e.d.Hint}
}
