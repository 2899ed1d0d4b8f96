package syntax

import (
	"slices"
	"strings"
)

// Limits that keep the parser's work bounded on any input.
const (
	maxErrors = 20  // Parse stops after this many errors
	maxDepth  = 100 // nesting of blocks and expressions
)

// Parse parses a LoT source holding one or more definitions, in the
// layout form (statements on indented lines) or the flat form (a whole
// definition on one line, as sent on the command topic). name is used in
// error messages only.
//
// The returned File is never nil; when err is not nil it is an ErrorList
// and the File holds what could be parsed. Parse never panics and its work
// is linear in the size of src.
func Parse(name, src string) (*File, error) {
	toks, lexErrs := Lex(name, src)
	p := &parser{name: name, src: src, toks: toks, errs: lexErrs,
		fuel: 64*len(toks) + 1024}
	p.levels()
	f := &File{Name: name, Src: src}
	p.file(f)
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Pos.Offset - b.Pos.Offset })
	return f, p.errs.Err()
}

// parser is a recursive-descent parser over the token slice. A syntax
// error records an Error and panics with bailout; recovery points (a
// statement, a definition) catch it and skip ahead. tooMany ends the
// whole parse.
type parser struct {
	name  string
	src   string
	toks  []Token
	level []int // indentation level before each token
	i     int
	errs  ErrorList
	fuel  int // token reads left: a guard against any loop that fails to advance
	depth int
	// ruleMode is set while a rule condition is parsed: USER IS, TOPIC
	// EXISTS... are atoms there.
	ruleMode bool
}

type bailout struct{}

type tooMany struct{}

// levels fills p.level: the number of open INDENTs before each token.
func (p *parser) levels() {
	p.level = make([]int, len(p.toks))
	l := 0
	for i, t := range p.toks {
		p.level[i] = l
		switch t.Kind {
		case INDENT:
			l++
		case DEDENT:
			l--
		}
	}
}

// ------------------------------------------------------------ token access

func (p *parser) tok() Token {
	p.fuel--
	if p.fuel < 0 {
		p.errs = append(p.errs, NewError(p.name, p.src, p.toks[p.i].Pos, "",
			"parser gave up: the input is too complex"))
		panic(tooMany{})
	}
	return p.toks[p.i]
}

// peek returns the token n places ahead without consuming anything.
func (p *parser) peek(n int) Token {
	return p.toks[min(p.i+n, len(p.toks)-1)]
}

func (p *parser) next() Token {
	t := p.tok()
	if t.Kind != EOF {
		p.i++
	}
	return t
}

func (p *parser) at(k TokenKind) bool { return p.tok().Kind == k }

// isKw reports whether the current token is one of the keywords (upper
// case).
func (p *parser) isKw(words ...string) bool {
	t := p.tok()
	return t.Kind == WORD && slices.Contains(words, t.Value)
}

func kwAt(t Token, word string) bool { return t.Kind == WORD && t.Value == word }

func (p *parser) acceptKw(word string) bool {
	if p.isKw(word) {
		p.next()
		return true
	}
	return false
}

// expectKw consumes the keyword or fails, suggesting it when the word
// found is a misspelling of it.
func (p *parser) expectKw(word, context string) Pos {
	t := p.tok()
	if kwAt(t, word) {
		p.next()
		return t.Pos
	}
	hint := ""
	if t.Kind == WORD && closeTo(t.Value, word) {
		hint = "did you mean " + word + "?"
	}
	p.failf(t.Pos, hint, "expected %s %s, found %s", word, context, t)
	return Pos{}
}

func (p *parser) expect(k TokenKind, context string) Token {
	t := p.tok()
	if t.Kind != k {
		p.failf(t.Pos, "", "expected %s %s, found %s", k, context, t)
	}
	return p.next()
}

func (p *parser) skipNewlines() {
	for p.at(NEWLINE) {
		p.next()
	}
}

// ------------------------------------------------------------------ errors

// errorf records an error and goes on.
func (p *parser) errorf(pos Pos, hint, format string, args ...any) {
	p.errs = append(p.errs, NewError(p.name, p.src, pos, hint, format, args...))
	if len(p.errs) >= maxErrors {
		panic(tooMany{})
	}
}

// failf records an error and abandons the current statement or
// definition.
func (p *parser) failf(pos Pos, hint, format string, args ...any) {
	p.errorf(pos, hint, format, args...)
	panic(bailout{})
}

// enter and leave bound the nesting of blocks and expressions.
func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		p.depth = 0 // let the recovery code parse again
		p.failf(p.tok().Pos, "split it into simpler parts", "too deeply nested")
	}
}

func (p *parser) leave() { p.depth-- }

// recoverTo runs f; on a syntax error it skips the rest of the item that
// started at token start (its line and any block indented under it).
func (p *parser) recoverTo(start int, f func()) {
	depth := p.depth
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			p.depth = depth
			p.skipItem(start)
		}
	}()
	f()
}

// skipItem skips from the current token to the end of the item that began
// at token start: the rest of its logical line, the block indented under
// it, and continuation clauses (ELSE, CASE, UNTIL...) at its own level.
// It stops before the DEDENT that closes the enclosing block and before
// the next definition, and always makes progress.
func (p *parser) skipItem(start int) {
	lvl := p.level[start]
	if p.i == start && !p.defStart(p.i) {
		p.i++
	}
	for p.i < len(p.toks)-1 {
		t := p.toks[p.i]
		if p.defStart(p.i) || (t.Kind == DEDENT && p.level[p.i] <= lvl) {
			return
		}
		p.i++
		if t.Kind != NEWLINE || p.level[p.i-1] > lvl {
			continue
		}
		for p.i < len(p.toks)-1 && (p.toks[p.i].Kind == INDENT || p.level[p.i] > lvl) {
			p.i++
		}
		if !continuesItem(p.toks[p.i]) {
			return
		}
	}
}

// skipIndented skips an unexpected indented block: the INDENT at the
// current token and everything up to its DEDENT.
func (p *parser) skipIndented() {
	lvl := p.level[p.i]
	p.i++
	for p.i < len(p.toks)-1 && p.level[p.i] > lvl {
		p.i++
	}
}

// continuesItem reports whether a line starting with t belongs to the
// statement above it.
func continuesItem(t Token) bool {
	return t.Kind == WORD && slices.Contains([]string{"ELSE", "CASE", "DEFAULT", "UNTIL", "ENDIF"}, t.Value)
}

// defStart reports whether token i is a DEFINE that starts a line at the
// left margin.
func (p *parser) defStart(i int) bool {
	if !kwAt(p.toks[i], "DEFINE") || p.level[i] != 0 {
		return false
	}
	return i == 0 || p.toks[i-1].Kind == NEWLINE || p.toks[i-1].Kind == DEDENT
}

// ------------------------------------------------------------- definitions

func (p *parser) file(f *File) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(tooMany); !ok {
				panic(r)
			}
		}
	}()
	for {
		for p.at(NEWLINE) || p.at(DEDENT) {
			p.next()
		}
		if p.at(EOF) {
			return
		}
		if !p.defStart(p.i) {
			p.strayTop()
			continue
		}
		if d := p.def(); d != nil {
			f.Defs = append(f.Defs, d)
		}
	}
}

// strayTop reports a token where a definition should start and skips to
// the next definition.
func (p *parser) strayTop() {
	t := p.tok()
	switch {
	case kwAt(t, "DEFINE") || t.Kind == INDENT:
		p.errorf(t.Pos, "start every DEFINE at the left margin", "definition is indented")
	case t.Kind == WORD && closeTo(t.Value, "DEFINE"):
		p.errorf(t.Pos, "did you mean DEFINE?", "expected DEFINE, found %s", t)
	default:
		p.errorf(t.Pos, "a LoT source is a sequence of DEFINE ACTION|MODEL|RULE|CONNECTOR blocks",
			"expected DEFINE, found %s", t)
	}
	p.i++
	for p.i < len(p.toks)-1 && !p.defStart(p.i) {
		p.i++
	}
}

var defKinds = map[string]DefKind{
	"ACTION": KindAction, "MODEL": KindModel, "RULE": KindRule,
	"CONNECTOR": KindConnector, "ROUTE": KindConnector, "PANEL": KindPanel,
	"VISU": KindPanel, "THEME": KindTheme, "THING": KindThing, "AGENT": KindAgent,
}

// def parses one definition. On a syntax error in its header it returns
// nil, having skipped to the next definition.
func (p *parser) def() (d Def) {
	first := p.i
	start := p.next() // DEFINE
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			d = nil
			p.depth, p.ruleMode = 0, false
			p.skipToDef()
		}
	}()
	kt := p.tok()
	kind, ok := defKinds[kt.Value]
	if kt.Kind != WORD || !ok {
		p.failf(kt.Pos, suggest(kt, "ACTION", "MODEL", "RULE", "CONNECTOR", "ROUTE"),
			"expected ACTION, MODEL, RULE or CONNECTOR after DEFINE, found %s", kt)
	}
	p.next()
	h := DefHeader{Start: start.Pos, Kind: kind, Keyword: kt.Value}
	switch kind {
	case KindAction:
		d = p.action(h)
	case KindModel:
		d = p.model(h)
	case KindRule:
		d = p.rule(h)
	case KindConnector:
		d = p.connector(h)
	default:
		d = p.unsupportedDef(h)
	}
	p.endDef()
	p.setSpan(d.Header(), first)
	return d
}

// endDef checks that the definition ended where the next one starts.
func (p *parser) endDef() {
	for p.at(NEWLINE) || (p.at(DEDENT) && p.level[p.i] > 0) {
		p.next()
	}
	if p.at(EOF) || p.defStart(p.i) {
		return
	}
	t := p.tok()
	hint := ""
	if t.Kind == WORD && (stmtWords[t.Value] || t.Value == "ADD" || t.Value == "WITH") {
		hint = "indent the body of the definition by 4 spaces"
	}
	if kwAt(t, "DEFINE") {
		hint = "start each DEFINE on a line of its own"
	}
	p.failf(t.Pos, hint, "unexpected %s after the definition", t)
}

func (p *parser) skipToDef() {
	for p.i < len(p.toks)-1 && !p.defStart(p.i) {
		p.i++
	}
}

// setSpan gives the definition that starts at token first its source
// span: up to the next definition, without trailing white space.
func (p *parser) setSpan(h *DefHeader, first int) {
	start := p.toks[first].Pos.Offset
	end := len(p.src)
	if p.i < len(p.toks)-1 {
		end = p.toks[p.i].Pos.Offset
	}
	end = start + len(strings.TrimRight(p.src[start:end], " \t\r\n"))
	h.Span = Span{Start: start, End: end}
	h.Text = p.src[start:end]
}

// defName reads a definition name: a bare word, where '-' and '.' glued
// between words are part of it (Line-1.Press).
func (p *parser) defName(what string) (string, Pos) {
	t := p.tok()
	switch t.Kind {
	case STRING:
		p.next()
		p.errorf(t.Pos, "write the name without quotes: "+t.Value,
			"the name of %s must be a bare identifier, not a string", what)
		return t.Value, t.Pos
	case WORD, NUMBER:
	default:
		p.failf(t.Pos, "", "expected the name of %s, found %s", what, t)
	}
	p.next()
	end := t.End
	for {
		sep, w := p.peek(0), p.peek(1)
		glued := (sep.Kind == MINUS || (sep.Kind == ILLEGAL && sep.Text == ".")) && !sep.Spaced &&
			(w.Kind == WORD || w.Kind == NUMBER) && !w.Spaced
		if !glued {
			break
		}
		p.next()
		p.next()
		end = w.End
	}
	return p.src[t.Pos.Offset:end], t.Pos
}

// unsupportedDef parses DEFINE PANEL|VISU|THEME|THING|AGENT far enough to
// name it, and skips its body.
func (p *parser) unsupportedDef(h DefHeader) Def {
	t := p.tok()
	if t.Kind == STRING || t.Kind == WORD {
		h.Name, h.NamePos = t.Value, t.Pos
		if t.Kind == WORD {
			h.Name = t.Text
		}
	}
	p.skipToDef()
	return &UnsupportedDef{DefHeader: h}
}
