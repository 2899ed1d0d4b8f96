package syntax

import "strings"

// action parses DEFINE ACTION after the ACTION keyword.
func (p *parser) action(h DefHeader) *Action {
	h.Name, h.NamePos = p.defName("the action")
	a := &Action{DefHeader: h}
	p.skipNewlines()
	t := p.tok()
	switch {
	case kwAt(t, "ON"):
		a.Trigger = p.trigger()
		p.skipNewlines()
		p.expectDo(a.Trigger)
	case kwAt(t, "INPUT") || kwAt(t, "DO"):
		a.Inputs = p.inputs()
		p.expectKw("DO", "to start the body of the callable action")
	case t.Kind == INDENT && kwAt(p.peek(1), "ON"):
		p.failf(p.peek(1).Pos, "write ON at the same column as DEFINE ACTION",
			"the trigger line must not be indented")
	default:
		p.failf(t.Pos, `an action needs a trigger (ON TOPIC "a/b" DO) or, if callable, DO`+suggestFor(t, " ", "ON", "DO", "INPUT"),
			"expected ON or DO after DEFINE ACTION %s, found %s", a.Name, t)
	}
	a.Body = p.body("DO")
	p.actionTail(a)
	return a
}

// expectDo consumes the DO after a trigger, with a hint that shows the
// trigger line completed when it is missing.
func (p *parser) expectDo(tr *Trigger) {
	t := p.tok()
	if kwAt(t, "DO") {
		p.next()
		return
	}
	if t.Kind == WORD && closeTo(t.Value, "DO") && !stmtWords[t.Value] {
		p.failf(t.Pos, "did you mean DO?", "expected DO after the trigger, found %s", t)
	}
	line := strings.TrimSpace(p.src[tr.Start.Offset:p.toks[p.i-1].End])
	p.failf(t.Pos, "end the trigger with DO: "+line+" DO",
		"missing DO after the trigger %s, found %s", tr.Kind, t)
}

// actionTail parses RETURN/OUTPUT and DESCRIPTION after the body.
func (p *parser) actionTail(a *Action) {
	for {
		p.skipNewlines()
		switch {
		case p.isKw("RETURN"):
			p.next()
			a.Outputs = append(a.Outputs, p.outputs()...)
		case p.isKw("DESCRIPTION"):
			p.next()
			t := p.expect(STRING, "after DESCRIPTION")
			a.Description = &StringLit{Start: t.Pos, Value: t.Value, Quote: t.Quote}
		default:
			return
		}
	}
}

// inputs parses the INPUT lines of a callable action.
func (p *parser) inputs() []*Input {
	var in []*Input
	for {
		p.skipNewlines()
		if !p.isKw("INPUT") {
			return in
		}
		n := &Input{Start: p.next().Pos}
		n.Name, n.NamePos = p.bareName("the input")
		p.expectKw("AS", "after the input name")
		n.Type, n.TypePos = p.typeName()
		in = append(in, n)
	}
}

// outputs parses what follows RETURN: OUTPUT lines, indented or not.
func (p *parser) outputs() []*Output {
	indented := false
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT {
		p.next()
		p.next()
		indented = true
	}
	var out []*Output
	for {
		for p.at(NEWLINE) || p.at(COMMA) {
			p.next()
		}
		if !p.isKw("OUTPUT") {
			break
		}
		o := &Output{Start: p.next().Pos}
		o.Name, o.NamePos = p.bareName("the output")
		out = append(out, o)
	}
	if len(out) == 0 {
		t := p.tok()
		p.failf(t.Pos, "write one OUTPUT <name> per line under RETURN", "expected OUTPUT, found %s", t)
	}
	if indented {
		p.closeBlock("the OUTPUT lines")
	}
	return out
}

// closeBlock consumes the DEDENT that ends an indented block.
func (p *parser) closeBlock(what string) {
	p.skipNewlines()
	if p.at(EOF) {
		return
	}
	if !p.at(DEDENT) {
		t := p.tok()
		p.failf(t.Pos, "", "unexpected %s after %s", t, what)
	}
	p.next()
}

// bareName reads a name written as a word, a "string" or a {variable}.
func (p *parser) bareName(what string) (string, Pos) {
	t := p.tok()
	switch t.Kind {
	case WORD:
		p.next()
		return t.Text, t.Pos
	case STRING, VAR:
		p.next()
		return t.Value, t.Pos
	}
	p.failf(t.Pos, "", "expected the name of %s, found %s", what, t)
	return "", Pos{}
}

// typeName reads a type keyword.
func (p *parser) typeName() (TypeName, Pos) {
	t := p.tok()
	if tn, ok := ParseTypeName(t.Value); ok && t.Kind == WORD {
		p.next()
		return tn, t.Pos
	}
	words := make([]string, len(typeNames))
	for i, n := range typeNames {
		words[i] = string(n)
	}
	p.failf(t.Pos, suggest(t, words...), "expected a type (STRING, INT, DOUBLE, BOOL, TIMESTAMP, JSON, OBJECT, ARRAY), found %s", t)
	return "", Pos{}
}

var triggerWords = []string{"TOPIC", "CHANGE", "EVERY", "TIMESTAMP", "START", "CONNECT", "DISCONNECT", "SUBSCRIBE"}

var dayWords = []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY", "WEEKDAY", "WEEKEND", "DAY"}

// trigger parses ON <trigger>.
func (p *parser) trigger() *Trigger {
	tr := &Trigger{Start: p.next().Pos}
	t := p.tok()
	switch t.Value {
	case "TOPIC", "CHANGE":
		p.next()
		tr.Kind = TriggerTopic
		if t.Value == "CHANGE" {
			tr.Kind = TriggerChange
		}
		tr.Topic = p.expr()
	case "EVERY":
		p.next()
		p.every(tr)
	case "TIMESTAMP":
		p.next()
		tr.Kind = TriggerTimestamp
		at := p.expect(STRING, `after ON TIMESTAMP ("HH:mm:ss" or "dd-MM-yyyy HH:mm:ss")`)
		tr.At, tr.AtPos = at.Value, at.Pos
	case "START", "CONNECT", "DISCONNECT":
		p.next()
		tr.Kind = map[string]TriggerKind{"START": TriggerStart, "CONNECT": TriggerConnect,
			"DISCONNECT": TriggerDisconnect}[t.Value]
	case "SUBSCRIBE":
		p.next()
		tr.Kind = TriggerSubscribe
		if !p.isKw("DO") && !p.at(NEWLINE) {
			tr.Topic = p.expr()
		}
	default:
		p.failf(t.Pos, suggest(t, triggerWords...),
			"unknown trigger %s after ON (want TOPIC, CHANGE, EVERY, TIMESTAMP, START, CONNECT, DISCONNECT or SUBSCRIBE)", t)
	}
	return tr
}

// every parses what follows ON EVERY: n UNIT, or a day and AT "time".
func (p *parser) every(tr *Trigger) {
	t := p.tok()
	if t.Kind == WORD {
		day := t.Value
		if !containsWord(dayWords, day) {
			p.failf(t.Pos, suggest(t, dayWords...), "expected a number or a day after ON EVERY, found %s", t)
		}
		p.next()
		tr.Kind, tr.Day, tr.DayPos = TriggerDaily, day, t.Pos
		p.expectKw("AT", "after ON EVERY "+day)
		at := p.expect(STRING, `after AT ("HH:mm" or "HH:mm:ss")`)
		tr.At, tr.AtPos = at.Value, at.Pos
		return
	}
	tr.Kind = TriggerEvery
	tr.CountPos = t.Pos
	neg := p.at(MINUS)
	if neg {
		p.next()
	}
	n := p.expect(NUMBER, "after ON EVERY")
	tr.CountText, tr.Count = n.Text, numberValue(n.Text)
	if neg {
		tr.CountText, tr.Count = "-"+n.Text, -tr.Count
	}
	u := p.tok()
	unit, ok := ParseTimeUnit(u.Value)
	if u.Kind != WORD || !ok {
		p.failf(u.Pos, suggest(u, "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS", "WEEKS", "MONTHS", "YEARS"),
			"expected a time unit after ON EVERY %s, found %s", tr.CountText, u)
	}
	p.next()
	tr.Unit, tr.UnitPos = unit, u.Pos
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}
