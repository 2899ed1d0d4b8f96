package runtime

import (
	"slices"
	"strings"

	"gantry/lot/syntax"
)

// watchAll is the filter of a deployment that reads topics it cannot name
// before it runs (GET TOPIC of a computed topic).
const watchAll = "#"

// watchFilters lists the topic filters the trigger client must subscribe
// to for a deployment: the ON TOPIC and ON CHANGE filters, the models'
// WITH TOPIC fields and exploded topics, and every topic a GET TOPIC, a
// TOPIC EXISTS or a GET TOPIC ... IS names, so that the topic cache holds
// what LoT reads. A GET TOPIC of a computed topic needs every topic ('#').
// A node without LoT subscribes to nothing, and its messages cost LoT
// nothing.
func watchFilters(d *deployment) []string {
	set := map[string]bool{}
	for _, a := range d.onMessage {
		set[a.filter] = true
	}
	for _, m := range d.models {
		for _, f := range m.Sources() {
			set[f] = true
		}
		if m.Explodes() {
			set[m.Topic()] = true
		}
	}
	for _, pd := range d.parsed {
		syntax.Inspect(pd, func(n syntax.Node) bool {
			switch x := n.(type) {
			case *syntax.GetTopicExpr:
				addLiteral(set, x.Topic)
			case *syntax.RuleTest:
				switch strings.ToUpper(x.Subject) {
				case "GET TOPIC":
					addLiteral(set, x.Topic)
				case "TOPIC":
					addLiteral(set, x.Arg)
				}
			}
			return true
		})
	}
	var out []string
	for f := range set {
		// '#' covers every other filter but those of '$' topics.
		if f != "" && (!set[watchAll] || f == watchAll || strings.HasPrefix(f, "$")) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// addLiteral adds the topic of a string literal, or '#' for anything else.
func addLiteral(set map[string]bool, x syntax.Expr) {
	if lit, ok := x.(*syntax.StringLit); ok {
		set[lit.Value] = true
		return
	}
	set[watchAll] = true
}

// watch makes the trigger client's subscriptions those of filters.
func (e *Engine) watch(filters []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want := map[string]bool{}
	for _, f := range filters {
		want[f] = true
		if !e.watching[f] {
			if err := e.trig.Subscribe(f, 0); err != nil {
				e.log.Error("cannot watch a topic for LoT", "filter", f, "err", err)
				continue
			}
			e.watching[f] = true
		}
	}
	for f := range e.watching {
		if !want[f] {
			e.trig.Unsubscribe(f)
			delete(e.watching, f)
		}
	}
}
