package interp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"gantry/lot/syntax"
)

// stmtFn is a compiled statement and where it starts.
type stmtFn struct {
	pos  syntax.Pos
	exec func(r *run) error
}

// runBlock executes statements in order, counting each against the run's
// budget; the first error stops it.
func runBlock(r *run, body []stmtFn) error {
	for i := range body {
		s := &body[i]
		if err := r.step(s.pos); err != nil {
			return err
		}
		if err := s.exec(r); err != nil {
			return err
		}
	}
	return nil
}

func (c *compiler) block(stmts []syntax.Stmt) []stmtFn {
	out := make([]stmtFn, 0, len(stmts))
	for _, s := range stmts {
		if s == nil {
			c.errs = append(c.errs, &Error{Kind: c.kind, Def: c.def, Err: errorf(ErrCompile, "a statement is missing")})
			continue
		}
		out = append(out, stmtFn{pos: s.Pos(), exec: c.stmt(s)})
	}
	return out
}

func (c *compiler) stmt(s syntax.Stmt) func(*run) error {
	switch s := s.(type) {
	case *syntax.SetStmt:
		slot, val := c.slot(s.Name), c.expr(s.Value)
		return func(r *run) error {
			v, err := val(r)
			r.vars[slot] = v
			return err
		}
	case *syntax.PublishStmt:
		return c.publish(s)
	case *syntax.PublishModelStmt:
		return c.publishModel(s)
	case *syntax.IfStmt:
		return c.ifStmt(s)
	case *syntax.SwitchStmt:
		return c.switchStmt(s)
	case *syntax.LoopStmt:
		return c.loop(s)
	case *syntax.CallActionStmt:
		return c.call(s)
	case *syntax.TriggerEventStmt:
		return c.triggerEvent(s)
	case *syntax.EnvStmt:
		return c.envStmt(s)
	case *syntax.UnsupportedStmt:
		c.errorf(s.Start, "%s is not supported by Gantry", s.Feature)
	default:
		c.errorf(s.Pos(), "%T is not a statement Gantry runs", s)
	}
	return func(*run) error { return nil }
}

// topic compiles the topic of PUBLISH, KEEP and PUBLISH MODEL: a literal
// is checked once here, a computed topic on every run.
func (c *compiler) topic(e syntax.Expr) func(r *run) (string, error) {
	if t, ok := e.(*syntax.StringLit); ok {
		if err := checkTopic(t.Value); err != nil {
			c.errs = append(c.errs, &Error{Kind: c.kind, Def: c.def, Pos: t.Start, Err: err})
		}
		return func(*run) (string, error) { return t.Value, nil }
	}
	topic := c.expr(e)
	var pos syntax.Pos
	if e != nil {
		pos = e.Pos()
	}
	return func(r *run) (string, error) {
		v, err := topic(r)
		if err != nil {
			return "", err
		}
		t := v.Text()
		if err := checkTopic(t); err != nil {
			return "", r.fail(pos, err)
		}
		return t, nil
	}
}

// checkTopic checks a topic name LoT publishes to.
func checkTopic(t string) error {
	switch {
	case t == "":
		return errorf(ErrTopic, "the topic is empty")
	case len(t) > 65535:
		return errorf(ErrTopic, "the topic is %d bytes, over the MQTT limit of 65535", len(t))
	case strings.ContainsAny(t, "+#"):
		return errorf(ErrTopic, "topic %q has a wildcard; publish to a concrete topic", t)
	case strings.IndexByte(t, 0) >= 0 || !utf8.ValidString(t):
		return errorf(ErrTopic, "topic %q is not valid UTF-8 text", t)
	}
	return nil
}

// effectError is a refusal of the Host's Effects.
type effectError struct {
	what string // `PUBLISH TOPIC "a/b"`
	err  error
}

func (e *effectError) Error() string   { return e.what + ": " + e.err.Error() }
func (e *effectError) Unwrap() []error { return []error{ErrEffect, e.err} }

func (c *compiler) publish(s *syntax.PublishStmt) func(*run) error {
	topic, val, keep, pos := c.topic(s.Topic), c.expr(s.Value), s.Keep, s.Start
	return func(r *run) error {
		t, err := topic(r)
		if err != nil {
			return err
		}
		r.filterMissed = false
		v, err := val(r)
		if err != nil {
			return err
		}
		// A FILTER without a match skips the PUBLISH, also when a
		// transform (TRIM, ...) turned its EMPTY into empty text.
		if (r.filterMissed && (v.kind == KindEmpty || v.kind == KindString && v.s == "")) || (v.kind == KindBytes && v.s == "") {
			return nil
		}
		if r.host.Effects == nil {
			return r.fail(pos, errorf(ErrUnavailable, "the host has no Effects to publish with"))
		}
		if keep {
			err = r.host.Effects.Keep(t, v.Payload())
		} else {
			err = r.host.Effects.Publish(t, v.Payload(), false, 0)
		}
		if err != nil {
			what := "PUBLISH TOPIC "
			if keep {
				what = "KEEP TOPIC "
			}
			return r.fail(pos, &effectError{what: what + fmt.Sprintf("%q", t), err: err})
		}
		return nil
	}
}

func (c *compiler) ifStmt(s *syntax.IfStmt) func(*run) error {
	cond, then, els := c.expr(s.Cond), c.block(s.Then), c.block(s.Else)
	return func(r *run) error {
		v, err := cond(r)
		if err != nil {
			return err
		}
		if Truthy(v) {
			return runBlock(r, then)
		}
		return runBlock(r, els)
	}
}

type compiledCase struct {
	values []evalFn
	body   []stmtFn
}

// switchStmt runs the first CASE with a value equal (==) to the subject,
// else DEFAULT.
func (c *compiler) switchStmt(s *syntax.SwitchStmt) func(*run) error {
	subject := c.expr(s.Subject)
	cases := make([]compiledCase, len(s.Cases))
	for i, cs := range s.Cases {
		for _, v := range cs.Values {
			cases[i].values = append(cases[i].values, c.expr(v))
		}
		cases[i].body = c.block(cs.Body)
	}
	def := c.block(s.Default)
	return func(r *run) error {
		subj, err := subject(r)
		if err != nil {
			return err
		}
		for _, cs := range cases {
			for _, val := range cs.values {
				v, err := val(r)
				if err != nil {
					return err
				}
				if Equal(subj, v) {
					return runBlock(r, cs.body)
				}
			}
		}
		return runBlock(r, def)
	}
}

// loop is LOOP <body> UNTIL <cond>: the body runs at least once and at
// most Options.MaxLoopIterations times.
func (c *compiler) loop(s *syntax.LoopStmt) func(*run) error {
	body, until, pos := c.block(s.Body), c.expr(s.Until), s.Start
	return func(r *run) error {
		for i := 1; ; i++ {
			if err := runBlock(r, body); err != nil {
				return err
			}
			v, err := until(r)
			if err != nil {
				return err
			}
			if Truthy(v) {
				return nil
			}
			if i >= r.opts.MaxLoopIterations {
				return r.fail(pos, errorf(ErrLoopLimit, "LOOP ran %d times and UNTIL is still false (Options.MaxLoopIterations)", i))
			}
		}
	}
}

// triggerEvent is TRIGGER "<Event>" TO <Connector> [WITH <value>].
func (c *compiler) triggerEvent(s *syntax.TriggerEventStmt) func(*run) error {
	event, conn, pos := c.expr(s.Event), s.Connector, s.Start
	val := constant(Value{})
	if s.Value != nil {
		val = c.expr(s.Value)
	}
	return func(r *run) error {
		ev, v, err := both(r, event, val)
		if err != nil {
			return err
		}
		f, ok := r.host.Effects.(EventFirer)
		if !ok {
			return r.fail(pos, errorf(ErrUnavailable, "TRIGGER %q TO %s: the host cannot fire connector events", ev.Text(), conn))
		}
		if err := f.FireEvent(conn, ev.Text(), v.Payload()); err != nil {
			return r.fail(pos, &effectError{what: fmt.Sprintf("TRIGGER %q TO %s", ev.Text(), conn), err: err})
		}
		return nil
	}
}

// envStmt is KEEP ENV|SECRET and DELETE ENV|SECRET.
func (c *compiler) envStmt(s *syntax.EnvStmt) func(*run) error {
	name, pos, secret, del := c.expr(s.Name), s.Start, s.Secret, s.Delete
	val := constant(Value{})
	if s.Value != nil {
		val = c.expr(s.Value)
	}
	what := map[bool]string{false: "ENV", true: "SECRET"}[secret]
	return func(r *run) error {
		n, v, err := both(r, name, val)
		if err != nil {
			return err
		}
		w, ok := r.host.Env.(EnvWriter)
		if !ok {
			return r.fail(pos, errorf(ErrUnavailable, "%s %q: the host cannot store settings", what, n.Text()))
		}
		if del {
			err = w.DeleteEnv(n.Text(), secret)
		} else {
			err = w.SetEnv(n.Text(), v.Text(), secret)
		}
		if err != nil {
			return r.fail(pos, &effectError{what: fmt.Sprintf("%s %q", what, n.Text()), err: err})
		}
		return nil
	}
}
