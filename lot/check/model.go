package check

import (
	"fmt"

	"gantry/lot/syntax"
)

func (c *checker) model(m *syntax.Model) {
	c.filterLit(m.Topic, "the topic of model "+m.Name)
	c.parent(m)
	if m.Format != "" && m.Format != "JSON" {
		c.errorf(m.Start, "remove WITH FORMAT: Gantry publishes models as JSON", "model format %s is not supported", m.Format)
	}
	for _, s := range m.Unsupported {
		c.errorf(s.Start, "database connectors are not supported", "%s is not supported by Gantry", s.Feature)
	}
	names, _ := c.modelFields(m.Name, 0)
	c.fields(m, m.Fields, names)
	if m.Topic != nil && hasTopicField(m.Fields) && !hasTrigger(m.Fields) {
		c.warnf(m.NamePos, "add AS TRIGGER to the field whose update should publish the model",
			"model %s has no AS TRIGGER field, so it never publishes", m.Name)
	}
}

// parent checks FROM: the parent exists and the chain has no cycle.
func (c *checker) parent(m *syntax.Model) {
	if m.From == "" {
		return
	}
	name := m.From
	for i := 0; i < maxParents; i++ {
		if name == m.Name {
			c.errorf(m.FromPos, "", "model %s inherits from itself through FROM", m.Name)
			return
		}
		p, ok := c.models[name]
		if !ok || p.From == "" {
			break
		}
		name = p.From
	}
	if _, ok := c.modelFields(m.From, 0); !ok {
		c.errorf(m.FromPos, c.suggestModel(m.From), "unknown parent model %s", m.From)
	}
}

// fields checks a list of fields (a model's, or an ARRAY's items).
func (c *checker) fields(m *syntax.Model, fields []*syntax.Field, names []string) {
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.Name] {
			c.errorf(f.NamePos, "", "field %q is declared twice in model %s", f.Name, m.Name)
		}
		seen[f.Name] = true
		c.field(m, f, names)
	}
}

func (c *checker) field(m *syntax.Model, f *syntax.Field, names []string) {
	c.filterLit(f.Topic, fmt.Sprintf("field %q", f.Name))
	if f.IsTrigger && f.Topic == nil {
		c.errorf(f.TriggerPos, `write ADD <TYPE> "name" WITH TOPIC "t" AS TRIGGER`,
			"AS TRIGGER needs a field with WITH TOPIC")
	}
	if f.IsTrigger && f.Type == syntax.TypeTimestamp {
		c.warnf(f.TriggerPos, "trigger on the data field instead", "a TIMESTAMP field as trigger publishes the model on every clock update")
	}
	if f.Collection {
		if _, ok := c.modelFields(f.Of, 0); !ok {
			c.errorf(f.OfPos, c.suggestModel(f.Of), "unknown model %s in ADD COLLECTION", f.Of)
		}
	}
	if f.Value != nil {
		syntax.Inspect(f.Value, func(n syntax.Node) bool { return c.fieldExpr(m, n, names) })
	}
	c.fields(m, f.Items, names)
}

// fieldExpr checks a node of a field's value expression, where bare names
// are fields of the model.
func (c *checker) fieldExpr(m *syntax.Model, n syntax.Node, names []string) bool {
	switch n := n.(type) {
	case *syntax.Ident:
		if !contains(names, n.Name) {
			hint := suggestName(n.Name, names)
			if hint == "" {
				hint = fmt.Sprintf(`write "%s" for text`, n.Name)
			}
			c.errorf(n.Start, hint, "model %s has no field %s", m.Name, n.Name)
		}
	case *syntax.VarRef:
		c.errorf(n.Start, fmt.Sprintf("refer to a field by its bare name: %s", n.Name),
			"variables do not exist in a model")
	case *syntax.PayloadExpr, *syntax.TopicPositionExpr, *syntax.SessionExpr:
		c.errorf(n.Pos(), "read a topic with GET TOPIC or a field by its name", "%s has no value in a model field", nodeWord(n))
	case *syntax.GetTopicExpr:
		c.nameExpr(n.Topic, "GET TOPIC")
	case *syntax.FilterExpr:
		c.regex(n.Regex, "FILTER")
	case *syntax.UnsupportedExpr:
		c.errorf(n.Start, "database connectors are not supported", "%s is not supported by Gantry", n.Feature)
	}
	return true
}

func nodeWord(n syntax.Node) string {
	switch n := n.(type) {
	case *syntax.PayloadExpr:
		return "PAYLOAD"
	case *syntax.TopicPositionExpr:
		return "TOPIC POSITION"
	case *syntax.SessionExpr:
		return n.Name
	}
	return fmt.Sprintf("%T", n)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasTopicField(fields []*syntax.Field) bool {
	for _, f := range fields {
		if f.Topic != nil || hasTopicField(f.Items) {
			return true
		}
	}
	return false
}

func hasTrigger(fields []*syntax.Field) bool {
	for _, f := range fields {
		if f.IsTrigger || hasTrigger(f.Items) {
			return true
		}
	}
	return false
}
