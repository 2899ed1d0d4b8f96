package rules

import (
	"sync/atomic"

	"gantry/broker/topic"
)

// Evaluate decides a request (LOT.md §6.4):
//
//  1. an administrator is always allowed;
//  2. among the rules of the request's scope that match it, only those
//     with the lowest priority number decide, and DENY wins a tie;
//  3. when no rule matches, the request is denied.
//
// A rule matches when its TO TOPIC filter (if any) applies to the request's
// topic and it yields an effect: unconditional, its condition holds, or it
// has an ELSE. For a subscription an ALLOW applies only when the rule's
// filter covers the whole subscription filter, a DENY as soon as the two
// overlap. Evaluate does not allocate (a regular expression condition may,
// rarely, inside package regexp).
func (s *Set) Evaluate(r *Request) Decision {
	if r.User != nil && r.User.Admin {
		return Decision{Allowed: true, Reason: ByAdmin}
	}
	if !r.Scope.Valid() {
		return Decision{Reason: NoMatch}
	}
	tp := r.Topic
	sub := r.Scope.subscription()
	if sub {
		tp = stripShare(tp)
	}
	if o := s.openRule(r.Scope, tp); o != nil {
		return Decision{Allowed: true, Reason: ByRule, Rule: o.name, Priority: o.priority}
	}
	rules := s.byScope[r.Scope]
	for i := 0; i < len(rules); {
		p := rules[i].priority
		allow, deny := -1, -1
		for ; i < len(rules) && rules[i].priority == p; i++ {
			switch rules[i].effect(r, tp, sub) {
			case Allow:
				if allow < 0 {
					allow = i
				}
			case Deny:
				if deny < 0 {
					deny = i
				}
			}
		}
		if deny >= 0 {
			return Decision{Reason: ByRule, Rule: rules[deny].name, Priority: p}
		}
		if allow >= 0 {
			return Decision{Allowed: true, Reason: ByRule, Rule: rules[allow].name, Priority: p}
		}
	}
	return Decision{Reason: NoMatch}
}

// Open reports whether every request of scope on topic is allowed whoever
// asks (see Set.open): a caller may then skip looking the user up.
func (s *Set) Open(scope Scope, topic string) bool {
	if !scope.Valid() {
		return false
	}
	if scope.subscription() {
		topic = stripShare(topic)
	}
	return s.openRule(scope, topic) != nil
}

// openRule is the rule that opens scope for topic (a topic without '$'
// prefix; shared-subscription prefix already stripped), or nil.
func (s *Set) openRule(scope Scope, topic string) *compiled {
	o := s.open[scope]
	if o != nil && (o.filter == "" || (topic != "" && topic[0] != '$')) {
		return o
	}
	return nil
}

// effect returns the effect of one rule on a request, NoEffect when the rule
// does not match. tp is the request's topic without $share prefix. The
// topic is checked before the condition: most rules of a large set are
// about other topics, and the first-level test rejects them cheaply.
func (c *compiled) effect(r *Request, tp string, sub bool) Effect {
	if c.filter != "" {
		if !c.firstLevelMayMatch(tp) {
			return NoEffect
		}
		if !sub && !topic.Matches(c.filter, tp) || sub && !intersects(c.filter, tp) {
			return NoEffect
		}
	}
	e := c.then
	if c.cond != nil && !c.cond.eval(r, tp) {
		e = c.els
	}
	if e == Allow && sub && c.filter != "" && !covers(c.filter, tp) {
		return NoEffect // an ALLOW must cover the whole subscription
	}
	return e
}

// firstLevelMayMatch is a quick reject: when the rule's filter starts with a
// literal level, the request's topic must start with the same level, or
// (for a subscription) with a wildcard.
func (c *compiled) firstLevelMayMatch(tp string) bool {
	if c.first == "" {
		return true
	}
	if len(tp) > 0 && (tp[0] == '+' || tp[0] == '#') {
		return true
	}
	return len(tp) >= len(c.first) && tp[:len(c.first)] == c.first &&
		(len(tp) == len(c.first) || tp[len(c.first)] == '/')
}

func (c *ccond) eval(r *Request, tp string) bool {
	switch c.op {
	case OpUserIs:
		return r.User != nil && r.User.Name == c.str
	case OpUserHas:
		return r.User.HasFlag(c.str)
	case OpUserInGroup:
		return r.User.InGroup(c.str)
	case OpClientIDIs:
		return r.ClientID == c.str
	case OpClientIDIsTopicPosition:
		lvl, ok := levelAt(tp, c.pos)
		return ok && lvl == r.ClientID && !wildcard(lvl)
	case OpClientIDMatchesRegex:
		return c.re.MatchString(r.ClientID)
	case OpTopicExists:
		if r.State == nil {
			return false
		}
		_, ok := r.State.Lookup(c.str)
		return ok
	case OpTopicIs:
		if r.State == nil {
			return false
		}
		v, ok := r.State.Lookup(c.str)
		return ok && string(v) == c.want
	case OpNot:
		return !c.args[0].eval(r, tp)
	case OpAnd:
		for i := range c.args {
			if !c.args[i].eval(r, tp) {
				return false
			}
		}
		return true
	case OpOr:
		for i := range c.args {
			if c.args[i].eval(r, tp) {
				return true
			}
		}
		return false
	}
	return false
}

// Engine holds the current Set and swaps it atomically: Evaluate runs on
// every connect, publish and subscribe without a lock, Load replaces the
// rules while requests are being decided. The zero value denies every
// request of a non-administrator until Load or Swap is called.
type Engine struct {
	set atomic.Pointer[Set]
}

// NewEngine returns an engine evaluating set (nil: no rules, deny).
func NewEngine(set *Set) *Engine {
	e := &Engine{}
	e.Swap(set)
	return e
}

// Swap installs set and returns the previous one. A nil set is no rules.
func (e *Engine) Swap(set *Set) *Set {
	if set == nil {
		set = &Set{}
	}
	return e.set.Swap(set)
}

// Load compiles rules and installs them. On error the current set stays.
func (e *Engine) Load(rules []Rule, opts *Options) error {
	s, err := Compile(rules, opts)
	if err != nil {
		return err
	}
	e.Swap(s)
	return nil
}

// Set returns the current set (never nil).
func (e *Engine) Set() *Set {
	if s := e.set.Load(); s != nil {
		return s
	}
	return &emptySet
}

// Evaluate decides r with the current set (see Set.Evaluate).
func (e *Engine) Evaluate(r *Request) Decision {
	s := e.set.Load()
	if s == nil {
		s = &emptySet
	}
	return s.Evaluate(r)
}

var emptySet Set

// Allowed is Evaluate(r).Allowed.
func (e *Engine) Allowed(r *Request) bool { return e.Evaluate(r).Allowed }
