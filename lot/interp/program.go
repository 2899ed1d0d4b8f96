package interp

import (
	"errors"
	"sync"

	"gantry/lot/syntax"
)

// Program is a compiled action. It is immutable and safe for concurrent
// use: any number of goroutines may Run it at once, each run with its own
// variables.
type Program struct {
	action  *syntax.Action
	opts    Options
	body    []stmtFn
	nslots  int     // variables: INPUTs, SET names, RETURN names, {refs}
	inputs  []param // INPUT lines, in order
	outputs []param // OUTPUT lines, in order
}

// param is an INPUT or OUTPUT of a callable action.
type param struct {
	name string
	slot int
	typ  syntax.TypeName
}

// Compile turns a parsed action into a Program. It fails, with an error
// naming the line and column, on what can never run: unsupported
// statements (CALL PYTHON, ...), bare words used as values, literal
// regular expressions that do not compile or are too long, literal topic
// names that are not valid, literal TOPIC POSITIONs below 1. opts may be
// nil for the defaults.
func Compile(a *syntax.Action, opts *Options) (*Program, error) {
	if a == nil {
		return nil, errorf(ErrCompile, "interp: no action to compile")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Program{action: a, opts: o}
	c := &compiler{opts: &p.opts, kind: "action", def: a.Name, slots: map[string]int{}}
	for _, in := range a.Inputs {
		p.inputs = append(p.inputs, param{name: in.Name, slot: c.slot(in.Name), typ: in.Type})
	}
	p.body = c.block(a.Body)
	for _, out := range a.Outputs {
		p.outputs = append(p.outputs, param{name: out.Name, slot: c.slot(out.Name)})
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	p.nslots = len(c.slots)
	return p, nil
}

// Name returns the action's name.
func (p *Program) Name() string { return p.action.Name }

// Action returns the action the program was compiled from.
func (p *Program) Action() *syntax.Action { return p.action }

// Run executes the action once for ev (nil for a timer or ON START). Its
// PUBLISH and KEEP statements go to host.Effects as they run; the first
// runtime error stops the run and is returned as an *Error naming the
// action, the line and column, and what went wrong. Run never panics: a
// panic, in the interpreter or in a Host implementation, becomes an
// ErrPanic error.
func (p *Program) Run(host *Host, ev *Event) error {
	if ev == nil {
		ev = &noEvent
	}
	r := p.newRun(host, ev)
	defer r.release()
	return r.exec(p.body)
}

// Call runs a callable action with its INPUTs bound by name (each cast to
// its declared type; a missing one is EMPTY) and returns its OUTPUTs by
// name. It is -runAction with JSON arguments; CALL ACTION inside a run
// does the same through Host.Callables.
func (p *Program) Call(host *Host, inputs map[string]Value) (map[string]Value, error) {
	r := p.newRun(host, &noEvent)
	defer r.release()
	for name, v := range inputs {
		if err := bindInput(r.vars, p, name, v); err != nil {
			return nil, r.fail(p.action.Start, err)
		}
	}
	if err := r.exec(p.body); err != nil {
		return nil, err
	}
	out := make(map[string]Value, len(p.outputs))
	for _, o := range p.outputs {
		out[o.name] = r.vars[o.slot]
	}
	return out, nil
}

var noEvent Event

// run is the state of one execution of a program, or of one model
// evaluation. Runs are pooled.
type run struct {
	kind, def string // "action"/"model" and the name, for errors
	opts      *Options
	host      *Host
	ev        *Event
	vars      []Value
	budget    *budget // shared by a run and the actions it calls
	own       budget
	pos       syntax.Pos // the statement running, for panics
	// filterMissed is set when a FILTER found no match while the value of
	// the current PUBLISH or KEEP was computed: that statement is skipped.
	filterMissed bool
	model        *modelRun // the model being evaluated, for bare field names
}

// budget counts what bounds a run as a whole.
type budget struct {
	steps, maxSteps int
	depth, maxDepth int
}

var runPool = sync.Pool{New: func() any { return new(run) }}

func (p *Program) newRun(host *Host, ev *Event) *run {
	r := newRun("action", p.Name(), &p.opts, host, ev)
	r.setVars(p.nslots)
	return r
}

func newRun(kind, def string, opts *Options, host *Host, ev *Event) *run {
	if host == nil {
		host = &Host{}
	}
	r := runPool.Get().(*run)
	r.kind, r.def, r.opts, r.host, r.ev = kind, def, opts, host, ev
	r.own = budget{maxSteps: opts.MaxSteps, maxDepth: opts.MaxCallDepth}
	r.budget = &r.own
	return r
}

func (r *run) setVars(n int) {
	if cap(r.vars) < n {
		r.vars = make([]Value, n)
	}
	r.vars = r.vars[:n]
}

// release clears r (so that the pool holds no payloads) and pools it.
func (r *run) release() {
	clear(r.vars)
	vars := r.vars[:0]
	*r = run{vars: vars}
	runPool.Put(r)
}

// exec runs a body, turning a panic into an error.
func (r *run) exec(body []stmtFn) error {
	return r.guard(func(r *run) error { return runBlock(r, body) })
}

// guard calls f, turning a panic into an ErrPanic error at the statement
// that was running.
func (r *run) guard(f func(r *run) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.fail(r.pos, errorf(ErrPanic, "internal error: %v", p))
		}
	}()
	return f(r)
}

// fail wraps err with the definition and the position.
func (r *run) fail(pos syntax.Pos, err error) error {
	return &Error{Kind: r.kind, Def: r.def, Pos: pos, Err: err}
}

// step counts one statement against the budget.
func (r *run) step(pos syntax.Pos) error {
	r.pos = pos
	r.budget.steps++
	if r.budget.steps > r.budget.maxSteps {
		return r.fail(pos, errorf(ErrStepLimit, "the run executed %d statements, the limit (Options.MaxSteps)", r.budget.maxSteps))
	}
	return nil
}
