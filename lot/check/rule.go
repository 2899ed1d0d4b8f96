package check

import (
	"strings"

	"gantry/lot/syntax"
)

// Scopes lists the rule scopes (reference §6.2), with Connector* aliases
// of the Route* management scopes.
var Scopes = []string{
	"Connect", "Publish", "Subscribe", "PublishSys", "SubscribeSys", "CommandCall",
	"ShellCommand", "SystemConfiguration",
	"UserManagementCreation", "UserManagementRemove", "UserManagementUpdate", "UserManagementPasswordChange",
	"RuleManagementCreation", "RuleManagementRemove",
	"ModelManagementCreation", "ModelManagementRemove",
	"ActionManagementCreation", "ActionManagementRemove", "ActionManagementRun",
	"RouteManagementCreation", "RouteManagementRemove",
	"ConnectorManagementCreation", "ConnectorManagementRemove",
	"LogManagementCreation", "LogManagementUpdate", "LogManagementRemove", "LogManagementRead",
}

// topicScopes are the scopes that take TO TOPIC and TOPIC POSITION.
var topicScopes = []string{"Publish", "Subscribe", "PublishSys", "SubscribeSys"}

// Flags lists the permission flags a user may have (reference §6.3).
var Flags = []string{"AllowedSystemConfiguration", "AllowedUserManagement", "AllowedLogManagement",
	"AllowedAssetManipulation"}

func (c *checker) rule(r *syntax.Rule) {
	scope, ok := canonical(r.Scope, Scopes)
	if !ok {
		c.errorf(r.ScopePos, suggestName(r.Scope, Scopes), "unknown rule scope %s", r.Scope)
	}
	topical := contains(topicScopes, scope)
	if r.Topic != nil {
		if ok && !topical {
			c.errorf(r.Topic.Start, "TO TOPIC applies to Publish, Subscribe, PublishSys and SubscribeSys",
				"scope %s has no topic", scope)
		}
		c.filterLit(r.Topic, "TO TOPIC")
	}
	if r.Priority < 0 {
		c.errorf(r.PriorityPos, "", "PRIORITY %d: priorities are 0 or more", r.Priority)
	}
	if r.Cond != nil {
		c.ruleCond(r.Cond, topical || !ok)
		if r.Then == r.Else {
			c.warnf(r.ElsePos, "", "both branches %s: the condition changes nothing", r.Then)
		}
	}
}

// canonical finds name in list ignoring case.
func canonical(name string, list []string) (string, bool) {
	for _, s := range list {
		if strings.EqualFold(s, name) {
			return s, true
		}
	}
	return name, false
}

// ruleCond checks the shape of a rule condition as the runtime builds it
// (lot/runtime convertCond): tests combined with NOT, AND and OR. What
// else appears — a comparison, PAYLOAD, a variable — is refused here, at
// check time, with the words of the finer checks of ruleExpr when they
// have something to say.
func (c *checker) ruleCond(x syntax.Expr, topical bool) {
	switch n := x.(type) {
	case *syntax.UnaryExpr:
		if n.Op == syntax.OpNot {
			c.ruleCond(n.X, topical)
			return
		}
	case *syntax.BinaryExpr:
		if n.Op == syntax.OpAnd || n.Op == syntax.OpOr {
			c.ruleCond(n.X, topical)
			c.ruleCond(n.Y, topical)
			return
		}
	case *syntax.RuleTest:
		c.ruleExpr(n, topical)
		return
	}
	before := len(c.diags)
	syntax.Inspect(x, func(n syntax.Node) bool { return c.ruleExpr(n, topical) })
	if len(c.diags) > before {
		return
	}
	what := "this condition"
	if b, ok := x.(*syntax.BinaryExpr); ok {
		what = "the comparison " + b.Op.String()
	}
	c.errorf(x.Pos(), "use USER, CLIENTID, TOPIC EXISTS or GET TOPIC ... IS, with AND, OR and NOT",
		"%s is not supported in a rule condition", what)
}

// ruleExpr checks a node of a rule condition.
func (c *checker) ruleExpr(n syntax.Node, topical bool) bool {
	switch n := n.(type) {
	case *syntax.RuleTest:
		c.ruleTest(n, topical)
		return false
	case *syntax.TopicPositionExpr:
		if !topical {
			c.errorf(n.Start, "use TOPIC POSITION with Publish or Subscribe rules", "TOPIC POSITION has no value in this rule's scope")
		}
	case *syntax.PayloadExpr, *syntax.VarRef:
		c.errorf(n.Pos(), "a rule sees the user, the client id, the topic and GET TOPIC", "%s has no value in a rule", ruleWord(n))
	case *syntax.Ident:
		c.errorf(n.Start, suggestName(n.Name, []string{"USER", "CLIENTID", "ENDPOINT", "TOPIC", "GET", "NOT", "AND", "OR"}),
			"unknown word %s in the rule condition", n.Name)
	case *syntax.GetTopicExpr:
		c.nameExpr(n.Topic, "GET TOPIC")
	}
	return true
}

func ruleWord(n syntax.Node) string {
	if v, ok := n.(*syntax.VarRef); ok {
		return "variable {" + v.Name + "}"
	}
	return "PAYLOAD"
}

// ruleTest checks USER IS|HAS|IN GROUP, CLIENTID MATCHES..., TOPIC EXISTS.
func (c *checker) ruleTest(n *syntax.RuleTest, topical bool) {
	subject := strings.ToUpper(n.Subject)
	if subject == "ENDPOINT" {
		c.errorf(n.Start, "the reference leaves ENDPOINT undefined; use CLIENTID or USER",
			"ENDPOINT %s is not supported in a rule", n.Op)
		return
	}
	if _, pos := n.Arg.(*syntax.TopicPositionExpr); pos && subject == "USER" {
		c.errorf(n.Start, "CLIENTID IS TOPIC POSITION is supported", "USER IS TOPIC POSITION is not supported in a rule")
		return
	}
	switch {
	case n.Op == "HAS":
		name := ""
		switch a := n.Arg.(type) {
		case *syntax.Ident:
			name = a.Name
		case *syntax.StringLit:
			name = a.Value
		}
		if name != "" && !contains(Flags, name) {
			c.warnf(n.Arg.Pos(), suggestName(name, Flags), "unknown permission flag %s", name)
		}
		return
	case n.Op == "MATCHES REGEX":
		c.regex(n.Arg, "MATCHES REGEX")
	case n.Subject == "TOPIC":
		c.nameExpr(n.Arg, "TOPIC EXISTS")
	}
	if n.Topic != nil {
		syntax.Inspect(n.Topic, func(m syntax.Node) bool { return c.ruleExpr(m, topical) })
	}
	if _, isIdent := n.Arg.(*syntax.Ident); !isIdent && n.Arg != nil {
		syntax.Inspect(n.Arg, func(m syntax.Node) bool { return c.ruleExpr(m, topical) })
	}
}
