package interp

import (
	"errors"
	"slices"

	"gantry/lot/syntax"
)

// maxModelChain bounds a FROM chain.
const maxModelChain = 32

// Model is a compiled DEFINE MODEL, its FROM parents' fields included. It
// is immutable and safe for concurrent use.
//
// A model with AS TRIGGER fields publishes when a message arrives on one
// of their topics (Triggers): the runtime maps that topic to an Instance
// (which, for a wildcard model, binds the '+' levels) and calls Evaluate
// for the JSON to publish on Instance.Topic. A model with a topic and
// without COLLAPSED also explodes JSON arriving on its topic (Explode).
type Model struct {
	def    *syntax.Model
	chain  []*syntax.Model // the FROM chain, root first, def last
	opts   Options
	topic  *pattern // WITH TOPIC; nil for a template
	fields []*modelField
	index  map[string]int // field name to index in fields
}

// modelField is one ADD line, after inheritance.
type modelField struct {
	name    string
	typ     syntax.TypeName
	pos     syntax.Pos
	owner   string   // the model that declared it, whose source pos is in
	topic   *pattern // WITH TOPIC; nil without
	value   evalFn   // WITH <expr>; nil without
	trigger bool
	items   []*modelField // ADD ARRAY item fields
	coll    bool          // ADD COLLECTION
}

// CompileModel compiles a model. Its FROM parent, if any, is found
// through models, already compiled: compile parents first, and recompile
// children when a parent changes. opts may be nil for the defaults.
func CompileModel(m *syntax.Model, models Models, opts *Options) (*Model, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cm := &Model{def: m, opts: o, chain: []*syntax.Model{m}}
	if err := cm.inherit(models); err != nil {
		return nil, err
	}
	if m.Topic != nil {
		cm.topic = newPattern(m.Topic.Value)
	}
	c := &compiler{opts: &cm.opts, kind: "model", def: m.Name, fields: map[string]int{}}
	cm.flatten(c)
	cm.index = c.fields
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return cm, nil
}

// inherit resolves the FROM chain.
func (cm *Model) inherit(models Models) error {
	m := cm.def
	if m.From == "" {
		return nil
	}
	fail := func(format string, args ...any) error {
		return &Error{Kind: "model", Def: m.Name, Pos: m.FromPos, Err: errorf(ErrUnknown, format, args...)}
	}
	var parent *Model
	var ok bool
	if models != nil {
		parent, ok = models.Model(m.From)
	}
	if !ok || parent == nil {
		return fail("unknown parent model %s", m.From)
	}
	for _, p := range parent.chain {
		if p.Name == m.Name {
			return fail("model %s inherits from itself through FROM", m.Name)
		}
	}
	if len(parent.chain) >= maxModelChain {
		return fail("the FROM chain of %s is longer than %d models", m.Name, maxModelChain)
	}
	cm.chain = append(slices.Clone(parent.chain), m)
	return nil
}

// flatten lists the fields of the chain, parents first, a field redefined
// by a child keeping its place (LOT.md §5.7), and compiles them. Field
// names are known before any expression is compiled, so an expression may
// name any field of the model.
func (cm *Model) flatten(c *compiler) {
	var decl []*syntax.Field
	var owners []string
	for _, m := range cm.chain {
		for _, f := range m.Fields {
			if f == nil {
				continue
			}
			if i, ok := c.fields[f.Name]; ok {
				decl[i], owners[i] = f, m.Name
				continue
			}
			c.fields[f.Name] = len(decl)
			decl, owners = append(decl, f), append(owners, m.Name)
		}
	}
	for i, f := range decl {
		c.def = owners[i]
		cm.fields = append(cm.fields, c.field(f, owners[i]))
	}
	c.def = cm.def.Name
}

func (c *compiler) field(f *syntax.Field, owner string) *modelField {
	mf := &modelField{name: f.Name, typ: f.Type, pos: f.Start, owner: owner,
		trigger: f.IsTrigger, coll: f.Collection}
	if f.Topic != nil {
		mf.topic = newPattern(f.Topic.Value)
	}
	if f.Value != nil {
		mf.value = c.expr(f.Value)
	}
	for _, it := range f.Items {
		if it != nil {
			mf.items = append(mf.items, c.field(it, owner))
		}
	}
	return mf
}

// Name returns the model's name.
func (m *Model) Name() string { return m.def.Name }

// Definition returns the model as parsed.
func (m *Model) Definition() *syntax.Model { return m.def }

// Topic returns the WITH TOPIC of the model, possibly with wildcards; ""
// for a template used only by PUBLISH MODEL.
func (m *Model) Topic() string {
	if m.topic == nil {
		return ""
	}
	return m.topic.text
}

// Collapsed reports COLLAPSED.
func (m *Model) Collapsed() bool { return m.def.Collapsed }

// Retain reports whether the model's publications are retained: RETAIN,
// WITH RETAIN or KEEP in its header.
func (m *Model) Retain() bool { return m.def.Retain || m.def.Keep }

// QoS returns the QoS of the model's publications (QOS0..QOS2).
func (m *Model) QoS() byte { return byte(m.def.QoS) }

// Explodes reports whether JSON arriving on the model's topic is
// republished key by key (LOT.md §5.4): models with a topic and without
// COLLAPSED.
func (m *Model) Explodes() bool { return m.topic != nil && !m.def.Collapsed }

// Triggers returns the topic filters of the AS TRIGGER fields, in field
// order: a message on any of them publishes the model. A model without
// them never publishes on its own.
func (m *Model) Triggers() []string {
	var out []string
	for _, f := range m.fields {
		if f.trigger && f.topic != nil {
			out = append(out, f.topic.text)
		}
	}
	return out
}

// Sources returns the topic filters of every WITH TOPIC field, triggers
// included: the topics whose latest values Evaluate reads.
func (m *Model) Sources() []string {
	var out []string
	var walk func([]*modelField)
	walk = func(fs []*modelField) {
		for _, f := range fs {
			if f.topic != nil {
				out = append(out, f.topic.text)
			}
			walk(f.items)
		}
	}
	walk(m.fields)
	return out
}

// Fields returns the field names in output order.
func (m *Model) Fields() []string {
	out := make([]string, len(m.fields))
	for i, f := range m.fields {
		out[i] = f.name
	}
	return out
}

// Instance is one instance of a model: the singleton of a model without
// wildcards, or, for a wildcard model, the one bound to the values of the
// wildcard levels of a trigger topic (LOT.md §5.3).
type Instance struct {
	// Key identifies the instance among those of its model: the wildcard
	// values joined by '/', "" for a model without wildcards.
	Key string
	// Topic is where the instance publishes: the model topic with its
	// wildcards replaced by Bindings in order; "" for a template.
	Topic string
	// Bindings are the values of the wildcard levels, in order.
	Bindings []string
}

// Instance returns the instance that a message on topic publishes: the
// first AS TRIGGER field whose topic filter matches binds the wildcard
// values ('+' one level, '#' the rest), by order of appearance, which then
// fill the wildcards of the model topic and of the other fields' topics.
// ok is false when no trigger matches or the model topic has more
// wildcards than the trigger bound.
func (m *Model) Instance(topic string) (inst Instance, ok bool) {
	for _, f := range m.fields {
		if !f.trigger || f.topic == nil {
			continue
		}
		b, ok := f.topic.match(topic)
		if !ok {
			continue
		}
		inst := Instance{Key: joinLevels(b), Bindings: b}
		if m.topic != nil {
			if inst.Topic, ok = m.topic.bind(b); !ok {
				return Instance{}, false
			}
		}
		return inst, true
	}
	return Instance{}, false
}

// Evaluate builds the JSON object of one instance from the latest values
// that host.Topics gives (LOT.md §5.2): fields in declaration order (parent
// fields first), WITH TOPIC fields read with the instance's bindings,
// literals and expressions evaluated now, every value coerced to its
// field's type; a field without value is null. host.Effects is not used.
func (m *Model) Evaluate(host *Host, inst Instance) ([]byte, error) {
	r := newRun("model", m.Name(), &m.opts, host, &noEvent)
	defer r.release()
	mr := newModelRun(m, inst.Bindings, nil, nil)
	r.model = mr
	var out []byte
	err := r.guard(func(r *run) (err error) {
		out, err = mr.render(r, false)
		return err
	})
	return out, err
}

// publishJSON builds the JSON of PUBLISH MODEL in the run of an action:
// assigned values where set, the model's defaults elsewhere.
func (m *Model) publishJSON(caller *run, assigned []Value, set []bool) ([]byte, error) {
	r := newRun("model", m.Name(), &m.opts, caller.host, &noEvent)
	defer r.release()
	r.budget = caller.budget
	mr := newModelRun(m, nil, assigned, set)
	r.model = mr
	return mr.render(r, m.opts.ModelRootKey && !m.def.Collapsed)
}
