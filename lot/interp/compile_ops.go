package interp

import (
	"regexp"
	"strings"

	"gantry/lot/syntax"
)

// both evaluates two operands in order.
func both(r *run, x, y evalFn) (a, b Value, err error) {
	if a, err = x(r); err != nil {
		return
	}
	b, err = y(r)
	return
}

func (c *compiler) unary(e *syntax.UnaryExpr) evalFn {
	x, pos := c.expr(e.X), e.OpPos
	if e.Op == syntax.OpNot {
		return func(r *run) (Value, error) {
			v, err := x(r)
			return Bool(!Truthy(v)), err
		}
	}
	return func(r *run) (Value, error) {
		v, err := x(r)
		if err != nil {
			return Value{}, err
		}
		if v, err = negate(v); err != nil {
			return Value{}, r.fail(pos, err)
		}
		return v, nil
	}
}

func (c *compiler) binary(e *syntax.BinaryExpr) evalFn {
	x, y, op, pos := c.expr(e.X), c.expr(e.Y), e.Op, e.OpPos
	switch op {
	case syntax.OpAnd, syntax.OpOr:
		return logical(op == syntax.OpAnd, x, y)
	case syntax.OpAdd:
		return func(r *run) (Value, error) {
			a, b, err := both(r, x, y)
			if err != nil {
				return Value{}, err
			}
			v, err := add(a, b, r.opts.MaxValueBytes)
			if err != nil {
				return Value{}, r.fail(pos, err)
			}
			return v, nil
		}
	case syntax.OpSub, syntax.OpMul, syntax.OpDiv, syntax.OpMod:
		return func(r *run) (Value, error) {
			a, b, err := both(r, x, y)
			if err != nil {
				return Value{}, err
			}
			v, err := arithmetic(op, a, b)
			if err != nil {
				return Value{}, r.fail(pos, err)
			}
			return v, nil
		}
	}
	return func(r *run) (Value, error) {
		a, b, err := both(r, x, y)
		if err != nil {
			return Value{}, err
		}
		return Bool(compare(op, a, b)), nil
	}
}

// logical is AND and OR, evaluated left to right with short circuit.
func logical(and bool, x, y evalFn) evalFn {
	return func(r *run) (Value, error) {
		a, err := x(r)
		if err != nil {
			return Value{}, err
		}
		if Truthy(a) != and {
			return Bool(!and), nil
		}
		b, err := y(r)
		return Bool(Truthy(b)), err
	}
}

// random is RANDOM UUID, RANDOM INT BETWEEN a AND b (both included) and
// RANDOM DOUBLE BETWEEN a AND b (b excluded); bounds given in the wrong
// order are swapped.
func (c *compiler) random(e *syntax.RandomExpr) evalFn {
	if e.Kind == syntax.RandomUUID {
		return func(r *run) (Value, error) { return String(uuid4(r.opts.Random)), nil }
	}
	lo, hi, pos := c.expr(e.Min), c.expr(e.Max), e.Start
	if e.Kind == syntax.RandomInt {
		return func(r *run) (Value, error) {
			a, b, err := bounds(r, lo, hi, syntax.TypeInt, pos)
			if err != nil {
				return Value{}, err
			}
			span := uint64(b.i-a.i) + 1 // 0 when the range is all of int64
			u := r.opts.Random.Uint64()
			if span != 0 {
				u %= span
			}
			return Int(a.i + int64(u)), nil
		}
	}
	return func(r *run) (Value, error) {
		a, b, err := bounds(r, lo, hi, syntax.TypeDouble, pos)
		if err != nil {
			return Value{}, err
		}
		u := float64(r.opts.Random.Uint64()>>11) / (1 << 53)
		return Float(a.f + (b.f-a.f)*u), nil
	}
}

// bounds evaluates the bounds of RANDOM as INT or DOUBLE, lowest first.
func bounds(r *run, lo, hi evalFn, t syntax.TypeName, pos syntax.Pos) (a, b Value, err error) {
	if a, b, err = both(r, lo, hi); err != nil {
		return
	}
	if a, err = Cast(a, t); err == nil {
		b, err = Cast(b, t)
	}
	if err != nil {
		return a, b, r.fail(pos, err)
	}
	if compareNumbers(a, b) > 0 {
		a, b = b, a
	}
	return a, b, nil
}

// uuid4 returns a random version 4 UUID.
func uuid4(src Random) string {
	var u [16]byte
	x, y := src.Uint64(), src.Uint64()
	for i := 0; i < 8; i++ {
		u[i], u[8+i] = byte(x>>(8*i)), byte(y>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return string(b)
}

// replace is REPLACE <find> WITH <with> IN <source>: every occurrence
// replaced; an empty <find> leaves the source as it is.
func (c *compiler) replace(e *syntax.ReplaceExpr) evalFn {
	find, with, src, pos := c.expr(e.Find), c.expr(e.With), c.source(e.Source, e.Start), e.Start
	return func(r *run) (Value, error) {
		f, w, err := both(r, find, with)
		if err != nil {
			return Value{}, err
		}
		s, err := src(r)
		if err != nil {
			return Value{}, err
		}
		text, old, repl := s.Text(), f.Text(), w.Text()
		if old == "" {
			return textOf(text), nil
		}
		if n := strings.Count(text, old); len(text)+n*(len(repl)-len(old)) > r.opts.MaxValueBytes {
			return Value{}, r.fail(pos, errorf(ErrTooLarge, "REPLACE would make a text over the limit of %d bytes", r.opts.MaxValueBytes))
		}
		return textOf(strings.ReplaceAll(text, old, repl)), nil
	}
}

// filter is FILTER <source> USING REGEX <re>: the first match. No match
// gives EMPTY and skips the PUBLISH or KEEP being computed (LOT.md §3.4).
func (c *compiler) filter(e *syntax.FilterExpr) evalFn {
	src, pos := c.source(e.Source, e.Start), e.Start
	match := func(r *run, re *regexp.Regexp) (Value, error) {
		s, err := src(r)
		if err != nil {
			return Value{}, err
		}
		text := s.Text()
		loc := re.FindStringIndex(text)
		if loc == nil {
			r.filterMissed = true
			return Value{}, nil
		}
		return textOf(text[loc[0]:loc[1]]), nil
	}
	if p, ok := literal(e.Regex); ok {
		re, err := compileRegex(p, c.opts.MaxRegexBytes)
		if err != nil {
			c.errs = append(c.errs, &Error{Kind: c.kind, Def: c.def, Pos: e.Regex.Pos(), Err: err})
			return constant(Value{})
		}
		return func(r *run) (Value, error) { return match(r, re) }
	}
	pattern, cache := c.expr(e.Regex), new(regexCache)
	return func(r *run) (Value, error) {
		p, err := pattern(r)
		if err != nil {
			return Value{}, err
		}
		re, err := cache.get(p.Text(), r.opts.MaxRegexBytes)
		if err != nil {
			return Value{}, r.fail(pos, err)
		}
		return match(r, re)
	}
}

// object is a JSON object literal { "k": <expr>, ... }.
func (c *compiler) object(e *syntax.ObjectLit) evalFn {
	keys := make([]string, len(e.Fields))
	vals := make([]evalFn, len(e.Fields))
	for i, f := range e.Fields {
		keys[i], vals[i] = f.Key, c.expr(f.Value)
	}
	pos := e.Start
	return func(r *run) (Value, error) {
		b := make([]byte, 0, 64)
		b = append(b, '{')
		for i, k := range keys {
			v, err := vals[i](r)
			if err != nil {
				return Value{}, err
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(append(appendJSONString(b, k), ':'), v)
			if len(b) > r.opts.MaxValueBytes {
				return Value{}, r.fail(pos, errorf(ErrTooLarge, "JSON object over the limit of %d bytes", r.opts.MaxValueBytes))
			}
		}
		return Value{kind: KindJSON, s: string(append(b, '}'))}, nil
	}
}

// array is a JSON array literal [ <expr>, ... ].
func (c *compiler) array(e *syntax.ArrayLit) evalFn {
	elems := make([]evalFn, len(e.Elems))
	for i, x := range e.Elems {
		elems[i] = c.expr(x)
	}
	pos := e.Start
	return func(r *run) (Value, error) {
		b := make([]byte, 0, 64)
		b = append(b, '[')
		for i, el := range elems {
			v, err := el(r)
			if err != nil {
				return Value{}, err
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, v)
			if len(b) > r.opts.MaxValueBytes {
				return Value{}, r.fail(pos, errorf(ErrTooLarge, "JSON array over the limit of %d bytes", r.opts.MaxValueBytes))
			}
		}
		return Value{kind: KindJSON, s: string(append(b, ']'))}, nil
	}
}
