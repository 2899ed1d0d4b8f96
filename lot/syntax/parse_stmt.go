package syntax

// stmtWords are the words that start a statement.
var stmtWords = map[string]bool{
	"SET": true, "PUBLISH": true, "KEEP": true, "IF": true, "SWITCH": true,
	"LOOP": true, "CALL": true, "TRIGGER": true, "DELETE": true,
}

// endWords end an inline block: they continue the enclosing statement or
// definition.
var endWords = map[string]bool{
	"ELSE": true, "CASE": true, "DEFAULT": true, "UNTIL": true, "ENDIF": true,
	"RETURN": true, "DESCRIPTION": true,
}

// body parses the statements after DO, THEN, ELSE or LOOP: an indented
// block on the next lines, or statements on the same line (flat form).
func (p *parser) body(after string) []Stmt {
	t := p.tok()
	if t.Kind == NEWLINE {
		if p.peek(1).Kind == INDENT {
			p.next()
			p.next()
			return p.block()
		}
		hint := "indent the statements under " + after + " by 4 spaces"
		if n := p.peek(1); n.Kind == WORD && stmtWords[n.Value] {
			p.failf(n.Pos, hint, "the statements after %s must be indented", after)
		}
		p.failf(t.Pos, hint, "expected statements after %s", after)
	}
	if t.Kind == EOF || t.Kind == DEDENT {
		p.failf(t.Pos, "", "expected statements after %s, found %s", after, t)
	}
	return p.inline()
}

// block parses statements up to the DEDENT that closes the block, going
// on after a bad statement.
func (p *parser) block() []Stmt {
	p.enter()
	defer p.leave()
	var out []Stmt
	p.items(func() {
		if s := p.stmt(); s != nil {
			out = append(out, s)
		}
	})
	return out
}

// items calls item for each item of an indented block, with recovery,
// and consumes the block's closing DEDENT.
func (p *parser) items(item func()) {
	for !p.at(DEDENT) && !p.at(EOF) && !p.defStart(p.i) {
		switch p.tok().Kind {
		case NEWLINE:
			p.next()
		case INDENT:
			p.errorf(p.tok().Pos, "indent by 4 spaces per level", "unexpected indentation")
			p.skipIndented()
		default:
			p.recoverTo(p.i, item)
		}
	}
	if p.at(DEDENT) {
		p.next()
	}
}

// inline parses statements written on one line, up to the end of the line
// or a word that continues the enclosing statement (ELSE, UNTIL, ...).
func (p *parser) inline() []Stmt {
	p.enter()
	defer p.leave()
	var out []Stmt
	for {
		out = append(out, p.stmt())
		t := p.tok()
		if t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT || (t.Kind == WORD && endWords[t.Value]) {
			return out
		}
	}
}

// stmt parses one statement.
func (p *parser) stmt() Stmt {
	t := p.tok()
	if t.Kind != WORD {
		p.failf(t.Pos, assignHint(p, t), "expected a statement, found %s", t)
	}
	var s Stmt
	switch t.Value {
	case "SET":
		s = p.setStmt()
	case "PUBLISH":
		s = p.publishStmt()
	case "KEEP":
		s = p.keepStmt()
	case "DELETE":
		s = p.deleteStmt()
	case "IF":
		return p.ifStmt(false)
	case "SWITCH":
		return p.switchStmt()
	case "LOOP":
		return p.loopStmt()
	case "CALL":
		s = p.callStmt()
	case "TRIGGER":
		s = p.triggerEventStmt()
	default:
		p.failf(t.Pos, stmtHint(p, t), "unknown statement %s", t)
	}
	p.endStmt()
	return s
}

// endStmt checks what follows a simple statement: the end of the line, or
// another statement or continuation word on the same line.
func (p *parser) endStmt() {
	t := p.tok()
	switch {
	case t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT:
	case t.Kind == WORD && (stmtWords[t.Value] || endWords[t.Value]):
	default:
		hint := ""
		if kwAt(t, "DEFINE") {
			hint = "start each DEFINE on a line of its own"
		}
		if kwAt(t, "AS") {
			hint = suggestFor(p.peek(1), "", "STRING", "INT", "DOUBLE", "BOOL", "TIMESTAMP", "JSON", "OBJECT", "ARRAY")
		}
		p.failf(t.Pos, hint, "unexpected %s after the statement", t)
	}
}

// stmtHint suggests a fix for a word that starts no statement.
func stmtHint(p *parser, t Token) string {
	words := []string{"SET", "PUBLISH", "KEEP", "IF", "SWITCH", "LOOP", "CALL", "TRIGGER", "DELETE"}
	if h := suggest(t, words...); h != "" {
		return h
	}
	switch t.Value {
	case "ELSE":
		return "ELSE must follow an IF block at the same indentation"
	case "DESCRIPTION", "RETURN":
		return "write " + t.Value + " at the left margin, after the body"
	case "ON":
		return "the trigger goes on the line after DEFINE ACTION, at the left margin"
	}
	return assignHint(p, t)
}

func assignHint(p *parser, t Token) string {
	if p.peek(1).Kind == ASSIGN && (t.Kind == WORD || t.Kind == VAR) {
		return `assign a variable with SET "` + t.Value + `" WITH <value>`
	}
	return ""
}

// setStmt parses SET <name> WITH|TO|AS|= <expr>.
func (p *parser) setStmt() Stmt {
	s := &SetStmt{Start: p.next().Pos}
	s.Name, s.NamePos = p.bareName("the variable")
	t := p.tok()
	if !(kwAt(t, "WITH") || kwAt(t, "TO") || kwAt(t, "AS") || t.Kind == ASSIGN) {
		p.failf(t.Pos, suggestFor(t, "did you mean ", "WITH"), "expected WITH after SET %q, found %s", s.Name, t)
	}
	p.next()
	s.Value = p.value("SET")
	return s
}

// value parses the expression after WITH, naming the statement when it is
// missing.
func (p *parser) value(stmt string) Expr {
	t := p.tok()
	if t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT {
		p.failf(t.Pos, "", "%s needs a value after WITH", stmt)
	}
	return p.expr()
}

// publishStmt parses PUBLISH TOPIC ... WITH ... and PUBLISH MODEL.
func (p *parser) publishStmt() Stmt {
	start := p.next().Pos
	t := p.tok()
	switch {
	case kwAt(t, "TOPIC"):
		p.next()
		return p.topicWith(&PublishStmt{Start: start}, "PUBLISH TOPIC")
	case kwAt(t, "MODEL"):
		p.next()
		return p.publishModel(start)
	}
	p.failf(t.Pos, suggest(t, "TOPIC", "MODEL"), "expected TOPIC or MODEL after PUBLISH, found %s", t)
	return nil
}

// topicWith parses <topic> WITH <value> of PUBLISH TOPIC and KEEP TOPIC.
func (p *parser) topicWith(s *PublishStmt, stmt string) Stmt {
	if t := p.tok(); t.Kind == NEWLINE || t.Kind == EOF || kwAt(t, "WITH") {
		p.failf(t.Pos, "", "%s needs a topic", stmt)
	}
	s.Topic = p.expr()
	t := p.tok()
	if !kwAt(t, "WITH") {
		hint := suggestFor(t, "did you mean ", "WITH")
		if kwAt(t, "MESSAGE") || kwAt(t, "PAYLOAD") || kwAt(t, "VALUE") {
			hint = "write WITH before the value"
		}
		p.failf(t.Pos, hint, "expected WITH after the topic of %s, found %s", stmt, t)
	}
	p.next()
	s.Value = p.value(stmt)
	return s
}

// keepStmt parses KEEP TOPIC and KEEP ENV|SECRET.
func (p *parser) keepStmt() Stmt {
	start := p.next().Pos
	t := p.tok()
	switch {
	case kwAt(t, "TOPIC"):
		p.next()
		return p.topicWith(&PublishStmt{Start: start, Keep: true}, "KEEP TOPIC")
	case kwAt(t, "ENV") || kwAt(t, "SECRET"):
		p.next()
		s := &EnvStmt{Start: start, Secret: t.Value == "SECRET", Name: p.primary()}
		p.expectKw("WITH", "after KEEP "+t.Value+" <name>")
		s.Value = p.value("KEEP " + t.Value)
		return s
	}
	p.failf(t.Pos, suggest(t, "TOPIC", "ENV", "SECRET"), "expected TOPIC after KEEP, found %s", t)
	return nil
}

// deleteStmt parses DELETE ENV|SECRET <name>.
func (p *parser) deleteStmt() Stmt {
	start := p.next().Pos
	t := p.tok()
	if !kwAt(t, "ENV") && !kwAt(t, "SECRET") {
		p.failf(t.Pos, suggest(t, "ENV", "SECRET"), "expected ENV or SECRET after DELETE, found %s", t)
	}
	p.next()
	return &EnvStmt{Start: start, Secret: t.Value == "SECRET", Delete: true, Name: p.primary()}
}

// publishModel parses PUBLISH MODEL <M> TO <topic> WITH and its field
// lines (indented, or comma-separated on the same line).
func (p *parser) publishModel(start Pos) Stmt {
	s := &PublishModelStmt{Start: start}
	s.Model, s.ModelPos = p.bareName("the model")
	p.expectKw("TO", "after PUBLISH MODEL "+s.Model)
	s.Topic = p.expr()
	p.expectKw("WITH", "after the topic of PUBLISH MODEL")
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT {
		p.next()
		p.next()
		p.enter()
		defer p.leave()
		p.items(func() { s.Fields = append(s.Fields, p.assign("field")) })
		return s
	}
	s.Fields = p.assigns("field")
	return s
}

// assigns parses <name> = <expr> [, <name> = <expr>]... on one line.
func (p *parser) assigns(what string) []*Assign {
	out := []*Assign{p.assign(what)}
	for p.at(COMMA) {
		p.next()
		out = append(out, p.assign(what))
	}
	return out
}

// assign parses <name> = <expr>.
func (p *parser) assign(what string) *Assign {
	a := &Assign{}
	a.Name, a.NamePos = p.bareName("the " + what)
	if !p.at(ASSIGN) && !p.at(EQ) {
		t := p.tok()
		p.failf(t.Pos, "write "+a.Name+" = <value>", "expected '=' after the %s %s, found %s", what, a.Name, t)
	}
	p.next()
	a.Value = p.expr()
	return a
}
