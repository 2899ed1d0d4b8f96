package syntax

import (
	"fmt"
	"strings"
)

// Error is a syntax error at a position of a named source. Line is the
// source line that holds Pos, kept so that Format can show it without the
// source.
type Error struct {
	File string // the name given to Parse
	Pos  Pos
	Msg  string
	Hint string // a likely fix, or ""
	Line string
}

// Error returns "file:line:col: msg", and the hint after a semicolon.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Format returns the error on several lines: the message, the offending
// source line with a caret under the column, and the hint.
//
//	prog.lot:3:5: unknown statement PUBLSH
//	    PUBLSH TOPIC "t" WITH 1
//	    ^
//	hint: did you mean PUBLISH?
func (e *Error) Format() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%s: %s\n", e.Pos, e.Msg)
	if e.Line != "" || e.Pos.IsValid() {
		b.WriteString(e.Line)
		b.WriteByte('\n')
		b.WriteString(caretPad(e.Line, e.Pos.Col))
		b.WriteString("^\n")
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "hint: %s\n", e.Hint)
	}
	return b.String()
}

// caretPad returns the white space that puts a caret under rune column
// col of line: tabs are kept so the caret lines up in any tab width.
func caretPad(line string, col int) string {
	var b strings.Builder
	i := 1
	for _, r := range line {
		if i >= col {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		i++
	}
	for ; i < col; i++ {
		b.WriteByte(' ')
	}
	return b.String()
}

// ErrorList is the error Parse returns: every syntax error found, in
// source order.
type ErrorList []*Error

// Error returns the first error and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0].Error(), len(l)-1)
}

// Format returns every error in its multi-line form.
func (l ErrorList) Format() string {
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.Format())
	}
	return b.String()
}

// Err returns l as an error, or nil when l is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// NewError builds an Error at pos of src, filling Line. The checker uses
// it so that its diagnostics format like syntax errors.
func NewError(file, src string, pos Pos, hint, format string, args ...any) *Error {
	return &Error{File: file, Pos: pos, Msg: fmt.Sprintf(format, args...), Hint: hint,
		Line: lineAt(src, pos.Offset)}
}

// suggest returns "did you mean W?" when the word token t is a likely
// misspelling of one of words, else "".
func suggest(t Token, words ...string) string {
	return suggestFor(t, "did you mean ", words...)
}

// suggestFor is suggest with another lead-in: it returns lead + W + "?"
// for the closest of words, or "".
func suggestFor(t Token, lead string, words ...string) string {
	if t.Kind != WORD {
		return ""
	}
	if w := Closest(t.Value, words); w != "" {
		return lead + w + "?"
	}
	return ""
}

// closeTo reports whether word is a likely misspelling of want.
func closeTo(word, want string) bool { return Closest(word, []string{want}) != "" }

// Closest returns the candidate nearest to word (compared in upper case)
// when it is near enough to be a likely misspelling: at most one edit for
// short words, about one edit per three letters for longer ones. An exact
// match is not a misspelling and returns "".
func Closest(word string, candidates []string) string {
	w := upper(word)
	best, bestD := "", 1<<30
	for _, c := range candidates {
		cu := upper(c)
		if cu == w {
			return ""
		}
		limit := max(1, min(len(w), len(cu))/3)
		if d := editDistance(w, cu, limit); d <= limit && d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (adjacent swaps count
// as one edit) between a and b, or limit+1 when it is larger than limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	if len(a) > 64 || len(b) > 64 {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
