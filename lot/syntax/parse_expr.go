package syntax

import "strings"

// Expression precedence, loosest first:
//
//	IF c THEN a ELSE b       (a primary: its ELSE branch reaches as far as it can)
//	OR
//	AND
//	NOT
//	== = != < > <= >= EQUALS CONTAINS STARTS_WITH ENDS_WITH
//	+ -
//	* / %
//	unary -
//	x AS TYPE, x AND_THEN <FILTER|TRIM|REPLACE>
//	primary
//
// Words that end an expression (WITH, THEN, DO, IN, TO...) are not
// operators, so an expression stops before them without a separator.

// expr parses an expression.
func (p *parser) expr() Expr {
	p.enter()
	defer p.leave()
	return p.orExpr()
}

func (p *parser) orExpr() Expr {
	x := p.andExpr()
	for p.isKw("OR") {
		op := p.next()
		x = &BinaryExpr{X: x, Op: OpOr, OpPos: op.Pos, Y: p.andExpr()}
	}
	return x
}

func (p *parser) andExpr() Expr {
	x := p.notExpr()
	for p.isKw("AND") {
		op := p.next()
		x = &BinaryExpr{X: x, Op: OpAnd, OpPos: op.Pos, Y: p.notExpr()}
	}
	return x
}

func (p *parser) notExpr() Expr {
	if p.isKw("NOT") {
		p.enter()
		defer p.leave()
		op := p.next()
		return &UnaryExpr{OpPos: op.Pos, Op: OpNot, X: p.notExpr()}
	}
	return p.cmpExpr()
}

var cmpOps = map[TokenKind]Op{EQ: OpEq, ASSIGN: OpEq, NE: OpNe, LT: OpLt, GT: OpGt, LE: OpLe, GE: OpGe}

var cmpWords = map[string]Op{"EQUALS": OpEq, "CONTAINS": OpContains, "STARTS_WITH": OpStartsWith, "ENDS_WITH": OpEndsWith}

func (p *parser) cmpExpr() Expr {
	x := p.addExpr()
	for {
		t := p.tok()
		op, ok := cmpOps[t.Kind]
		if t.Kind == WORD {
			op, ok = cmpWords[t.Value]
		}
		if !ok {
			if p.ruleMode && kwAt(t, "IS") {
				return p.ruleIs(x)
			}
			return x
		}
		p.next()
		x = &BinaryExpr{X: x, Op: op, OpPos: t.Pos, Y: p.addExpr()}
	}
}

func (p *parser) addExpr() Expr {
	x := p.mulExpr()
	for p.at(PLUS) || p.at(MINUS) {
		t := p.next()
		op := OpAdd
		if t.Kind == MINUS {
			op = OpSub
		}
		x = &BinaryExpr{X: x, Op: op, OpPos: t.Pos, Y: p.mulExpr()}
	}
	return x
}

var mulOps = map[TokenKind]Op{STAR: OpMul, SLASH: OpDiv, PERCENT: OpMod}

func (p *parser) mulExpr() Expr {
	x := p.unaryExpr()
	for {
		t := p.tok()
		op, ok := mulOps[t.Kind]
		if !ok {
			return x
		}
		p.next()
		x = &BinaryExpr{X: x, Op: op, OpPos: t.Pos, Y: p.unaryExpr()}
	}
}

func (p *parser) unaryExpr() Expr {
	if !p.at(MINUS) {
		return p.postfix(p.primary())
	}
	p.enter()
	defer p.leave()
	op := p.next()
	if n := p.tok(); n.Kind == NUMBER {
		p.next()
		text := "-" + n.Text
		return p.postfix(&NumberLit{Start: op.Pos, Text: text, Value: -numberValue(n.Text)})
	}
	return &UnaryExpr{OpPos: op.Pos, Op: OpNeg, X: p.unaryExpr()}
}

// postfix parses the casts and AND_THEN stages after a primary.
func (p *parser) postfix(x Expr) Expr {
	for {
		switch {
		case p.isKw("AS"):
			t := p.peek(1)
			tn, ok := ParseTypeName(t.Value)
			if t.Kind != WORD || kwAt(t, "TRIGGER") {
				return x
			}
			if !ok {
				p.next()
				p.typeName() // fails with a suggestion
			}
			as := p.next()
			p.next()
			if pl, isPayload := x.(*PayloadExpr); isPayload && tn == TypeBytes {
				pl.Bytes = true
				continue
			}
			x = &CastExpr{X: x, Type: tn, AsPos: as.Pos}
		case p.isKw("AND_THEN"):
			p.next()
			x = p.stage(x)
		default:
			return x
		}
	}
}

// stage parses FILTER, TRIM or REPLACE after AND_THEN, applied to src.
func (p *parser) stage(src Expr) Expr {
	t := p.tok()
	switch t.Value {
	case "FILTER":
		p.next()
		return &FilterExpr{Start: t.Pos, Source: src, Regex: p.usingRegex()}
	case "TRIM":
		p.next()
		return &TrimExpr{Start: t.Pos, Source: src}
	case "REPLACE":
		p.next()
		r := &ReplaceExpr{Start: t.Pos, Source: src, Find: p.primary()}
		p.expectKw("WITH", "after REPLACE <find>")
		r.With = p.addExpr()
		return r
	}
	p.failf(t.Pos, suggest(t, "FILTER", "TRIM", "REPLACE"), "expected FILTER, TRIM or REPLACE after AND_THEN, found %s", t)
	return nil
}

// usingRegex parses USING REGEX <regex>.
func (p *parser) usingRegex() Expr {
	p.expectKw("USING", "before the regular expression of FILTER")
	p.expectKw("REGEX", "after FILTER ... USING")
	return p.primary()
}

// reserved words never stand for a value: finding one where a value is
// expected is an error, not a bare name.
var reserved = map[string]bool{
	"DEFINE": true, "ON": true, "DO": true, "THEN": true, "ELSE": true,
	"CASE": true, "DEFAULT": true, "UNTIL": true, "RETURN": true, "WITH": true,
	"TO": true, "IN": true, "AND": true, "OR": true, "AS": true, "INPUT": true,
	"OUTPUT": true, "DESCRIPTION": true, "ENDIF": true, "USING": true,
	"BETWEEN": true, "ADD": true, "AND_THEN": true, "NOT": true,
}

// primary parses a literal, a variable, a parenthesised expression or a
// keyword form (PAYLOAD, GET TOPIC, TIMESTAMP, ...).
func (p *parser) primary() Expr {
	t := p.tok()
	switch t.Kind {
	case STRING:
		p.next()
		return &StringLit{Start: t.Pos, Value: t.Value, Quote: t.Quote}
	case NUMBER:
		p.next()
		return &NumberLit{Start: t.Pos, Text: t.Text, Value: numberValue(t.Text)}
	case VAR:
		p.next()
		return &VarRef{Start: t.Pos, Name: t.Value}
	case LPAREN:
		p.next()
		x := p.expr()
		p.expect(RPAREN, "to close the '(' at "+t.Pos.String())
		return x
	case LBRACE:
		return p.objectLit()
	case LBRACK:
		return p.arrayLit()
	case WORD:
		return p.wordPrimary(t)
	}
	p.failf(t.Pos, "", "expected a value, found %s", t)
	return nil
}

// wordPrimary parses a primary that starts with a word.
func (p *parser) wordPrimary(t Token) Expr {
	if p.ruleMode {
		if x := p.ruleAtom(t); x != nil {
			return x
		}
	}
	switch t.Value {
	case "TRUE", "FALSE":
		p.next()
		return &BoolLit{Start: t.Pos, Value: t.Value == "TRUE"}
	case "EMPTY":
		p.next()
		return &EmptyLit{Start: t.Pos}
	case "PAYLOAD":
		p.next()
		return &PayloadExpr{Start: t.Pos}
	case "TOPIC":
		p.next()
		p.expectKw("POSITION", "after TOPIC in a value (TOPIC POSITION n)")
		return &TopicPositionExpr{Start: t.Pos, Index: p.primary()}
	case "GET":
		return p.getExpr()
	case "TIMESTAMP":
		return p.timestampExpr()
	case "RANDOM":
		return p.randomExpr()
	case "REPLACE":
		return p.replaceExpr()
	case "FILTER":
		return p.filterExpr()
	case "TRIM":
		p.next()
		return &TrimExpr{Start: t.Pos, Source: p.primary()}
	case "IF":
		return p.condExpr()
	}
	if containsWord(SessionWords, t.Value) {
		p.next()
		return &SessionExpr{Start: t.Pos, Name: t.Value}
	}
	if reserved[t.Value] || stmtWords[t.Value] {
		p.failf(t.Pos, "", "expected a value, found the keyword %s", t.Value)
	}
	p.next()
	return &Ident{Start: t.Pos, Name: t.Text}
}

// replaceExpr parses REPLACE <find> WITH <with> IN <source>.
func (p *parser) replaceExpr() Expr {
	r := &ReplaceExpr{Start: p.next().Pos, Find: p.primary()}
	p.expectKw("WITH", "after REPLACE <find>")
	r.With = p.addExpr()
	p.expectKw("IN", "after REPLACE <find> WITH <replacement>")
	r.Source = p.primary()
	return r
}

// filterExpr parses FILTER [<source>] USING REGEX <regex>.
func (p *parser) filterExpr() Expr {
	f := &FilterExpr{Start: p.next().Pos}
	if !p.isKw("USING") {
		f.Source = p.primary()
	}
	f.Regex = p.usingRegex()
	return f
}

// getExpr parses GET TOPIC|JSON|ENV|SECRET|MODEL.
func (p *parser) getExpr() Expr {
	start := p.next().Pos
	t := p.tok()
	switch t.Value {
	case "TOPIC":
		p.next()
		return &GetTopicExpr{Start: start, Topic: p.topicArg()}
	case "JSON":
		p.next()
		g := &GetJSONExpr{Start: start, Path: p.primary()}
		p.expectKw("IN", "after GET JSON <path>")
		g.Source = p.primary()
		return g
	case "ENV", "SECRET":
		p.next()
		return &GetEnvExpr{Start: start, Secret: t.Value == "SECRET", Name: p.primary()}
	case "MODEL":
		return p.unsupportedExpr(start, "GET MODEL")
	}
	p.failf(t.Pos, suggest(t, "TOPIC", "JSON", "ENV", "SECRET"), "expected TOPIC, JSON, ENV or SECRET after GET, found %s", t)
	return nil
}

// topicArg parses the topic of GET TOPIC: a primary, so that
// GET TOPIC "count" + 1 adds to the value. A concatenation continues the
// topic only across a '/' (GET TOPIC "a/" + {x} + "/b"); parenthesise any
// other computed topic.
func (p *parser) topicArg() Expr {
	x := p.primary()
	last := x
	for p.at(PLUS) {
		next := p.peek(1)
		ls, _ := last.(*StringLit)
		slashBefore := ls != nil && strings.HasSuffix(ls.Value, "/")
		slashAfter := next.Kind == STRING && strings.HasPrefix(next.Value, "/")
		if !slashBefore && !slashAfter {
			break
		}
		op := p.next()
		last = p.primary()
		x = &BinaryExpr{X: x, Op: OpAdd, OpPos: op.Pos, Y: last}
	}
	return x
}

// timestampExpr parses TIMESTAMP [WITH] ["<format>"].
func (p *parser) timestampExpr() Expr {
	e := &TimestampExpr{Start: p.next().Pos}
	if p.isKw("WITH") && (p.peek(1).Kind == STRING || p.peek(1).Kind == VAR) {
		p.next()
	}
	if p.at(STRING) || p.at(VAR) {
		e.Format = p.primary()
	}
	return e
}

// randomExpr parses RANDOM UUID and RANDOM INT|DOUBLE BETWEEN a AND b.
func (p *parser) randomExpr() Expr {
	e := &RandomExpr{Start: p.next().Pos}
	t := p.tok()
	switch t.Value {
	case "UUID":
		p.next()
		e.Kind = RandomUUID
		return e
	case "INT", "DOUBLE":
		p.next()
		e.Kind = RandomInt
		if t.Value == "DOUBLE" {
			e.Kind = RandomDouble
		}
	default:
		p.failf(t.Pos, suggest(t, "UUID", "INT", "DOUBLE"), "expected UUID, INT or DOUBLE after RANDOM, found %s", t)
	}
	p.expectKw("BETWEEN", "after RANDOM "+t.Value)
	e.Min = p.addExpr()
	p.expectKw("AND", "between the bounds of RANDOM")
	e.Max = p.addExpr()
	return e
}

// condExpr parses IF <cond> THEN <a> ELSE <b> as a value.
func (p *parser) condExpr() Expr {
	p.enter()
	defer p.leave()
	e := &CondExpr{Start: p.next().Pos}
	e.Cond = p.cond("IF")
	p.expectKw("THEN", "after the IF condition")
	e.Then = p.expr()
	if p.at(NEWLINE) && kwAt(p.peek(1), "ELSE") {
		p.next()
	}
	p.expectKw("ELSE", "in a conditional value (IF c THEN a ELSE b)")
	e.Else = p.expr()
	return e
}

// objectLit parses { "key": <expr>, ... }.
func (p *parser) objectLit() Expr {
	p.enter()
	defer p.leave()
	o := &ObjectLit{Start: p.next().Pos}
	for !p.at(RBRACE) {
		k := p.tok()
		if k.Kind != STRING && k.Kind != WORD {
			p.failf(k.Pos, "", "expected a key in the JSON object, found %s", k)
		}
		p.next()
		p.expect(COLON, "after the key "+k.Text)
		f := &ObjectField{Key: k.Value, KeyPos: k.Pos, Value: p.expr()}
		if k.Kind == WORD {
			f.Key = k.Text
		}
		o.Fields = append(o.Fields, f)
		if !p.at(COMMA) {
			break
		}
		p.next()
	}
	p.expect(RBRACE, "to close the JSON object at "+o.Start.String())
	return o
}

// arrayLit parses [ <expr>, ... ].
func (p *parser) arrayLit() Expr {
	p.enter()
	defer p.leave()
	a := &ArrayLit{Start: p.next().Pos}
	for !p.at(RBRACK) {
		a.Elems = append(a.Elems, p.expr())
		if !p.at(COMMA) {
			break
		}
		p.next()
	}
	p.expect(RBRACK, "to close the array at "+a.Start.String())
	return a
}

// unsupportedExpr skips the rest of the line of a recognised but
// unsupported expression.
func (p *parser) unsupportedExpr(start Pos, feature string) Expr {
	end := start.Offset
	for t := p.tok(); t.Kind != NEWLINE && t.Kind != EOF && t.Kind != DEDENT; t = p.tok() {
		end = t.End
		p.next()
	}
	return &UnsupportedExpr{Start: start, Feature: feature, Text: p.src[start.Offset:end]}
}
