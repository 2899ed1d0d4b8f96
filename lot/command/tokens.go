package command

import (
	"errors"
	"slices"
	"strings"
)

// cutWord splits s at its first blank: the word, and the rest starting
// with that blank.
func cutWord(s string) (word, rest string) {
	if i := strings.IndexAny(s, spaces); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

var errUnterminated = errors.New("unterminated quote")

// nextToken reads one quote-aware token after leading blanks. Quotes
// (double or single) group blanks into a token and are removed; inside
// double quotes a backslash escapes '"' and '\'. found is false when only
// blanks remain.
func nextToken(s string) (tok, rest string, found bool, err error) {
	s = strings.TrimLeft(s, spaces)
	if s == "" {
		return "", "", false, nil
	}
	var b strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == 0 && strings.IndexByte(spaces, c) >= 0:
			return b.String(), s[i:], true, nil
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case c == quote:
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", "", false, errUnterminated
	}
	return b.String(), "", true, nil
}

// tokens splits s into quote-aware tokens.
func tokens(s string) ([]string, error) {
	var out []string
	for {
		tok, rest, found, err := nextToken(s)
		if err != nil || !found {
			return out, err
		}
		out = append(out, tok)
		s = rest
	}
}

// requestFlag reports whether word is the request id flag (-requestId,
// --request-id, any case), possibly with an inline "=value".
func requestFlag(word string) (inline string, hasInline, ok bool) {
	if !strings.HasPrefix(word, "-") {
		return "", false, false
	}
	flag, value, has := strings.Cut(word, "=")
	return value, has, fold(flag) == "requestid"
}

// extractRequestID removes a -requestId flag and its value from the
// arguments, right after the command name or at the very end.
func extractRequestID(rest string) (string, string, error) {
	word, after := cutWord(strings.TrimLeft(rest, spaces))
	if inline, has, ok := requestFlag(word); ok {
		if has {
			return after, unquote(inline), nil
		}
		id, after, found, err := nextToken(after)
		if err != nil || !found || id == "" {
			return after, "", parseErr("-requestId needs a value")
		}
		return after, id, nil
	}
	return trailingRequestID(rest)
}

// trailingRequestID finds "-requestId <id>" (or -requestId=<id>) as the last
// two words of s, outside any double-quoted string.
func trailingRequestID(s string) (string, string, error) {
	t := strings.TrimRight(s, spaces)
	start := lastTokenStart(t)
	last := t[start:]
	if inline, has, ok := requestFlag(last); ok {
		if !has || inline == "" {
			return s, "", parseErr("-requestId needs a value")
		}
		if !balanced(t[:start]) {
			return s, "", nil
		}
		return t[:start], unquote(inline), nil
	}
	before := strings.TrimRight(t[:start], spaces)
	if len(before) == start { // the token is glued to what precedes it
		return s, "", nil
	}
	fstart := lastTokenStart(before)
	if _, has, ok := requestFlag(before[fstart:]); !ok || has || !balanced(before[:fstart]) {
		return s, "", nil
	}
	return before[:fstart], unquote(last), nil
}

// lastTokenStart returns where the last token of t (no trailing blanks)
// starts: a quoted string when t ends with a quote that has an opening
// partner preceded by a blank, else the last blank-free run.
func lastTokenStart(t string) int {
	if n := len(t); n >= 2 && (t[n-1] == '"' || t[n-1] == '\'') {
		if open := strings.LastIndexByte(t[:n-1], t[n-1]); open >= 0 && (open == 0 || strings.IndexByte(spaces, t[open-1]) >= 0) {
			return open
		}
	}
	return strings.LastIndexAny(t, spaces) + 1
}

// balanced reports whether s has an even number of unescaped double quotes:
// a position after s is outside any LoT string.
func balanced(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			n++
		}
	}
	return n%2 == 0
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// suggest returns up to three known command names close to word.
func suggest(word string) []string {
	w := fold(word)
	if w == "" {
		return nil
	}
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, k := range known() {
		d := distance(w, k.folded)
		if d <= max(2, len(w)/4) || len(w) >= 4 && strings.Contains(k.folded, w) {
			cs = append(cs, cand{"-" + k.name, d})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, c := range cs {
		if len(out) == 3 {
			break
		}
		if !slices.Contains(out, c.name) {
			out = append(out, c.name)
		}
	}
	return out
}

// distance is the Levenshtein distance of a and b (bytes), capped work for
// long input.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
