package rules

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"gantry/broker/topic"
)

// ErrInvalid is wrapped by every error Compile returns.
var ErrInvalid = errors.New("rules: invalid rule")

// Options tune Compile. The zero value of a field means its default.
type Options struct {
	// ReservedBelow reserves priorities 0..ReservedBelow-1 to built-in
	// rules: a rule without Builtin in that band is refused. The default,
	// 0, reserves nothing (older brokers accepted PRIORITY 1, and the
	// documentation's examples use it); the vendor's band is 100.
	ReservedBelow int
	// MaxRules bounds the rules of one set (default 10,000).
	MaxRules int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options { return Options{ReservedBelow: 0, MaxRules: 10_000} }

// Validate checks the options.
func (o Options) Validate() error {
	if o.ReservedBelow < 0 {
		return fmt.Errorf("rules: Options.ReservedBelow = %d, want 0 or more", o.ReservedBelow)
	}
	if o.MaxRules < 0 {
		return fmt.Errorf("rules: Options.MaxRules = %d, want 0 (default) or more", o.MaxRules)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	d := DefaultOptions()
	if o == nil {
		return d
	}
	out := *o
	if out.MaxRules == 0 {
		out.MaxRules = d.MaxRules
	}
	return out
}

// Set is a compiled, immutable rule set: the rules of each scope sorted by
// priority (then name). It is safe for concurrent use.
type Set struct {
	byScope [numScopes][]compiled
	// open is, per scope, the rule that decides every request of the
	// scope's ordinary topics at once: the lowest priority holds an
	// unconditional ALLOW on '#' (or on every topic) and nothing that can
	// deny. The seed rules make Publish and Subscribe open, so a broker
	// without user rules pays almost nothing per publish.
	open  [numScopes]*compiled
	rules []Rule // as given, sorted by name, for Rules
}

// compiled is one rule ready for evaluation.
type compiled struct {
	name     string
	priority int
	filter   string // "" = any topic
	first    string // the filter's first level when literal and not empty, for a quick reject
	cond     *ccond // nil = unconditional
	then     Effect
	els      Effect
}

// ccond is a compiled condition: a tree walked by a switch, so evaluation
// calls no interface method that would make the request escape.
type ccond struct {
	op   CondOp
	str  string
	want string
	pos  int
	re   *regexp.Regexp
	args []ccond
}

// Compile validates rules and builds a Set. Every problem is reported (the
// returned error joins one error per problem, each naming the rule). opts
// may be nil for the defaults.
func Compile(rules []Rule, opts *Options) (*Set, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(rules) > o.MaxRules {
		return nil, fmt.Errorf("%w: %d rules, more than Options.MaxRules = %d", ErrInvalid, len(rules), o.MaxRules)
	}
	s := &Set{rules: slices.Clone(rules)}
	var errs []error
	seen := make(map[string]bool, len(rules))
	for i := range rules {
		r := &rules[i]
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("%w: rule %q is defined twice", ErrInvalid, r.Name))
			continue
		}
		seen[r.Name] = true
		c, err := compileRule(r, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.byScope[r.Scope] = append(s.byScope[r.Scope], c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i := range s.byScope {
		slices.SortFunc(s.byScope[i], func(a, b compiled) int {
			return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.name, b.name))
		})
	}
	slices.SortFunc(s.rules, func(a, b Rule) int { return cmp.Compare(a.Name, b.Name) })
	for i, rules := range s.byScope {
		s.open[i] = openRule(rules)
	}
	return s, nil
}

// openRule returns the rule of the lowest priority of rules (sorted) that
// allows every topic unconditionally, when no rule of that priority can
// deny; nil otherwise.
func openRule(rules []compiled) *compiled {
	var open *compiled
	for i := 0; i < len(rules) && rules[i].priority == rules[0].priority; i++ {
		c := &rules[i]
		if c.then == Deny || c.els == Deny {
			return nil
		}
		if open == nil && c.cond == nil && (c.filter == "" || c.filter == "#") {
			open = c
		}
	}
	return open
}

func compileRule(r *Rule, o Options) (compiled, error) {
	bad := func(format string, args ...any) (compiled, error) {
		return compiled{}, fmt.Errorf("%w: rule %q: %s", ErrInvalid, r.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case r.Name == "":
		return compiled{}, fmt.Errorf("%w: a rule has no name", ErrInvalid)
	case !r.Scope.Valid():
		return bad("scope %d is not a known scope", r.Scope)
	case r.Priority < 0:
		return bad("PRIORITY %d is negative, want 0 or more", r.Priority)
	case r.Priority < o.ReservedBelow && !r.Builtin:
		return bad("PRIORITY %d is reserved for built-in rules (0..%d), use %d or more",
			r.Priority, o.ReservedBelow-1, o.ReservedBelow)
	case r.TopicFilter != "" && !r.Scope.Topical():
		return bad("TO TOPIC applies to Publish, Subscribe, PublishSys and SubscribeSys, not %s", r.Scope)
	case r.Then != Allow && r.Then != Deny:
		return bad("the effect must be ALLOW or DENY")
	case r.If == nil && r.Else != NoEffect:
		return bad("ELSE needs an IF condition")
	case r.Else != NoEffect && r.Else != Allow && r.Else != Deny:
		return bad("the ELSE effect must be ALLOW or DENY")
	}
	if r.TopicFilter != "" && topic.ValidateFilter(r.TopicFilter) != nil {
		return bad("TO TOPIC %q is not a valid MQTT topic filter", r.TopicFilter)
	}
	c := compiled{name: r.Name, priority: r.Priority, filter: r.TopicFilter, then: r.Then, els: r.Else}
	if lvl, _, _ := nextLevel(r.TopicFilter, 0); !wildcard(lvl) {
		c.first = lvl
	}
	if r.If != nil {
		cc, err := compileCond(r.If, r.Scope)
		if err != nil {
			return bad("%v", err)
		}
		c.cond = &cc
	}
	return c, nil
}

func compileCond(c *Cond, scope Scope) (ccond, error) {
	out := ccond{op: c.Op, str: c.Value, want: c.Want, pos: c.Position}
	switch c.Op {
	case OpUserIs, OpUserHas, OpUserInGroup, OpClientIDIs:
	case OpClientIDIsTopicPosition:
		if c.Position < 1 {
			return out, fmt.Errorf("TOPIC POSITION %d, want 1 or more", c.Position)
		}
		if !scope.Topical() {
			return out, fmt.Errorf("TOPIC POSITION needs a topic scope, not %s", scope)
		}
	case OpClientIDMatchesRegex:
		re, err := regexp.Compile(c.Value)
		if err != nil {
			return out, fmt.Errorf("CLIENTID MATCHES REGEX %q: %v", c.Value, err)
		}
		out.re = re
	case OpTopicExists, OpTopicIs:
		if topic.ValidateName(c.Value) != nil {
			return out, fmt.Errorf("%s %q: not a valid topic name", c.Op, c.Value)
		}
	case OpNot, OpAnd, OpOr:
		return compileArgs(c, scope, out)
	default:
		return out, fmt.Errorf("unknown condition %s", c.Op)
	}
	if len(c.Args) > 0 {
		return out, fmt.Errorf("%s takes no sub-conditions", c.Op)
	}
	return out, nil
}

func compileArgs(c *Cond, scope Scope, out ccond) (ccond, error) {
	if c.Op == OpNot && len(c.Args) != 1 {
		return out, fmt.Errorf("NOT takes one condition, got %d", len(c.Args))
	}
	if c.Op != OpNot && len(c.Args) < 2 {
		return out, fmt.Errorf("%s takes two or more conditions, got %d", c.Op, len(c.Args))
	}
	out.args = make([]ccond, len(c.Args))
	for i := range c.Args {
		a, err := compileCond(&c.Args[i], scope)
		if err != nil {
			return out, err
		}
		out.args[i] = a
	}
	return out, nil
}

// Rules returns the rules of the set sorted by name. The slice is shared:
// do not modify it.
func (s *Set) Rules() []Rule { return s.rules }

// Len returns the number of rules in the set.
func (s *Set) Len() int { return len(s.rules) }
