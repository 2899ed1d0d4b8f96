package check

import (
	"fmt"
	"slices"
	"strings"

	"gantry/lot/syntax"
)

// maxParents bounds the walk up a FROM chain (cycles are reported).
const maxParents = 32

// call checks CALL ACTION against the callee's INPUTs and OUTPUTs.
func (ac *actionCheck) call(n *syntax.CallActionStmt) {
	if n.Name == ac.a.Name {
		ac.errorf(n.NamePos, "", "action %s calls itself", n.Name)
		return
	}
	callee, ok := ac.callable(n.Name)
	if !ok {
		if a, inFile := ac.actions[n.Name]; inFile && a.Trigger != nil {
			ac.errorf(n.NamePos, "remove its trigger to make it callable",
				"action %s is not callable: it runs %s", n.Name, a.Trigger.Kind)
			return
		}
		ac.errorf(n.NamePos, ac.suggestCallable(n.Name), "unknown callable action %s", n.Name)
		return
	}
	ac.args(n, callee)
	if len(n.Returns) > 0 && len(n.Returns) != callee.Outputs {
		ac.errorf(n.Returns[0].Start, fmt.Sprintf("name %d return variable(s)", callee.Outputs),
			"%s returns %d OUTPUT(s), RETURN names %d", n.Name, callee.Outputs, len(n.Returns))
	}
}

// args checks the WITH arguments of a call against the callee's INPUTs. A
// misnamed argument is reported once, suggesting the INPUT still missing.
func (ac *actionCheck) args(n *syntax.CallActionStmt, callee Callable) {
	given := map[string]bool{}
	for _, a := range n.Args {
		given[a.Name] = true
	}
	var missing []string
	for _, in := range callee.Inputs {
		if !given[in] {
			missing = append(missing, in)
		}
	}
	seen, unknown := map[string]bool{}, false
	for _, a := range n.Args {
		switch {
		case seen[a.Name]:
			ac.errorf(a.NamePos, "", "argument %s is given twice", a.Name)
		case !slices.Contains(callee.Inputs, a.Name):
			unknown = true
			hint := suggestName(a.Name, missing)
			if hint == "" {
				hint = "its INPUTs are: " + inputList(callee.Inputs)
			}
			ac.errorf(a.NamePos, hint, "%s has no INPUT %s", n.Name, a.Name)
		}
		seen[a.Name] = true
	}
	if len(missing) > 0 && !unknown {
		ac.errorf(n.NamePos, "add WITH "+strings.Join(missing, " = <value>, ")+" = <value>",
			"CALL ACTION %s does not give INPUT %s", n.Name, strings.Join(missing, ", "))
	}
}

func inputList(inputs []string) string {
	if len(inputs) == 0 {
		return "none"
	}
	return strings.Join(inputs, ", ")
}

// callable finds a callable action in the file, then in the Env.
func (c *checker) callable(name string) (Callable, bool) {
	if a, ok := c.actions[name]; ok {
		return CallableOf(a)
	}
	return c.env.Callable(name)
}

func (c *checker) suggestCallable(name string) string {
	var names []string
	for n, a := range c.actions {
		if a.Trigger == nil {
			names = append(names, n)
		}
	}
	if l, ok := c.env.(Lister); ok {
		names = append(names, l.CallableNames()...)
	}
	slices.Sort(names)
	return suggestName(name, names)
}

// publishModel checks PUBLISH MODEL against the model's fields.
func (ac *actionCheck) publishModel(n *syntax.PublishModelStmt) {
	fields, ok := ac.modelFields(n.Model, 0)
	if !ok {
		ac.errorf(n.ModelPos, ac.suggestModel(n.Model), "unknown model %s", n.Model)
		return
	}
	seen := map[string]bool{}
	for _, f := range n.Fields {
		switch {
		case seen[f.Name]:
			ac.errorf(f.NamePos, "", "field %s is assigned twice", f.Name)
		case !slices.Contains(fields, f.Name):
			hint := suggestName(f.Name, fields)
			if hint == "" {
				hint = "its fields are: " + inputList(fields)
			}
			ac.errorf(f.NamePos, hint, "model %s has no field %s", n.Model, f.Name)
		}
		seen[f.Name] = true
	}
}

// modelFields returns the field names of a model of the file (parents'
// fields first) or of the Env.
func (c *checker) modelFields(name string, depth int) ([]string, bool) {
	m, ok := c.models[name]
	if !ok {
		em, ok := c.env.Model(name)
		return em.Fields, ok
	}
	var parent Model
	if m.From != "" && depth < maxParents {
		pf, _ := c.modelFields(m.From, depth+1)
		parent = Model{Fields: pf}
	}
	return ModelOf(m, parent).Fields, true
}

func (c *checker) suggestModel(name string) string {
	names := sortedKeys(c.models)
	if l, ok := c.env.(Lister); ok {
		names = append(names, l.ModelNames()...)
	}
	return suggestName(name, names)
}
