package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gantry/broker"
	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/rules"
	"gantry/lot/syntax"
)

// compileRules compiles the built-in rules with every stored DEFINE RULE;
// a rule that is invalid on its own is reported as its own problem.
func compileRules(list []defs.Definition, parsed map[defKey]syntax.Def) (*rules.Set, []defError) {
	rs := rules.Builtins()
	var fails []defError
	for _, def := range list {
		r, ok := parsed[defKey{def.Kind, def.Name}].(*syntax.Rule)
		if !ok {
			continue
		}
		rr, err := convertRule(r)
		if err == nil {
			_, err = rules.Compile([]rules.Rule{rr}, nil)
		}
		if err != nil {
			fails = append(fails, defError{defKey{def.Kind, def.Name}, fmt.Errorf("rule %q: %w", r.Name, err)})
			continue
		}
		rr.Source = def.Source
		rs = append(rs, rr)
	}
	if len(fails) > 0 {
		return nil, fails
	}
	set, err := rules.Compile(rs, nil)
	if err != nil {
		return nil, []defError{{err: err}}
	}
	return set, nil
}

// convertRule turns a parsed DEFINE RULE into the decision engine's form.
func convertRule(r *syntax.Rule) (rules.Rule, error) {
	scope, err := rules.ParseScope(r.Scope)
	if err != nil {
		return rules.Rule{}, err
	}
	out := rules.Rule{Name: r.Name, Priority: r.Priority, Scope: scope, Then: effectOf(r.Then), Else: effectOf(r.Else)}
	if r.Topic != nil {
		out.TopicFilter = r.Topic.Value
	}
	if r.Cond != nil {
		c, err := convertCond(r.Cond)
		if err != nil {
			return rules.Rule{}, err
		}
		out.If = &c
	}
	return out, nil
}

func effectOf(e syntax.Effect) rules.Effect {
	switch e {
	case syntax.Allow:
		return rules.Allow
	case syntax.Deny:
		return rules.Deny
	}
	return rules.NoEffect
}

// convertCond turns a rule condition expression into a rules.Cond.
func convertCond(x syntax.Expr) (rules.Cond, error) {
	switch x := x.(type) {
	case *syntax.UnaryExpr:
		if x.Op == syntax.OpNot {
			c, err := convertCond(x.X)
			return rules.Not(c), err
		}
	case *syntax.BinaryExpr:
		if x.Op == syntax.OpAnd || x.Op == syntax.OpOr {
			a, err := convertCond(x.X)
			if err != nil {
				return a, err
			}
			b, err := convertCond(x.Y)
			if x.Op == syntax.OpAnd {
				return rules.And(a, b), err
			}
			return rules.Or(a, b), err
		}
	case *syntax.RuleTest:
		return convertTest(x)
	}
	return rules.Cond{}, posError{x.Pos(), errors.New("this condition is not supported in a rule: use USER, CLIENTID, TOPIC EXISTS or GET TOPIC ... IS, with AND, OR and NOT")}
}

func convertTest(t *syntax.RuleTest) (rules.Cond, error) {
	arg, pos := ruleArg(t.Arg)
	subject, op := strings.ToUpper(t.Subject), strings.ToUpper(t.Op)
	switch {
	case subject == "USER" && pos > 0:
		return rules.Cond{}, posError{t.Start, errors.New("USER IS TOPIC POSITION is not supported in a rule; CLIENTID IS TOPIC POSITION is")}
	case subject == "USER" && op == "IS":
		return rules.UserIs(arg), nil
	case subject == "USER" && op == "HAS":
		return rules.UserHas(arg), nil
	case subject == "USER" && op == "IN GROUP":
		return rules.UserInGroup(arg), nil
	case subject == "CLIENTID" && op == "IS" && pos > 0:
		return rules.ClientIDIsTopicPosition(pos), nil
	case subject == "CLIENTID" && (op == "IS" || op == "MATCHES"):
		return rules.ClientIDIs(arg), nil
	case subject == "CLIENTID" && op == "MATCHES REGEX":
		return rules.ClientIDMatchesRegex(arg), nil
	case subject == "TOPIC" && op == "EXISTS":
		return rules.TopicExists(arg), nil
	case subject == "GET TOPIC" && op == "IS":
		tp, _ := ruleArg(t.Topic)
		return rules.TopicIs(tp, arg), nil
	}
	return rules.Cond{}, posError{t.Start, fmt.Errorf("%s %s is not supported in a rule", t.Subject, t.Op)}
}

// ruleArg reads a rule test's argument: a string or word, or TOPIC
// POSITION n (returned as pos).
func ruleArg(x syntax.Expr) (s string, pos int) {
	switch x := x.(type) {
	case *syntax.StringLit:
		return x.Value, 0
	case *syntax.Ident:
		return x.Name, 0
	case *syntax.NumberLit:
		return x.Text, 0
	case *syntax.TopicPositionExpr:
		if n, ok := x.Index.(*syntax.NumberLit); ok {
			return "", int(n.Value)
		}
	}
	return "", 0
}

// Authorizer returns the broker access hook that enforces the deployed
// rules (built-in, seed and user rules) on connect (it is a
// broker.ConnectAuthorizer), publish and subscribe.
func (e *Engine) Authorizer() broker.Authorizer { return authorizer{e} }

type authorizer struct{ e *Engine }

func (a authorizer) CanPublish(info *broker.ConnInfo, tp string) bool {
	return a.e.allowed(info, rules.PublishScope(tp), tp)
}

func (a authorizer) CanSubscribe(info *broker.ConnInfo, filter string) bool {
	return a.e.allowed(info, rules.SubscribeScope(filter), filter)
}

// SubscribeAccess implements broker.ReadAuthorizer: a filter that only
// overlaps denied topics is granted, and its messages are checked with
// CanRead (rules.Set.Subscription).
func (a authorizer) SubscribeAccess(info *broker.ConnInfo, filter string) broker.SubscribeAccess {
	scope := rules.SubscribeScope(filter)
	set := a.e.rules.Set()
	if set.Open(scope, filter) {
		return broker.SubscribeGranted
	}
	var acc rules.Access
	a.e.withRequest(info, scope, filter, func(req *rules.Request) { acc = set.Subscription(req) })
	switch acc {
	case rules.Granted:
		return broker.SubscribeGranted
	case rules.Checked:
		return broker.SubscribeChecked
	}
	return broker.SubscribeRefused
}

// CanRead implements broker.ReadAuthorizer: the Subscribe (or
// SubscribeSys) scope decided for the message's topic.
func (a authorizer) CanRead(info *broker.ConnInfo, tp string) bool {
	return a.e.allowed(info, rules.SubscribeScope(tp), tp)
}

var _ broker.ReadAuthorizer = authorizer{}

// NeverBlocks implements broker.NonBlocking: a check evaluates the rules
// in memory, reading the users' file at most once a second when it
// changed (a small local file), so a reader keeps its deliveries for its
// next socket read across it.
func (authorizer) NeverBlocks() {}

var _ broker.NonBlocking = authorizer{}

// CanConnect implements broker.ConnectAuthorizer: the Connect scope of
// the rules, for clients with credentials and anonymous ones alike.
func (a authorizer) CanConnect(info *broker.ConnInfo) bool {
	return a.e.allowed(info, rules.Connect, "")
}

// allowed evaluates one request against the current rule set. It runs on
// every publish and subscribe: the user's rules.User is taken from a pool,
// because rules.Set.Evaluate makes whatever its Request points to escape
// (it calls an interface method through the request), which would cost
// every publish an allocation.
func (e *Engine) allowed(info *broker.ConnInfo, scope rules.Scope, tp string) bool {
	set := e.rules.Set()
	if set.Open(scope, tp) {
		return true // no user rule applies: no need to look the user up
	}
	req := rules.Request{Scope: scope, Topic: tp, ClientID: info.ClientID, State: e.cache}
	if info.Username == "" {
		return set.Evaluate(&req).Allowed
	}
	u := e.ruleUser(info.Username)
	req.User = u
	ok := set.Evaluate(&req).Allowed
	*u = rules.User{} // drop the references before pooling
	userPool.Put(u)
	return ok
}

// ruleUser returns a pooled rules.User for name; put it back (zeroed)
// when done.
func (e *Engine) ruleUser(name string) *rules.User {
	u := userPool.Get().(*rules.User)
	if e.o.Users != nil {
		if found, ok := e.o.Users.RuleUser(name); ok {
			*u = found
		}
	}
	u.Name = name
	return u
}

// withRequest calls f with the request of info on scope and tp (not on
// the publish path: the closure may allocate).
func (e *Engine) withRequest(info *broker.ConnInfo, scope rules.Scope, tp string, f func(*rules.Request)) {
	req := rules.Request{Scope: scope, Topic: tp, ClientID: info.ClientID, State: e.cache}
	if info.Username == "" {
		f(&req)
		return
	}
	u := e.ruleUser(info.Username)
	req.User = u
	f(&req)
	*u = rules.User{}
	userPool.Put(u)
}

// userPool recycles the rules.User of allowed: Evaluate reads it only
// during the call (rules' contract), so it may be reused afterwards.
var userPool = sync.Pool{New: func() any { return new(rules.User) }}

// commandAuthorizer checks the management scopes of commands.
type commandAuthorizer struct{ e *Engine }

func (c commandAuthorizer) Allowed(_ context.Context, caller command.Caller, scope string) bool {
	sc, err := rules.ParseScope(scope)
	if err != nil {
		return false
	}
	return c.e.allowed(&broker.ConnInfo{ClientID: caller.ClientID, Username: caller.User}, sc, "")
}
