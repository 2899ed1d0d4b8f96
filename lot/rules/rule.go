package rules

import (
	"fmt"
	"strings"
)

// Effect is what a rule decides.
type Effect uint8

// Effects. NoEffect is only meaningful as Rule.Else: a conditional rule
// without ELSE whose condition is false does not match.
const (
	NoEffect Effect = iota
	Allow
	Deny
)

func (e Effect) String() string {
	switch e {
	case Allow:
		return "ALLOW"
	case Deny:
		return "DENY"
	}
	return "none"
}

// Rule is one access rule, the decoded form of
//
//	DEFINE RULE <Name> WITH PRIORITY <Priority> FOR <Scope> [TO TOPIC "<TopicFilter>"]
//	    ALLOW | DENY | IF <If> THEN <Then> [ELSE <Else>]
type Rule struct {
	Name     string
	Priority int
	Scope    Scope
	// TopicFilter is the MQTT filter of TO TOPIC; "" means every topic.
	// Only topical scopes (Scope.Topical) may set it.
	TopicFilter string
	// If is the condition; nil makes the rule unconditional (Then applies).
	If *Cond
	// Then is the effect when If holds (or when there is no If).
	Then Effect
	// Else is the effect when If does not hold; NoEffect means the rule
	// does not match and evaluation goes on.
	Else Effect
	// Builtin marks a locked rule shipped with the broker: it may use the
	// reserved priority band (Options.ReservedBelow).
	Builtin bool
	// Source is the rule's LoT text, when known (published on
	// $SYS/Coreflux/Rules/<Name>); Compile ignores it.
	Source string
}

// CondOp is the kind of a condition node.
type CondOp uint8

// Condition kinds (LOT.md §6.1).
const (
	// OpUserIs: USER IS "<Value>".
	OpUserIs CondOp = iota + 1
	// OpUserHas: USER HAS <Value>, a permission flag (case-insensitive).
	OpUserHas
	// OpUserInGroup: USER IN GROUP "<Value>".
	OpUserInGroup
	// OpClientIDIs: CLIENTID IS "<Value>" (also plain CLIENTID MATCHES).
	OpClientIDIs
	// OpClientIDIsTopicPosition: CLIENTID IS TOPIC POSITION <Position>,
	// the 1-based level of the topic being accessed.
	OpClientIDIsTopicPosition
	// OpClientIDMatchesRegex: CLIENTID MATCHES REGEX "<Value>".
	OpClientIDMatchesRegex
	// OpTopicExists: TOPIC EXISTS "<Value>", a value is known for the topic.
	OpTopicExists
	// OpTopicIs: GET TOPIC "<Value>" IS "<Want>".
	OpTopicIs
	// OpNot, OpAnd, OpOr combine Args (one for NOT, two or more otherwise).
	OpNot
	OpAnd
	OpOr
)

var condOpNames = [...]string{
	OpUserIs: "USER IS", OpUserHas: "USER HAS", OpUserInGroup: "USER IN GROUP",
	OpClientIDIs: "CLIENTID IS", OpClientIDIsTopicPosition: "CLIENTID IS TOPIC POSITION",
	OpClientIDMatchesRegex: "CLIENTID MATCHES REGEX", OpTopicExists: "TOPIC EXISTS",
	OpTopicIs: "GET TOPIC IS", OpNot: "NOT", OpAnd: "AND", OpOr: "OR",
}

func (o CondOp) String() string {
	if int(o) < len(condOpNames) && condOpNames[o] != "" {
		return condOpNames[o]
	}
	return fmt.Sprintf("CondOp(%d)", uint8(o))
}

// Cond is a condition tree. Build it with the constructors below (UserIs,
// And, ...); Compile validates it.
type Cond struct {
	Op       CondOp
	Value    string // user name, flag, group, client id, regex or topic
	Want     string // OpTopicIs: the payload compared with
	Position int    // OpClientIDIsTopicPosition: 1-based topic level
	Args     []Cond // OpNot, OpAnd, OpOr
}

// UserIs is USER IS "name".
func UserIs(name string) Cond { return Cond{Op: OpUserIs, Value: name} }

// UserHas is USER HAS flag.
func UserHas(flag string) Cond { return Cond{Op: OpUserHas, Value: flag} }

// UserInGroup is USER IN GROUP "group".
func UserInGroup(group string) Cond { return Cond{Op: OpUserInGroup, Value: group} }

// ClientIDIs is CLIENTID IS "id".
func ClientIDIs(id string) Cond { return Cond{Op: OpClientIDIs, Value: id} }

// ClientIDIsTopicPosition is CLIENTID IS TOPIC POSITION n.
func ClientIDIsTopicPosition(n int) Cond { return Cond{Op: OpClientIDIsTopicPosition, Position: n} }

// ClientIDMatchesRegex is CLIENTID MATCHES REGEX "expr" (Go RE2 syntax).
func ClientIDMatchesRegex(expr string) Cond { return Cond{Op: OpClientIDMatchesRegex, Value: expr} }

// TopicExists is TOPIC EXISTS "topic".
func TopicExists(topic string) Cond { return Cond{Op: OpTopicExists, Value: topic} }

// TopicIs is GET TOPIC "topic" IS "want".
func TopicIs(topic, want string) Cond { return Cond{Op: OpTopicIs, Value: topic, Want: want} }

// Not is NOT c.
func Not(c Cond) Cond { return Cond{Op: OpNot, Args: []Cond{c}} }

// And is a AND b AND ...
func And(cs ...Cond) Cond { return Cond{Op: OpAnd, Args: cs} }

// Or is a OR b OR ...
func Or(cs ...Cond) Cond { return Cond{Op: OpOr, Args: cs} }

// User is the view of a user that rules need. Build it once per connection
// (or cache it): Evaluate reads it without copying.
type User struct {
	Name string
	// Admin users are always allowed, whatever the rules (anti-lockout):
	// the broker's administrator root has it.
	Admin bool
	// Flags are the permission flags set to true
	// (AllowedSystemConfiguration, ...); compared ignoring case.
	Flags []string
	// Groups are the groups the user belongs to; compared exactly.
	Groups []string
}

// HasFlag reports whether the user has the permission flag, ignoring case.
func (u *User) HasFlag(flag string) bool {
	if u == nil {
		return false
	}
	for _, f := range u.Flags {
		if strings.EqualFold(f, flag) {
			return true
		}
	}
	return false
}

// InGroup reports whether the user belongs to group.
func (u *User) InGroup(group string) bool {
	if u == nil {
		return false
	}
	for _, g := range u.Groups {
		if g == group {
			return true
		}
	}
	return false
}

// TopicReader gives conditions read access to topic state (TOPIC EXISTS,
// GET TOPIC ... IS). The returned bytes must not be modified.
type TopicReader interface {
	Lookup(topic string) ([]byte, bool)
}

// Request is one access to decide.
type Request struct {
	Scope Scope
	// Topic is the topic name of a publish, or the filter of a subscribe
	// (a $share/{group}/ prefix is ignored); empty for other scopes.
	Topic    string
	ClientID string
	// User is the authenticated user, nil for an anonymous client.
	User *User
	// State answers TOPIC EXISTS and GET TOPIC; nil makes them false.
	State TopicReader
}

// Reason says why a Decision was taken.
type Reason uint8

// Reasons.
const (
	// ByRule: Decision.Rule decided (the lowest matching priority).
	ByRule Reason = iota + 1
	// ByAdmin: the user is an administrator.
	ByAdmin
	// NoMatch: no rule of the scope matched, which denies.
	NoMatch
)

func (r Reason) String() string {
	switch r {
	case ByRule:
		return "rule"
	case ByAdmin:
		return "administrator"
	case NoMatch:
		return "no matching rule"
	}
	return "unknown"
}

// Decision is the outcome of Evaluate.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Rule and Priority name the deciding rule when Reason is ByRule.
	Rule     string
	Priority int
}
