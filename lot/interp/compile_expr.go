package interp

import (
	"fmt"
	"strconv"
	"strings"

	"gantry/lot/syntax"
)

// evalFn computes an expression in a run. Expressions are compiled once
// into a tree of closures: variables are resolved to slots, literal
// topics, paths, formats and regular expressions are prepared, so that
// evaluating walks no AST and allocates only for the values it builds.
type evalFn func(r *run) (Value, error)

// compiler turns the AST of one definition into closures.
type compiler struct {
	opts      *Options
	kind, def string
	slots     map[string]int // action variables to slots; nil in a model
	fields    map[string]int // model field names to indexes; nil in an action
	errs      []error
}

func (c *compiler) errorf(pos syntax.Pos, format string, args ...any) {
	c.errs = append(c.errs, &Error{Kind: c.kind, Def: c.def, Pos: pos, Err: errorf(ErrCompile, format, args...)})
}

// slot returns the slot of variable name, allocating it on first use.
func (c *compiler) slot(name string) int {
	if s, ok := c.slots[name]; ok {
		return s
	}
	s := len(c.slots)
	c.slots[name] = s
	return s
}

func constant(v Value) evalFn {
	return func(*run) (Value, error) { return v, nil }
}

// literal returns the text of a string or number literal.
func literal(e syntax.Expr) (string, bool) {
	switch e := e.(type) {
	case *syntax.StringLit:
		return e.Value, true
	case *syntax.NumberLit:
		return e.Text, true
	}
	return "", false
}

// expr compiles an expression.
func (c *compiler) expr(e syntax.Expr) evalFn {
	switch e := e.(type) {
	case *syntax.StringLit:
		return constant(String(e.Value))
	case *syntax.NumberLit:
		return constant(numberLit(e))
	case *syntax.BoolLit:
		return constant(Bool(e.Value))
	case *syntax.EmptyLit:
		return constant(Value{})
	case *syntax.VarRef:
		return c.varRef(e)
	case *syntax.Ident:
		return c.ident(e)
	case *syntax.PayloadExpr:
		return c.payload(e)
	case *syntax.TopicPositionExpr:
		return c.topicPosition(e)
	case *syntax.GetTopicExpr:
		return c.getTopic(e)
	case *syntax.GetJSONExpr:
		return c.getJSON(e)
	case *syntax.GetEnvExpr:
		return c.getEnv(e)
	case *syntax.TimestampExpr:
		return c.timestamp(e)
	case *syntax.RandomExpr:
		return c.random(e)
	case *syntax.ReplaceExpr:
		return c.replace(e)
	case *syntax.FilterExpr:
		return c.filter(e)
	case *syntax.TrimExpr:
		src := c.source(e.Source, e.Start)
		return func(r *run) (Value, error) {
			v, err := src(r)
			return String(strings.TrimSpace(v.Text())), err
		}
	case *syntax.SessionExpr:
		return c.session(e)
	case *syntax.CastExpr:
		return c.cast(e)
	case *syntax.UnaryExpr:
		return c.unary(e)
	case *syntax.BinaryExpr:
		return c.binary(e)
	case *syntax.CondExpr:
		return c.cond(e)
	case *syntax.ObjectLit:
		return c.object(e)
	case *syntax.ArrayLit:
		return c.array(e)
	case *syntax.UnsupportedExpr:
		c.errorf(e.Start, "%s is not supported by Gantry", e.Feature)
	case *syntax.RuleTest:
		c.errorf(e.Start, "%s %s is a rule condition, not a value", e.Subject, e.Op)
	case nil:
		c.errs = append(c.errs, &Error{Kind: c.kind, Def: c.def, Err: errorf(ErrCompile, "a value is missing")})
	default:
		c.errorf(e.Pos(), "%T is not a value", e)
	}
	return constant(Value{})
}

// numberLit is an int when written without fraction or exponent and in
// range, a float otherwise.
func numberLit(n *syntax.NumberLit) Value {
	if n.IsInt() {
		if i, err := strconv.ParseInt(n.Text, 10, 64); err == nil {
			return Int(i)
		}
	}
	return Float(n.Value)
}

// source compiles the source of FILTER or TRIM; an omitted source is
// PAYLOAD (FILTER USING REGEX "...").
func (c *compiler) source(e syntax.Expr, pos syntax.Pos) evalFn {
	if e == nil {
		return c.payload(&syntax.PayloadExpr{Start: pos})
	}
	return c.expr(e)
}

func (c *compiler) varRef(e *syntax.VarRef) evalFn {
	if c.slots == nil {
		c.errorf(e.Start, "variables do not exist in a model; refer to a field by its bare name %s", e.Name)
		return constant(Value{})
	}
	s := c.slot(e.Name)
	return func(r *run) (Value, error) { return r.vars[s], nil }
}

// ident is a bare name: a field in a model's expression, an error in an
// action.
func (c *compiler) ident(e *syntax.Ident) evalFn {
	i, ok := c.fields[e.Name]
	if !ok {
		if c.fields != nil {
			c.errorf(e.Start, "model %s has no field %s", c.def, e.Name)
		} else {
			c.errorf(e.Start, "%s is not a value: write {%s} for a variable or \"%s\" for text", e.Name, e.Name, e.Name)
		}
		return constant(Value{})
	}
	pos := e.Start
	return func(r *run) (Value, error) { return r.model.field(r, i, pos) }
}

func (c *compiler) payload(e *syntax.PayloadExpr) evalFn {
	if e.Bytes {
		return func(r *run) (Value, error) {
			return Value{kind: KindBytes, s: stringOf(r.ev.Payload)}, nil
		}
	}
	return func(r *run) (Value, error) { return textValue(r.ev.Payload), nil }
}

// topicPosition is TOPIC POSITION n: level n (from 1) of the message's
// topic, EMPTY past the last level (LOT.md §3.6). No message, or n not a
// whole number from 1, is an error.
func (c *compiler) topicPosition(e *syntax.TopicPositionExpr) evalFn {
	pos := e.Start
	if n, ok := e.Index.(*syntax.NumberLit); ok {
		v := numberLit(n)
		if v.kind != KindInt || v.i < 1 {
			c.errorf(n.Start, "TOPIC POSITION %s: positions are whole numbers from 1", n.Text)
			return constant(Value{})
		}
		return func(r *run) (Value, error) { return topicLevel(r, int(v.i), pos) }
	}
	index := c.expr(e.Index)
	return func(r *run) (Value, error) {
		v, err := index(r)
		if err != nil {
			return Value{}, err
		}
		n, ok := v.numeric()
		if !ok || n.kind != KindInt || n.i < 1 || n.i > 1<<16 {
			return Value{}, r.fail(pos, errorf(ErrTopic, "TOPIC POSITION %s: positions are whole numbers from 1", quoteForMsg(v)))
		}
		return topicLevel(r, int(n.i), pos)
	}
}

func topicLevel(r *run, n int, pos syntax.Pos) (Value, error) {
	t := r.ev.Topic
	if t == "" {
		return Value{}, r.fail(pos, errorf(ErrTopic, "TOPIC POSITION %d: the run has no message topic", n))
	}
	for ; n > 1; n-- {
		i := strings.IndexByte(t, '/')
		if i < 0 {
			return Value{}, nil
		}
		t = t[i+1:]
	}
	if i := strings.IndexByte(t, '/'); i >= 0 {
		t = t[:i]
	}
	return textOf(t), nil
}

// getTopic is GET TOPIC: the latest value of the topic, EMPTY when none.
func (c *compiler) getTopic(e *syntax.GetTopicExpr) evalFn {
	lookup := func(r *run, topic string) Value {
		if r.host.Topics == nil {
			return Value{}
		}
		b, _ := r.host.Topics.Lookup(topic)
		return textValue(b)
	}
	if t, ok := literal(e.Topic); ok {
		return func(r *run) (Value, error) { return lookup(r, t), nil }
	}
	topic := c.expr(e.Topic)
	return func(r *run) (Value, error) {
		t, err := topic(r)
		if err != nil {
			return Value{}, err
		}
		return lookup(r, t.Text()), nil
	}
}

// getJSON is GET JSON <path> IN <source>: null when the path is missing,
// an error when the source is not JSON.
func (c *compiler) getJSON(e *syntax.GetJSONExpr) evalFn {
	pos, src := e.Start, c.expr(e.Source)
	if p, ok := literal(e.Path); ok {
		segs := parsePath(p)
		return func(r *run) (Value, error) {
			v, err := src(r)
			if err != nil {
				return Value{}, err
			}
			return jsonAt(r, v, segs, pos)
		}
	}
	path := c.expr(e.Path)
	return func(r *run) (Value, error) {
		p, err := path(r)
		if err != nil {
			return Value{}, err
		}
		v, err := src(r)
		if err != nil {
			return Value{}, err
		}
		return jsonAt(r, v, parsePath(p.Text()), pos)
	}
}

func jsonAt(r *run, v Value, path []pathSeg, pos syntax.Pos) (Value, error) {
	switch v.kind {
	case KindEmpty, KindNull:
		return Null(), nil
	case KindInt, KindFloat, KindBool:
		if len(path) == 0 {
			return v, nil
		}
		return Null(), nil
	}
	raw, found, err := lookupJSON(v.s, path)
	if err != nil {
		return Value{}, r.fail(pos, fmt.Errorf("GET JSON: %w", err))
	}
	if !found {
		return Null(), nil
	}
	out, err := valueOfJSON(raw)
	if err != nil {
		return Value{}, r.fail(pos, err)
	}
	return out, nil
}

// getEnv is GET ENV and GET SECRET.
func (c *compiler) getEnv(e *syntax.GetEnvExpr) evalFn {
	name := c.expr(e.Name)
	secret := e.Secret
	return func(r *run) (Value, error) {
		n, err := name(r)
		if err != nil || r.host.Env == nil {
			return Value{}, err
		}
		var s string
		var ok bool
		if secret {
			s, ok = r.host.Env.Secret(n.Text())
		} else {
			s, ok = r.host.Env.Env(n.Text())
		}
		if !ok {
			return Value{}, nil
		}
		return String(s), nil
	}
}

func (c *compiler) timestamp(e *syntax.TimestampExpr) evalFn {
	if e.Format == nil {
		f := compileTimestamp("")
		return func(r *run) (Value, error) { return f.value(r.opts.Clock(), r.opts.Location), nil }
	}
	if s, ok := literal(e.Format); ok {
		f := compileTimestamp(s)
		return func(r *run) (Value, error) { return f.value(r.opts.Clock(), r.opts.Location), nil }
	}
	format := c.expr(e.Format)
	return func(r *run) (Value, error) {
		s, err := format(r)
		if err != nil {
			return Value{}, err
		}
		return compileTimestamp(s.Text()).value(r.opts.Clock(), r.opts.Location), nil
	}
}

func (c *compiler) session(e *syntax.SessionExpr) evalFn {
	name := e.Name
	return func(r *run) (Value, error) {
		s := &r.ev.Session
		switch name {
		case "CLIENTID":
			return textOf(s.ClientID), nil
		case "USER":
			return textOf(s.User), nil
		case "ENDPOINT":
			return textOf(s.Endpoint), nil
		case "CLEANSESSION":
			return Bool(s.CleanSession), nil
		case "DISCONNECTREASON":
			return textOf(s.DisconnectReason), nil
		case "SUBSCRIBETOPIC":
			return textOf(s.SubscribeTopic), nil
		case "SUBSCRIBEQOS":
			return Int(int64(s.SubscribeQoS)), nil
		}
		return Value{}, nil
	}
}

func (c *compiler) cast(e *syntax.CastExpr) evalFn {
	x, t, pos := c.expr(e.X), e.Type, e.AsPos
	return func(r *run) (Value, error) {
		v, err := x(r)
		if err != nil {
			return Value{}, err
		}
		if v, err = Cast(v, t); err != nil {
			return Value{}, r.fail(pos, err)
		}
		return v, nil
	}
}

func (c *compiler) cond(e *syntax.CondExpr) evalFn {
	cond, then, els := c.expr(e.Cond), c.expr(e.Then), c.expr(e.Else)
	return func(r *run) (Value, error) {
		v, err := cond(r)
		if err != nil {
			return Value{}, err
		}
		if Truthy(v) {
			return then(r)
		}
		return els(r)
	}
}
