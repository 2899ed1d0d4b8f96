package syntax

import "strings"

// ifStmt parses IF <cond> THEN <block> [ELSE IF ...| ELSE <block>]
// [ENDIF]. The IF keyword is the current token.
func (p *parser) ifStmt(elseIf bool) Stmt {
	p.enter()
	defer p.leave()
	s := &IfStmt{Start: p.next().Pos, ElseIf: elseIf}
	s.Cond = p.cond("IF")
	p.expectKw("THEN", "after the IF condition")
	s.Then = p.body("THEN")
	if p.at(NEWLINE) && kwAt(p.peek(1), "ELSE") {
		p.next()
	}
	if p.isKw("ELSE") {
		p.next()
		if p.isKw("IF") {
			s.Else = []Stmt{p.ifStmt(true)}
		} else {
			s.Else = p.body("ELSE")
		}
	}
	if !elseIf {
		p.endIf()
	}
	return s
}

// cond parses a condition, failing with a hint when it is missing.
func (p *parser) cond(what string) Expr {
	if t := p.tok(); t.Kind == NEWLINE || t.Kind == EOF || kwAt(t, "THEN") {
		p.failf(t.Pos, "", "%s needs a condition", what)
	}
	return p.expr()
}

// endIf consumes an optional ENDIF line.
func (p *parser) endIf() {
	if p.at(NEWLINE) && kwAt(p.peek(1), "ENDIF") {
		p.next()
	}
	p.acceptKw("ENDIF")
}

// switchStmt parses SWITCH <expr> followed by CASE <v> THEN and DEFAULT
// THEN blocks, indented under SWITCH or at its level.
func (p *parser) switchStmt() Stmt {
	p.enter()
	defer p.leave()
	s := &SwitchStmt{Start: p.next().Pos}
	s.Subject = p.cond("SWITCH")
	indented := false
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT && (kwAt(p.peek(2), "CASE") || kwAt(p.peek(2), "DEFAULT")) {
		p.next()
		p.next()
		indented = true
	}
	for {
		if indented {
			p.skipNewlines()
		} else if p.at(NEWLINE) && (kwAt(p.peek(1), "CASE") || kwAt(p.peek(1), "DEFAULT")) {
			p.next()
		}
		if p.isKw("CASE") {
			s.Cases = append(s.Cases, p.caseClause())
		} else if p.isKw("DEFAULT") {
			p.next()
			p.caseThen()
			s.Default, s.HasDefault = p.body("DEFAULT"), true
		} else {
			break
		}
	}
	if len(s.Cases) == 0 && !s.HasDefault {
		t := p.tok()
		p.failf(t.Pos, "write CASE <value> THEN on the lines under SWITCH", "SWITCH needs at least one CASE")
	}
	if indented {
		p.closeBlock("the CASE blocks")
	}
	return s
}

// caseClause parses CASE <v>[, <v>...] THEN <block>.
func (p *parser) caseClause() *Case {
	c := &Case{Start: p.next().Pos}
	c.Values = append(c.Values, p.expr())
	for p.at(COMMA) {
		p.next()
		c.Values = append(c.Values, p.expr())
	}
	p.caseThen()
	c.Body = p.body("CASE")
	return c
}

// caseThen accepts the THEN (or ':') after CASE <v> or DEFAULT.
func (p *parser) caseThen() {
	if !p.acceptKw("THEN") && p.at(COLON) {
		p.next()
	}
}

// loopStmt parses LOOP <block> UNTIL <cond>.
func (p *parser) loopStmt() Stmt {
	p.enter()
	defer p.leave()
	s := &LoopStmt{Start: p.next().Pos}
	s.Body = p.body("LOOP")
	if p.at(NEWLINE) && kwAt(p.peek(1), "UNTIL") {
		p.next()
	}
	if !p.isKw("UNTIL") {
		t := p.tok()
		p.failf(t.Pos, "write UNTIL <condition> after the loop body, at the column of LOOP",
			"LOOP needs UNTIL, found %s", t)
	}
	p.next()
	s.Until = p.cond("UNTIL")
	p.endStmt()
	return s
}

// callStmt parses CALL ACTION <Name> [WITH a = x, ...] [RETURN r, ...],
// whose clauses may sit on indented continuation lines, and recognises
// CALL PYTHON|LLM|MCP|AGENT.
func (p *parser) callStmt() Stmt {
	start := p.next().Pos
	t := p.tok()
	switch t.Value {
	case "PYTHON", "LLM", "MCP", "AGENT":
		return p.unsupportedStmt(start, "CALL "+t.Value)
	case "ACTION":
	default:
		p.failf(t.Pos, suggest(t, "ACTION"), "expected ACTION after CALL, found %s", t)
	}
	p.next()
	s := &CallActionStmt{Start: start}
	s.Name, s.NamePos = p.defName("the called action")
	indented := false
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT && (kwAt(p.peek(2), "WITH") || kwAt(p.peek(2), "RETURN")) {
		p.next()
		p.next()
		indented = true
	}
	for {
		if indented {
			p.skipNewlines()
		}
		if p.isKw("WITH") && s.Args == nil {
			p.next()
			s.Args = p.callArgs(indented)
		} else if p.isKw("RETURN") && s.Returns == nil {
			p.next()
			s.Returns = p.returnVars(indented)
		} else {
			break
		}
	}
	if indented {
		p.closeBlock("CALL ACTION " + s.Name)
	}
	return s
}

// callArgs parses a = <expr>, b = <expr>; with indented clauses a comma
// may end a line.
func (p *parser) callArgs(indented bool) []*Assign {
	out := []*Assign{p.assign("argument")}
	for p.at(COMMA) {
		p.next()
		if indented {
			p.skipNewlines()
		}
		out = append(out, p.assign("argument"))
	}
	return out
}

// returnVars parses the variables after RETURN: r1, r2 (words, strings or
// {vars}; an optional AS before them).
func (p *parser) returnVars(indented bool) []*Ident {
	p.acceptKw("AS")
	var out []*Ident
	for {
		name, pos := p.bareName("the return variable")
		out = append(out, &Ident{Start: pos, Name: name})
		if !p.at(COMMA) {
			return out
		}
		p.next()
		if indented {
			p.skipNewlines()
		}
	}
}

// triggerEventStmt parses TRIGGER "<Event>" TO <Connector> [WITH <expr>].
func (p *parser) triggerEventStmt() Stmt {
	s := &TriggerEventStmt{Start: p.next().Pos}
	s.Event = p.primary()
	p.expectKw("TO", "after TRIGGER <event>")
	s.Connector, s.ConnectorPos = p.defName("the connector")
	if p.acceptKw("WITH") {
		s.Value = p.value("TRIGGER")
	}
	return s
}

// unsupportedStmt skips a recognised but unsupported statement (its line
// and any block indented under it) and keeps its text.
func (p *parser) unsupportedStmt(start Pos, feature string) Stmt {
	from := p.i
	for {
		t := p.tok()
		if t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT {
			break
		}
		p.next()
	}
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT {
		p.next()
		p.skipIndented()
	}
	end := p.toks[max(from, p.i-1)].End
	return &UnsupportedStmt{Start: start, Feature: feature,
		Text: strings.TrimSpace(p.src[start.Offset:max(end, start.Offset)])}
}
