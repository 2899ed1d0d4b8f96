package interp

import (
	"fmt"
	"strings"

	"gantry/lot/syntax"
)

// modelRun is the state of one evaluation of a model: each field is
// computed once, on first use (a field's expression may name another
// field), and a field that needs itself is an error.
type modelRun struct {
	m        *Model
	bindings []string
	vals     []Value
	state    []fieldState
	assigned []Value // PUBLISH MODEL: the values set by the action
	set      []bool
}

type fieldState uint8

const (
	fieldTodo fieldState = iota
	fieldBusy
	fieldDone
)

func newModelRun(m *Model, bindings []string, assigned []Value, set []bool) *modelRun {
	return &modelRun{m: m, bindings: bindings, vals: make([]Value, len(m.fields)),
		state: make([]fieldState, len(m.fields)), assigned: assigned, set: set}
}

// field returns the value of field i, computing it on first use.
func (mr *modelRun) field(r *run, i int, pos syntax.Pos) (Value, error) {
	switch mr.state[i] {
	case fieldDone:
		return mr.vals[i], nil
	case fieldBusy:
		return Value{}, r.fail(pos, errorf(ErrCompile, "field %q depends on itself", mr.m.fields[i].name))
	}
	mr.state[i] = fieldBusy
	f := mr.m.fields[i]
	var v Value
	var err error
	if mr.set != nil && mr.set[i] {
		v = mr.assigned[i]
	} else if v, err = mr.source(r, f); err != nil {
		return Value{}, err
	}
	if v, err = coerce(v, f.typ); err != nil {
		return Value{}, mr.failIn(r, f, fmt.Errorf("field %q: %w", f.name, err))
	}
	mr.vals[i], mr.state[i] = v, fieldDone
	return v, nil
}

// failIn names the model that declared f, whose source f.pos is in.
func (mr *modelRun) failIn(r *run, f *modelField, err error) error {
	return &Error{Kind: "model", Def: f.owner, Pos: f.pos, Err: err}
}

// source computes a field's value before coercion.
func (mr *modelRun) source(r *run, f *modelField) (Value, error) {
	switch {
	case f.topic != nil:
		t, ok := f.topic.bind(mr.bindings)
		if !ok || r.host.Topics == nil {
			return Value{}, nil
		}
		b, _ := r.host.Topics.Lookup(t)
		return textValue(b), nil
	case f.value != nil:
		def := r.def
		r.def = f.owner
		v, err := f.value(r)
		r.def = def
		return v, err
	case len(f.items) > 0:
		return mr.items(r, f)
	case f.coll:
		return Value{kind: KindJSON, s: "[]"}, nil
	}
	return Value{}, nil
}

// items is the value of ADD ARRAY: a JSON array of its item fields'
// values, in order.
func (mr *modelRun) items(r *run, f *modelField) (Value, error) {
	b := []byte{'['}
	for i, it := range f.items {
		v, err := mr.source(r, it)
		if err == nil {
			v, err = coerce(v, it.typ)
		}
		if err != nil {
			return Value{}, mr.failIn(r, it, fmt.Errorf("item %q of %q: %w", it.name, f.name, err))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, v)
	}
	return Value{kind: KindJSON, s: string(append(b, ']'))}, nil
}

// coerce converts a field value to the field's type. EMPTY and null stay
// as they are (null in the JSON); an untyped field turns numeric and
// boolean text into numbers and booleans; TIMESTAMP fields keep the text.
func coerce(v Value, t syntax.TypeName) (Value, error) {
	if v.blank() {
		return v, nil
	}
	switch t {
	case syntax.TypeDynamic:
		if v.kind != KindString {
			return v, nil
		}
		if n, ok := parseNumber(v.s); ok {
			return n, nil
		}
		if b, ok := boolText(v.s); ok {
			return Bool(b), nil
		}
		return v, nil
	case syntax.TypeTimestamp:
		return String(v.Text()), nil
	}
	return Cast(v, t)
}

// render evaluates every field and writes the JSON object, nested under
// the model's name when rootKey is set.
func (mr *modelRun) render(r *run, rootKey bool) ([]byte, error) {
	b := make([]byte, 0, 64+16*len(mr.m.fields))
	if rootKey {
		b = append(appendJSONString(append(b, '{'), mr.m.Name()), ':')
	}
	b = append(b, '{')
	for i, f := range mr.m.fields {
		v, err := mr.field(r, i, f.pos)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(append(appendJSONString(b, f.name), ':'), v)
		if len(b) > r.opts.MaxValueBytes {
			return nil, r.fail(mr.m.def.Start, errorf(ErrTooLarge, "the JSON of model %s is over the limit of %d bytes", mr.m.Name(), r.opts.MaxValueBytes))
		}
	}
	b = append(b, '}')
	if rootKey {
		b = append(b, '}')
	}
	return b, nil
}

// pattern is a topic or topic filter of a model, split into levels.
type pattern struct {
	text   string
	levels []string
	wild   int // number of '+' and '#' levels
}

func newPattern(t string) *pattern {
	p := &pattern{text: t, levels: strings.Split(t, "/")}
	for _, l := range p.levels {
		if l == "+" || l == "#" {
			p.wild++
		}
	}
	return p
}

// match matches a concrete topic against the filter (MQTT rules: '+' one
// level, '#' the rest, possibly none; a filter starting with a wildcard
// does not match $ topics) and returns the wildcard values.
func (p *pattern) match(topic string) ([]string, bool) {
	if p.wild > 0 && strings.HasPrefix(topic, "$") && (p.levels[0] == "+" || p.levels[0] == "#") {
		return nil, false
	}
	levels := strings.Split(topic, "/")
	var binds []string
	for i, l := range p.levels {
		if l == "#" { // "a/#" also matches "a", binding ""
			return append(binds, strings.Join(levels[i:], "/")), true
		}
		if i >= len(levels) {
			return nil, false
		}
		switch {
		case l == "+":
			binds = append(binds, levels[i])
		case l != levels[i]:
			return nil, false
		}
	}
	return binds, len(levels) == len(p.levels)
}

// bind replaces the wildcards of the pattern by bindings, in order; ok is
// false when there are fewer bindings than wildcards.
func (p *pattern) bind(bindings []string) (string, bool) {
	if p.wild == 0 {
		return p.text, true
	}
	if len(bindings) < p.wild {
		return "", false
	}
	levels := make([]string, len(p.levels))
	k := 0
	for i, l := range p.levels {
		levels[i] = l
		if l == "+" || l == "#" {
			levels[i] = bindings[k]
			k++
		}
	}
	return strings.Join(levels, "/"), true
}

func joinLevels(b []string) string { return strings.Join(b, "/") }

// Explode republishes a JSON object that arrived on the model's topic key
// by key (LOT.md §5.4): each member goes to <topic>/<key>, a nested object
// one level deeper; strings without quotes, numbers in their shortest
// form, arrays as JSON text. topic is the concrete topic the object
// arrived on. A payload that is not a JSON object is not exploded; keys
// that would make an invalid topic (a wildcard) are skipped; at most
// Options.MaxExplodeTopics topics are published. The first error of emit
// stops the explosion.
func (m *Model) Explode(topic string, payload []byte, emit func(topic string, payload []byte) error) error {
	doc := stringOf(payload)
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil
	}
	fail := func(err error) error { return &Error{Kind: "model", Def: m.Name(), Pos: m.def.Start, Err: err} }
	if _, err := validJSON(doc); err != nil {
		return fail(fmt.Errorf("explode %q: %w", topic, err))
	}
	x := exploder{doc: doc, max: m.opts.MaxExplodeTopics, emit: emit}
	if err := x.object(i, topic); err != nil {
		return fail(fmt.Errorf("explode %q: %w", topic, err))
	}
	return nil
}

type exploder struct {
	doc  string
	n    int
	max  int
	emit func(topic string, payload []byte) error
}

func (x *exploder) object(i int, prefix string) (err error) {
	eachMember(x.doc, i, func(rawKey string, at int) bool {
		t := prefix + "/" + decodeString(rawKey)
		if checkTopic(t) != nil {
			return true
		}
		if x.doc[at] == '{' {
			err = x.object(at, t)
			return err == nil
		}
		if x.n++; x.n > x.max {
			err = errorf(ErrTooLarge, "more than %d topics (Options.MaxExplodeTopics)", x.max)
			return false
		}
		end, _ := skipValue(x.doc, at, 0)
		v, verr := valueOfJSON(x.doc[at:end])
		if verr != nil {
			v = String(x.doc[at:end])
		}
		if e := x.emit(t, v.Payload()); e != nil {
			err = &effectError{what: fmt.Sprintf("PUBLISH %q", t), err: e}
		}
		return err == nil
	})
	return err
}
