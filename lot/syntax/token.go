package syntax

import "fmt"

// TokenKind says what a token is.
type TokenKind int

// The token kinds. NEWLINE ends a logical line; INDENT and DEDENT open
// and close an indented block, Python style. Keywords are WORD tokens: a
// word is a keyword only where the grammar expects that keyword, so a
// model field may be called "status" or "value".
const (
	EOF TokenKind = iota
	NEWLINE
	INDENT
	DEDENT
	WORD   // letters, digits and '_', starting with a letter or '_'
	STRING // "text" or 'text'
	NUMBER // 42, 2.5, 1e3
	VAR    // {name}
	LPAREN
	RPAREN
	LBRACE
	RBRACE
	LBRACK
	RBRACK
	COMMA
	COLON
	PLUS
	MINUS
	STAR
	SLASH
	PERCENT
	ASSIGN // =
	EQ     // ==
	NE     // !=
	LT
	GT
	LE
	GE
	ILLEGAL // any other character, such as '.' or ';'
)

var tokenNames = [...]string{
	EOF: "end of input", NEWLINE: "end of line", INDENT: "indentation",
	DEDENT: "end of indented block", WORD: "word", STRING: "string",
	NUMBER: "number", VAR: "variable", LPAREN: "'('", RPAREN: "')'",
	LBRACE: "'{'", RBRACE: "'}'", LBRACK: "'['", RBRACK: "']'", COMMA: "','",
	COLON: "':'", PLUS: "'+'", MINUS: "'-'", STAR: "'*'", SLASH: "'/'",
	PERCENT: "'%'", ASSIGN: "'='", EQ: "'=='", NE: "'!='", LT: "'<'", GT: "'>'",
	LE: "'<='", GE: "'>='", ILLEGAL: "character",
}

// String names the kind for error messages: "end of line", "'('", ...
func (k TokenKind) String() string {
	if int(k) < len(tokenNames) && tokenNames[k] != "" {
		return tokenNames[k]
	}
	return fmt.Sprintf("TokenKind(%d)", int(k))
}

// Token is one lexical element.
type Token struct {
	Kind TokenKind
	Pos  Pos
	End  int    // byte offset just after the token
	Text string // the token exactly as written
	// Value is the decoded text of a STRING, the name inside a VAR and the
	// upper-case form of a WORD.
	Value string
	Quote byte // '"' or '\'' for a STRING
	// Spaced is set when white space, a comment or a line start comes
	// right before the token; words glued by '.' or '-' (DB1.DBD0) are
	// recognised by its absence.
	Spaced bool
}

// String describes the token for error messages: `"PUBLSH"`, "end of
// line".
func (t Token) String() string {
	switch t.Kind {
	case WORD:
		return t.Text
	case STRING:
		return fmt.Sprintf("string %s", clip(t.Text, 30))
	case NUMBER:
		return "number " + t.Text
	case VAR:
		return "variable " + t.Text
	case ILLEGAL:
		return fmt.Sprintf("character %q", t.Text)
	}
	return t.Kind.String()
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

// Pos is a place in a LoT source: Line and Col count from 1, Col in
// runes (a tab is one rune), Offset in bytes from the start of the
// source. The zero Pos means "no position".
type Pos struct {
	Line   int
	Col    int
	Offset int
}

// IsValid reports whether p names a place in a source.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String formats p as "line:col".
func (p Pos) String() string {
	if !p.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Col)
}

// Span is a half-open byte range [Start, End) of a source.
type Span struct {
	Start int
	End   int
}

// Text returns the part of src that s covers, or "" when s is outside src.
func (s Span) Text(src string) string {
	if s.Start < 0 || s.End > len(src) || s.Start > s.End {
		return ""
	}
	return src[s.Start:s.End]
}

// lineAt returns the text of the line that holds byte offset off, without
// its line break.
func lineAt(src string, off int) string {
	if off < 0 || off > len(src) {
		return ""
	}
	start := off
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	end := off
	for end < len(src) && src[end] != '\n' {
		end++
	}
	line := src[start:end]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}
