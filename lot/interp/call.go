package interp

import (
	"fmt"

	"gantry/lot/syntax"
)

// compiledArg is <name> = <expr> of CALL ACTION and PUBLISH MODEL.
type compiledArg struct {
	name string
	pos  syntax.Pos
	val  evalFn
}

func (c *compiler) args(as []*syntax.Assign) []compiledArg {
	out := make([]compiledArg, 0, len(as))
	for _, a := range as {
		if a == nil {
			continue
		}
		out = append(out, compiledArg{name: a.Name, pos: a.NamePos, val: c.expr(a.Value)})
	}
	return out
}

// bindInput sets INPUT name of p in vars, cast to its declared type.
func bindInput(vars []Value, p *Program, name string, v Value) error {
	for _, in := range p.inputs {
		if in.name != name {
			continue
		}
		cv, err := Cast(v, in.typ)
		if err != nil {
			return fmt.Errorf("INPUT %s of %s: %w", name, p.Name(), err)
		}
		vars[in.slot] = cv
		return nil
	}
	return errorf(ErrUnknown, "action %s has no INPUT %s", p.Name(), name)
}

// call is CALL ACTION <Name> WITH a = x, ... RETURN r1, ...: the arguments
// are computed in the caller and bound to the callee's INPUTs by name; the
// callee runs with its own variables, no message, and the caller's Host
// and budget; its OUTPUTs are copied to the RETURN variables in order (a
// RETURN variable without an OUTPUT gets EMPTY).
func (c *compiler) call(s *syntax.CallActionStmt) func(*run) error {
	args := c.args(s.Args)
	rets := make([]int, 0, len(s.Returns))
	for _, id := range s.Returns {
		rets = append(rets, c.slot(id.Name))
	}
	name, pos := s.Name, s.Start
	return func(r *run) error {
		callee, err := r.callee(name, pos)
		if err != nil {
			return err
		}
		cr := callee.newRun(r.host, &noEvent)
		defer cr.release()
		cr.budget = r.budget
		for _, a := range args {
			v, err := a.val(r)
			if err != nil {
				return err
			}
			if err := bindInput(cr.vars, callee, a.name, v); err != nil {
				return r.fail(a.pos, err)
			}
		}
		r.budget.depth++
		err = runBlock(cr, callee.body)
		r.budget.depth--
		if err != nil {
			return r.fail(pos, fmt.Errorf("CALL ACTION %s: %w", name, err))
		}
		for i, slot := range rets {
			r.vars[slot] = Value{}
			if i < len(callee.outputs) {
				r.vars[slot] = cr.vars[callee.outputs[i].slot]
			}
		}
		return nil
	}
}

// callee finds a callable action and checks the call depth.
func (r *run) callee(name string, pos syntax.Pos) (*Program, error) {
	if r.host.Callables == nil {
		return nil, r.fail(pos, errorf(ErrUnavailable, "CALL ACTION %s: the host has no callable actions", name))
	}
	p, ok := r.host.Callables.Callable(name)
	if !ok || p == nil {
		return nil, r.fail(pos, errorf(ErrUnknown, "CALL ACTION %s: no callable action %s is deployed", name, name))
	}
	if p.action.Trigger != nil {
		return nil, r.fail(pos, errorf(ErrUnknown, "CALL ACTION %s: %s has a trigger (%s), only actions without ON can be called",
			name, name, p.action.Trigger.Kind))
	}
	if r.budget.depth >= r.budget.maxDepth {
		return nil, r.fail(pos, errorf(ErrCallDepth, "CALL ACTION %s: calls nested deeper than %d (Options.MaxCallDepth)", name, r.budget.maxDepth))
	}
	return p, nil
}

// publishModel is PUBLISH MODEL <M> TO <topic> WITH <field> = <expr> ...:
// the assigned fields are computed in the action, the others from the
// model's defaults, and the JSON is published with the model's RETAIN and
// QoS.
func (c *compiler) publishModel(s *syntax.PublishModelStmt) func(*run) error {
	topic, args, name, pos := c.topic(s.Topic), c.args(s.Fields), s.Model, s.Start
	return func(r *run) error {
		if r.host.Models == nil {
			return r.fail(pos, errorf(ErrUnavailable, "PUBLISH MODEL %s: the host has no models", name))
		}
		m, ok := r.host.Models.Model(name)
		if !ok || m == nil {
			return r.fail(pos, errorf(ErrUnknown, "PUBLISH MODEL %s: no model %s is deployed", name, name))
		}
		t, err := topic(r)
		if err != nil {
			return err
		}
		assigned := make([]Value, len(m.fields))
		set := make([]bool, len(m.fields))
		for _, a := range args {
			i, ok := m.index[a.name]
			if !ok {
				return r.fail(a.pos, errorf(ErrUnknown, "PUBLISH MODEL %s: the model has no field %s", name, a.name))
			}
			if assigned[i], err = a.val(r); err != nil {
				return err
			}
			set[i] = true
		}
		payload, err := m.publishJSON(r, assigned, set)
		if err != nil {
			return r.fail(pos, fmt.Errorf("PUBLISH MODEL %s: %w", name, err))
		}
		if r.host.Effects == nil {
			return r.fail(pos, errorf(ErrUnavailable, "the host has no Effects to publish with"))
		}
		if err := r.host.Effects.Publish(t, payload, m.Retain(), m.QoS()); err != nil {
			return r.fail(pos, &effectError{what: fmt.Sprintf("PUBLISH MODEL %s TO %q", name, t), err: err})
		}
		return nil
	}
}
