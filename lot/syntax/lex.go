package syntax

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tabWidth is how many columns of indentation a tab counts for: one
// level, like four spaces.
const tabWidth = 4

// Lex splits src into tokens, ending with EOF. It never fails: problems
// (an unterminated string, an indentation that matches no outer level)
// are returned as errors beside the tokens, and characters that belong to
// no token come out as ILLEGAL tokens for the parser to report.
func Lex(name, src string) ([]Token, ErrorList) {
	lx := &lexer{name: name, src: src, line: 1, col: 1, toks: make([]Token, 0, len(src)/8+8)}
	if strings.HasPrefix(src, "\uFEFF") {
		lx.off = len("\uFEFF") // a byte order mark is not text
	}
	lx.run()
	return lx.toks, lx.errs
}

// lexer holds the scanning state. Indentation is a stack of widths, as in
// Python: a deeper line pushes and emits INDENT, a shallower one pops and
// emits one DEDENT per level. Inside brackets and after a comma at the end
// of a line, line breaks are ignored.
type lexer struct {
	name    string
	src     string
	off     int
	line    int
	col     int
	toks    []Token
	errs    ErrorList
	indents []int
	depth   int  // open brackets: ( [ {
	pending bool // the logical line has tokens and needs a NEWLINE
	lastEnd Pos  // just after the last token: where a NEWLINE is placed
	spaced  bool // white space or a line start precedes the next token
}

func (lx *lexer) run() {
	for lx.off < len(lx.src) {
		lx.startLine()
		lx.scanLine()
	}
	end := lx.pos()
	if lx.pending {
		lx.emit(Token{Kind: NEWLINE, Pos: lx.lastEnd, End: lx.lastEnd.Offset})
	}
	for i := 1; i < len(lx.indents); i++ {
		lx.emit(Token{Kind: DEDENT, Pos: end, End: lx.off})
	}
	lx.emit(Token{Kind: EOF, Pos: end, End: lx.off})
}

func (lx *lexer) pos() Pos { return Pos{Line: lx.line, Col: lx.col, Offset: lx.off} }

func (lx *lexer) emit(t Token) { lx.toks = append(lx.toks, t) }

func (lx *lexer) errorf(p Pos, hint, format string, args ...any) {
	lx.errs = append(lx.errs, NewError(lx.name, lx.src, p, hint, format, args...))
}

// advance moves n bytes forward, keeping line and column.
func (lx *lexer) advance(n int) {
	end := min(lx.off+n, len(lx.src))
	for lx.off < end {
		r, size := utf8.DecodeRuneInString(lx.src[lx.off:])
		lx.off += size
		if r == '\n' {
			lx.line++
			lx.col = 1
		} else {
			lx.col++
		}
	}
}

// startLine measures the indentation of the physical line that starts at
// lx.off and emits NEWLINE, INDENT and DEDENT as needed. Blank and
// comment-only lines change nothing.
func (lx *lexer) startLine() {
	lx.spaced = true
	width, i := 0, lx.off
	for ; i < len(lx.src); i++ {
		c := lx.src[i]
		if c == ' ' {
			width++
		} else if c == '\t' {
			width += tabWidth
		} else {
			break
		}
	}
	if lx.blankFrom(i) {
		return
	}
	if lx.depth > 0 || lx.afterComma() {
		if len(lx.indents) == 0 || width > lx.indents[0] {
			return // a continuation line inside brackets or after a comma
		}
		lx.depth = 0 // a line back at the left margin: the bracket was never closed
	}
	lx.advance(i - lx.off)
	lx.indent(width)
}

// blankFrom reports whether the line from byte i on holds nothing but
// white space and comments (a block comment that runs past the line
// counts as blank only if the rest of the line where it ends is blank).
func (lx *lexer) blankFrom(i int) bool {
	for {
		for i < len(lx.src) && (lx.src[i] == ' ' || lx.src[i] == '\t' || lx.src[i] == '\r') {
			i++
		}
		rest := lx.src[i:]
		switch {
		case rest == "" || rest[0] == '\n':
			return true
		case strings.HasPrefix(rest, "//") || strings.HasPrefix(rest, "--"):
			return true
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return true
			}
			i += 2 + end + 2
		default:
			return false
		}
	}
}

// afterComma reports whether the last token is a comma that ends a line,
// which continues the logical line on the next one.
func (lx *lexer) afterComma() bool {
	return lx.pending && len(lx.toks) > 0 && lx.toks[len(lx.toks)-1].Kind == COMMA
}

// indent emits the layout tokens for a non-blank line of the given width.
func (lx *lexer) indent(width int) {
	p := lx.pos()
	if len(lx.indents) == 0 {
		lx.indents = append(lx.indents, width) // the first line sets the margin
		return
	}
	if lx.pending {
		lx.emit(Token{Kind: NEWLINE, Pos: lx.lastEnd, End: lx.lastEnd.Offset})
		lx.pending = false
	}
	top := lx.indents[len(lx.indents)-1]
	if width > top {
		lx.indents = append(lx.indents, width)
		lx.emit(Token{Kind: INDENT, Pos: p, End: lx.off})
		return
	}
	for len(lx.indents) > 1 && width < lx.indents[len(lx.indents)-1] {
		lx.indents = lx.indents[:len(lx.indents)-1]
		lx.emit(Token{Kind: DEDENT, Pos: p, End: lx.off})
	}
	if top = lx.indents[len(lx.indents)-1]; width != top {
		lx.errorf(p, "indent by 4 spaces (or one tab) per level",
			"indentation of %d columns matches no outer level (%d)", width, top)
	}
}

// scanLine emits the tokens of one physical line and consumes its line
// break (a block comment may carry it over several lines).
func (lx *lexer) scanLine() {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == '\n':
			lx.advance(1)
			return
		case c == ' ' || c == '\t' || c == '\r':
			lx.advance(1)
			lx.spaced = true
		case lx.comment():
			lx.spaced = true
		default:
			lx.token()
			lx.spaced = false
		}
	}
}

// comment skips a comment at lx.off and reports whether there was one. A
// line comment stops before the line break.
func (lx *lexer) comment() bool {
	rest := lx.src[lx.off:]
	switch {
	case strings.HasPrefix(rest, "//") || strings.HasPrefix(rest, "--"):
		n := strings.IndexByte(rest, '\n')
		if n < 0 {
			n = len(rest)
		}
		lx.advance(n)
		return true
	case strings.HasPrefix(rest, "/*"):
		p := lx.pos()
		n := strings.Index(rest[2:], "*/")
		if n < 0 {
			lx.errorf(p, "close it with */", "unterminated /* comment")
			lx.advance(len(rest))
			return true
		}
		lx.advance(2 + n + 2)
		return true
	}
	return false
}

var punct = map[byte]TokenKind{
	'(': LPAREN, ')': RPAREN, '{': LBRACE, '}': RBRACE, '[': LBRACK, ']': RBRACK,
	',': COMMA, ':': COLON, '+': PLUS, '-': MINUS, '*': STAR, '/': SLASH,
	'%': PERCENT, '=': ASSIGN, '<': LT, '>': GT,
}

var punct2 = map[string]TokenKind{"==": EQ, "!=": NE, "<=": LE, ">=": GE, "<>": NE}

// token scans one token at lx.off.
func (lx *lexer) token() {
	p := lx.pos()
	rest := lx.src[lx.off:]
	c := rest[0]
	r, size := utf8.DecodeRuneInString(rest)
	switch {
	case c == '"' || c == '\'':
		lx.str(p, c)
	case c >= '0' && c <= '9':
		lx.number(p)
	case isWordStart(r):
		n := wordLen(rest)
		lx.add(p, WORD, n, strings.ToUpper(rest[:n]))
	case c == '{' && varLen(rest) > 0:
		n := varLen(rest)
		lx.add(p, VAR, n, strings.TrimSpace(rest[1:n-1]))
	case len(rest) >= 2 && punct2[rest[:2]] != 0:
		lx.add(p, punct2[rest[:2]], 2, rest[:2])
	case punct[c] != 0:
		lx.bracket(c)
		lx.add(p, punct[c], 1, rest[:1])
	default:
		lx.add(p, ILLEGAL, size, rest[:size])
	}
}

func (lx *lexer) add(p Pos, k TokenKind, n int, value string) {
	text := lx.src[lx.off : lx.off+n]
	lx.advance(n)
	lx.emit(Token{Kind: k, Pos: p, End: lx.off, Text: text, Value: value, Spaced: lx.spaced})
	lx.pending = true
	lx.lastEnd = lx.pos()
}

// bracket keeps the count of open brackets.
func (lx *lexer) bracket(c byte) {
	switch c {
	case '(', '[', '{':
		lx.depth++
	case ')', ']', '}':
		if lx.depth > 0 {
			lx.depth--
		}
	}
}

func isWordStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordLen(s string) int {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !isWordRune(r) {
			break
		}
		n += size
	}
	return n
}

// varLen returns the length of a {name} variable at the start of s, or 0.
// The name is a word that may also hold '.' and '-' ({payload.json}).
func varLen(s string) int {
	i := 1
	for i < len(s) && s[i] == ' ' {
		i++
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	if !isWordStart(r) {
		return 0
	}
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) && r != '.' && r != '-' {
			break
		}
		i += size
	}
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	return 0
}

// number scans 42, 2.5, 1e3, 1.5E-3.
func (lx *lexer) number(p Pos) {
	s := lx.src[lx.off:]
	n := digits(s, 0)
	if n+1 < len(s) && s[n] == '.' && isDigit(s[n+1]) {
		n = digits(s, n+1)
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		m := n + 1
		if m < len(s) && (s[m] == '+' || s[m] == '-') {
			m++
		}
		if m < len(s) && isDigit(s[m]) {
			n = digits(s, m)
		}
	}
	lx.add(p, NUMBER, n, s[:n])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// str scans a string quoted by q. A string ends at its closing quote and
// never spans lines.
func (lx *lexer) str(p Pos, q byte) {
	s := lx.src[lx.off:]
	var b strings.Builder
	i := 1
	for ; i < len(s); i++ {
		c := s[i]
		if c == q || c == '\n' {
			break
		}
		if c == '\\' && i+1 < len(s) {
			if d, ok := unescape(s[i+1], q); ok {
				b.WriteByte(d)
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	if i >= len(s) || s[i] != q {
		lx.errorf(p, "close the string with "+string(q)+" on the same line", "unterminated string")
		text := strings.TrimRight(s[:i], "\r")
		lx.add(p, STRING, len(text), strings.TrimRight(b.String(), "\r"))
	} else {
		lx.add(p, STRING, i+1, b.String())
	}
	lx.toks[len(lx.toks)-1].Quote = q
}

// unescape decodes the escapes \" \' \\ \n \t; others stay as written.
func unescape(c, q byte) (byte, bool) {
	switch c {
	case q, '\\':
		return c, true
	case 'n':
		return '\n', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// numberValue parses a NUMBER token's text.
func numberValue(text string) float64 {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0 // out of range: ParseFloat already gives ±Inf with the error
	}
	return f
}
