package check

import (
	"slices"

	"gantry/lot/syntax"
)

// Env answers what is deployed, for the checks that cross definitions. The
// definitions store implements it; a nil Env means nothing is deployed.
type Env interface {
	// Callable returns the deployed callable action of that name.
	Callable(name string) (Callable, bool)
	// Model returns the deployed model of that name.
	Model(name string) (Model, bool)
}

// Lister is an optional capability of an Env: the names it knows, so that
// "did you mean ...?" can suggest deployed definitions.
type Lister interface {
	CallableNames() []string
	ModelNames() []string
}

// Callable is what a caller must match: the INPUT names in declaration
// order and the number of OUTPUTs.
type Callable struct {
	Inputs  []string
	Outputs int
}

// Model is the field names of a model, its parents' fields included.
type Model struct {
	Fields []string
}

// CallableOf describes a parsed callable action; ok is false for an action
// with a trigger.
func CallableOf(a *syntax.Action) (c Callable, ok bool) {
	if a.Trigger != nil {
		return Callable{}, false
	}
	for _, in := range a.Inputs {
		c.Inputs = append(c.Inputs, in.Name)
	}
	return Callable{Inputs: c.Inputs, Outputs: len(a.Outputs)}, true
}

// ModelOf describes a parsed model whose parent (if it has FROM) is
// described by parent: the parent's fields, then the model's own, a field
// redefined by the child keeping its place.
func ModelOf(m *syntax.Model, parent Model) Model {
	fields := slices.Clone(parent.Fields)
	for _, f := range m.Fields {
		if !slices.Contains(fields, f.Name) {
			fields = append(fields, f.Name)
		}
	}
	return Model{Fields: fields}
}

// Deployed is a plain Env backed by maps, for tests and simple callers.
type Deployed struct {
	Callables map[string]Callable
	Models    map[string]Model
}

// Callable implements Env.
func (d Deployed) Callable(name string) (Callable, bool) {
	c, ok := d.Callables[name]
	return c, ok
}

// Model implements Env.
func (d Deployed) Model(name string) (Model, bool) {
	m, ok := d.Models[name]
	return m, ok
}

// CallableNames implements Lister.
func (d Deployed) CallableNames() []string { return sortedKeys(d.Callables) }

// ModelNames implements Lister.
func (d Deployed) ModelNames() []string { return sortedKeys(d.Models) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
