package check

import (
	"fmt"
	"slices"
	"strings"

	"gantry/lot/syntax"
)

// actionCheck holds what the checks of one action's body need.
type actionCheck struct {
	*checker
	a    *syntax.Action
	vars map[string]bool // variables the action sets: SET names, INPUTs, RETURN variables
}

func (c *checker) action(a *syntax.Action) {
	ac := &actionCheck{checker: c, a: a, vars: map[string]bool{}}
	ac.trigger()
	ac.signature()
	ac.collectVars()
	for _, o := range a.Outputs {
		if !ac.vars[o.Name] {
			c.warnf(o.NamePos, fmt.Sprintf(`set it in the body: SET "%s" WITH <value>`, o.Name),
				"OUTPUT %s is never set, so the caller receives EMPTY", o.Name)
		}
	}
	for _, s := range a.Body {
		syntax.Inspect(s, ac.visit)
	}
}

// trigger checks the ON clause.
func (ac *actionCheck) trigger() {
	tr := ac.a.Trigger
	if tr == nil {
		return
	}
	what := tr.Kind.String()
	switch tr.Kind {
	case syntax.TriggerTopic, syntax.TriggerChange, syntax.TriggerSubscribe:
		ac.filterExpr(tr.Topic, what)
		if v, ok := constString(tr.Topic); ok && strings.HasPrefix(v, "$") && tr.Kind != syntax.TriggerSubscribe {
			ac.errorf(tr.Topic.Pos(), "the broker's $ topics are not events of the plant; react to the topics your devices publish",
				"%s %q: LoT does not trigger on $ topics", what, v)
		}
	case syntax.TriggerEvery:
		ac.interval(tr.CountPos, tr.Count, tr.CountText, tr.Unit, what)
	case syntax.TriggerDaily:
		ac.clock(tr.AtPos, tr.At, "ON EVERY "+tr.Day+" AT")
	case syntax.TriggerTimestamp:
		ac.moment(tr.AtPos, tr.At)
	}
}

// signature checks INPUT and OUTPUT names and that only callables have
// them.
func (ac *actionCheck) signature() {
	a := ac.a
	if a.Trigger != nil && len(a.Outputs) > 0 {
		ac.errorf(a.Outputs[0].Start, "remove the trigger to make the action callable, or remove RETURN",
			"only a callable action (one without ON) returns OUTPUTs")
	}
	seen := map[string]bool{}
	for _, in := range a.Inputs {
		if seen[in.Name] {
			ac.errorf(in.NamePos, "", "INPUT %s is declared twice", in.Name)
		}
		seen[in.Name] = true
		if !slices.Contains([]syntax.TypeName{syntax.TypeString, syntax.TypeInt, syntax.TypeDouble,
			syntax.TypeBool, syntax.TypeJSON}, in.Type) {
			ac.errorf(in.TypePos, "use STRING, INT, DOUBLE, BOOL or JSON", "INPUT type %s is not allowed", in.Type)
		}
	}
	outs := map[string]bool{}
	for _, o := range a.Outputs {
		if outs[o.Name] {
			ac.errorf(o.NamePos, "", "OUTPUT %s is declared twice", o.Name)
		}
		outs[o.Name] = true
	}
}

// collectVars records every variable the action sets anywhere.
func (ac *actionCheck) collectVars() {
	for _, in := range ac.a.Inputs {
		ac.vars[in.Name] = true
	}
	for _, s := range ac.a.Body {
		syntax.Inspect(s, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.SetStmt:
				ac.vars[n.Name] = true
			case *syntax.CallActionStmt:
				for _, r := range n.Returns {
					ac.vars[r.Name] = true
				}
			}
			return true
		})
	}
}

// visit checks one node of the body; it returns false for nodes whose
// children it checks itself.
func (ac *actionCheck) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.PayloadExpr:
		ac.needsMessage(n.Start, "PAYLOAD")
	case *syntax.TopicPositionExpr:
		ac.needsMessage(n.Start, "TOPIC POSITION")
		ac.topicPosition(n)
	case *syntax.SessionExpr:
		ac.session(n)
	case *syntax.VarRef:
		ac.varRef(n)
	case *syntax.Ident:
		ac.unknownWord(n)
	case *syntax.CastExpr:
		if n.Type == syntax.TypeBytes {
			ac.errorf(n.AsPos, "", "only PAYLOAD AS BYTES is allowed")
		}
	case *syntax.PublishStmt:
		ac.nameExpr(n.Topic, map[bool]string{false: "PUBLISH TOPIC", true: "KEEP TOPIC"}[n.Keep])
	case *syntax.GetTopicExpr:
		ac.nameExpr(n.Topic, "GET TOPIC")
	case *syntax.PublishModelStmt:
		ac.nameExpr(n.Topic, "PUBLISH MODEL")
		ac.publishModel(n)
	case *syntax.CallActionStmt:
		ac.call(n)
		for _, arg := range n.Args {
			syntax.Inspect(arg.Value, ac.visit)
		}
		return false
	case *syntax.FilterExpr:
		ac.regex(n.Regex, "FILTER")
	case *syntax.RandomExpr:
		ac.randomBounds(n)
	case *syntax.UnsupportedStmt:
		ac.errorf(n.Start, unsupportedStmtHint(n.Feature), "%s is not supported by Gantry", n.Feature)
	case *syntax.UnsupportedExpr:
		ac.errorf(n.Start, "database connectors are not supported", "%s is not supported by Gantry", n.Feature)
	}
	return true
}

func unsupportedStmtHint(feature string) string {
	if feature == "CALL PYTHON" {
		return "write the logic in LoT, or run it outside the broker and exchange MQTT messages"
	}
	return "AI routes are not supported"
}

// needsMessage reports a message-only value in an action that no message
// starts.
func (ac *actionCheck) needsMessage(pos syntax.Pos, what string) {
	tr := ac.a.Trigger
	if tr == nil || tr.Kind.HasPayload() {
		return
	}
	ac.errorf(pos, "only ON TOPIC and ON CHANGE actions run on a message; read other values with GET TOPIC",
		"%s has no value in an action triggered by %s", what, tr.Kind)
}

// topicPosition checks the index of TOPIC POSITION n.
func (ac *actionCheck) topicPosition(n *syntax.TopicPositionExpr) {
	num, ok := n.Index.(*syntax.NumberLit)
	if !ok {
		return
	}
	if num.Value < 1 || num.Value != float64(int(num.Value)) {
		ac.errorf(num.Start, "TOPIC POSITION 1 is the first level", "TOPIC POSITION %s: positions are whole numbers from 1", num.Text)
		return
	}
	tr := ac.a.Trigger
	if tr == nil || !tr.Kind.HasPayload() {
		return
	}
	f, ok := constString(tr.Topic)
	if !ok || strings.HasSuffix(f, "#") {
		return
	}
	if levels := strings.Count(f, "/") + 1; int(num.Value) > levels {
		ac.warnf(num.Start, "", "TOPIC POSITION %s is always EMPTY: %q has %d levels", num.Text, f, levels)
	}
}

var sessionTriggers = map[string][]syntax.TriggerKind{
	"DISCONNECTREASON": {syntax.TriggerDisconnect},
	"SUBSCRIBETOPIC":   {syntax.TriggerSubscribe},
	"SUBSCRIBEQOS":     {syntax.TriggerSubscribe},
}

// session warns about a session keyword outside the triggers that set it.
func (ac *actionCheck) session(n *syntax.SessionExpr) {
	tr := ac.a.Trigger
	if tr == nil {
		return
	}
	if kinds, ok := sessionTriggers[n.Name]; ok {
		if !slices.Contains(kinds, tr.Kind) {
			ac.warnf(n.Start, "", "%s is EMPTY outside %s actions", n.Name, kinds[0])
		}
		return
	}
	if !tr.Kind.IsSession() {
		ac.warnf(n.Start, "", "%s is EMPTY outside ON CONNECT, ON DISCONNECT and ON SUBSCRIBE actions", n.Name)
	}
}

// varRef warns about reading a variable the action never sets.
func (ac *actionCheck) varRef(n *syntax.VarRef) {
	if ac.vars[n.Name] {
		return
	}
	names := make([]string, 0, len(ac.vars))
	for v := range ac.vars {
		names = append(names, v)
	}
	slices.Sort(names)
	hint := suggestName(n.Name, names)
	if hint == "" {
		hint = fmt.Sprintf(`set it first: SET "%s" WITH <value>`, n.Name)
	}
	ac.warnf(n.Start, hint, "variable {%s} is never set, so it reads EMPTY", n.Name)
}

var valueWords = append([]string{"PAYLOAD", "EMPTY", "TRUE", "FALSE", "TIMESTAMP", "RANDOM",
	"REPLACE", "FILTER", "TRIM", "GET", "TOPIC", "AND", "OR", "NOT", "EQUALS", "CONTAINS",
	"STARTS_WITH", "ENDS_WITH", "AS"}, syntax.SessionWords...)

// unknownWord reports a bare word used as a value in an action.
func (ac *actionCheck) unknownWord(n *syntax.Ident) {
	hint := suggestName(n.Name, valueWords)
	if ac.vars[n.Name] {
		hint = fmt.Sprintf("write {%s} to read the variable", n.Name)
	} else if hint == "" {
		hint = fmt.Sprintf(`write "%s" for text, or {%s} for a variable`, n.Name, n.Name)
	}
	ac.errorf(n.Start, hint, "unknown word %s", n.Name)
}

// randomBounds checks constant RANDOM bounds.
func (ac *actionCheck) randomBounds(n *syntax.RandomExpr) {
	lo, ok1 := n.Min.(*syntax.NumberLit)
	hi, ok2 := n.Max.(*syntax.NumberLit)
	if ok1 && ok2 && lo.Value > hi.Value {
		ac.errorf(lo.Start, "write the smaller bound first", "RANDOM BETWEEN %s AND %s: the lower bound is above the upper", lo.Text, hi.Text)
	}
}
