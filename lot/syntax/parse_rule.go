package syntax

// rule parses DEFINE RULE after the RULE keyword.
func (p *parser) rule(h DefHeader) *Rule {
	h.Name, h.NamePos = p.defName("the rule")
	r := &Rule{DefHeader: h}
	p.expectKw("WITH", "after DEFINE RULE "+h.Name+" (WITH PRIORITY n)")
	p.expectKw("PRIORITY", "after DEFINE RULE "+h.Name+" WITH")
	neg := p.at(MINUS)
	if neg {
		p.next()
	}
	n := p.expect(NUMBER, "after PRIORITY")
	r.Priority, r.PriorityPos = int(min(max(numberValue(n.Text), -1e9), 1e9)), n.Pos
	if neg {
		r.Priority = -r.Priority
	}
	p.expectKw("FOR", "after the priority (FOR <scope>)")
	scope := p.tok()
	if scope.Kind != WORD {
		p.failf(scope.Pos, "", "expected a scope after FOR (Publish, Subscribe, Connect, ...), found %s", scope)
	}
	p.next()
	r.Scope, r.ScopePos = scope.Text, scope.Pos
	if p.acceptKw("TO") {
		p.expectKw("TOPIC", "after TO")
		t := p.expect(STRING, "after TO TOPIC")
		r.Topic = &StringLit{Start: t.Pos, Value: t.Value, Quote: t.Quote}
	}
	opened := p.openLine()
	p.ruleBody(r)
	if opened {
		p.closeBlock("the rule")
	}
	return r
}

// openLine moves from the end of a header line to the body on the next
// line: it consumes NEWLINE and, if the body is indented, INDENT, which it
// reports.
func (p *parser) openLine() bool {
	if !p.at(NEWLINE) {
		return false
	}
	p.next()
	if p.at(INDENT) {
		p.next()
		return true
	}
	return false
}

// ruleBody parses ALLOW, DENY or IF <cond> THEN <effect> [ELSE <effect>].
func (p *parser) ruleBody(r *Rule) {
	if !p.isKw("IF") {
		r.Then, r.ThenPos = p.effect()
		return
	}
	p.next()
	p.ruleMode = true
	r.Cond = p.cond("IF")
	p.ruleMode = false
	p.expectKw("THEN", "after the rule condition")
	r.Then, r.ThenPos = p.effectBlock()
	if p.at(NEWLINE) && kwAt(p.peek(1), "ELSE") {
		p.next()
	}
	if p.acceptKw("ELSE") {
		r.Else, r.ElsePos = p.effectBlock()
	}
}

// effectBlock parses an effect on the same line or indented on the next.
func (p *parser) effectBlock() (Effect, Pos) {
	opened := p.at(NEWLINE) && p.peek(1).Kind == INDENT
	if opened {
		p.next()
		p.next()
	}
	e, pos := p.effect()
	if opened {
		p.closeBlock(e.String())
	}
	return e, pos
}

// effect parses ALLOW or DENY.
func (p *parser) effect() (Effect, Pos) {
	t := p.tok()
	switch {
	case kwAt(t, "ALLOW"):
		p.next()
		return Allow, t.Pos
	case kwAt(t, "DENY"):
		p.next()
		return Deny, t.Pos
	}
	p.failf(t.Pos, suggest(t, "ALLOW", "DENY", "IF"), "expected ALLOW, DENY or IF in the rule, found %s", t)
	return EffectNone, Pos{}
}

// ruleAtom parses the rule-only atoms that start with a word: USER IS,
// USER HAS, USER IN GROUP, CLIENTID|ENDPOINT IS|MATCHES, TOPIC EXISTS.
// It returns nil when t starts none of them.
func (p *parser) ruleAtom(t Token) Expr {
	op := p.peek(1)
	switch t.Value {
	case "USER", "CLIENTID", "ENDPOINT":
		if op.Kind != WORD || !containsWord([]string{"IS", "HAS", "IN", "MATCHES"}, op.Value) {
			return nil
		}
	case "TOPIC":
		if !kwAt(op, "EXISTS") {
			return nil
		}
	default:
		return nil
	}
	p.next()
	p.next()
	rt := &RuleTest{Start: t.Pos, Subject: t.Value, Op: op.Value, OpPos: op.Pos}
	switch {
	case op.Value == "IN":
		p.expectKw("GROUP", "after USER IN")
		rt.Op = "IN GROUP"
	case op.Value == "MATCHES" && p.acceptKw("REGEX"):
		rt.Op = "MATCHES REGEX"
	}
	rt.Arg = p.ruleArg()
	return rt
}

// ruleArg parses the operand of a rule test: a primary, where a bare word
// is a name (USER HAS AllowedSystemConfiguration).
func (p *parser) ruleArg() Expr {
	t := p.tok()
	if t.Kind == WORD && !kwAt(t, "TOPIC") && !kwAt(t, "GET") && !reserved[t.Value] {
		p.next()
		return &Ident{Start: t.Pos, Name: t.Text}
	}
	return p.primary()
}

// ruleIs turns GET TOPIC <t> IS <x> into a RuleTest.
func (p *parser) ruleIs(x Expr) Expr {
	op := p.next()
	rt := &RuleTest{Start: x.Pos(), Subject: "GET TOPIC", Op: "IS", OpPos: op.Pos, Arg: p.ruleArg()}
	if g, ok := x.(*GetTopicExpr); ok {
		rt.Topic = g.Topic
	} else {
		p.failf(op.Pos, "", "IS compares USER, CLIENTID, ENDPOINT or GET TOPIC; use == to compare values")
	}
	return rt
}
