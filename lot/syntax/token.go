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
