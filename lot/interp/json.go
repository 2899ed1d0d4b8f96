package interp

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader over strings, enough for GET JSON, the JSON casts and
// the explosion of model topics without building a tree: a document is
// validated in one pass (skipValue), then walked to the value a path names
// (findKey, findIndex) and only that value is decoded. Nothing here uses
// reflection, and a value found is a substring of the document.

// maxJSONDepth bounds the nesting of a JSON document.
const maxJSONDepth = 256

// pathSeg is one step of a GET JSON path: a key of an object, or, when
// index >= 0, also an element of an array.
type pathSeg struct {
	key   string
	index int
}

// parsePath splits a dotted path: "data.temp", "items.0.name" and
// "items[0].name" are all accepted. The empty path names the whole
// document.
func parsePath(p string) []pathSeg {
	if p == "" {
		return nil
	}
	var segs []pathSeg
	for _, part := range strings.Split(p, ".") {
		for {
			open := strings.IndexByte(part, '[')
			close := strings.IndexByte(part, ']')
			if open < 0 || close < open {
				segs = append(segs, segment(part))
				break
			}
			if open > 0 {
				segs = append(segs, segment(part[:open]))
			}
			segs = append(segs, segment(part[open+1:close]))
			part = part[close+1:]
			if part == "" {
				break
			}
		}
	}
	return segs
}

func segment(s string) pathSeg {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || s[0] == '+' {
		n = -1
	}
	return pathSeg{key: s, index: n}
}

// lookupJSON validates doc and returns the raw text of the value path
// names; found is false when a key or index is missing or the path goes
// through a scalar.
func lookupJSON(doc string, path []pathSeg) (raw string, found bool, err error) {
	i, err := validJSON(doc)
	if err != nil {
		return "", false, err
	}
	for _, seg := range path {
		var ok bool
		switch doc[i] {
		case '{':
			i, ok = findKey(doc, i, seg.key)
		case '[':
			i, ok = findIndex(doc, i, seg.index)
		}
		if !ok {
			return "", false, nil
		}
	}
	end, _ := skipValue(doc, i, 0)
	return doc[i:end], true, nil
}

// validJSON checks that doc is one JSON value and returns where it starts.
func validJSON(doc string) (start int, err error) {
	start = skipWS(doc, 0)
	end, err := skipValue(doc, start, 0)
	if err != nil {
		return 0, err
	}
	if skipWS(doc, end) != len(doc) {
		return 0, jsonErr(doc, end, "text after the JSON value")
	}
	return start, nil
}

func jsonErr(doc string, at int, what string) error {
	if at >= len(doc) {
		return errorf(ErrBadJSON, "bad JSON: %s at the end of %s", what, quoteForMsg(String(doc)))
	}
	return errorf(ErrBadJSON, "bad JSON: %s at offset %d of %s", what, at, quoteForMsg(String(doc)))
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just after the value that starts at s[i].
func skipValue(s string, i, depth int) (int, error) {
	if i >= len(s) {
		return 0, jsonErr(s, i, "missing value")
	}
	switch c := s[i]; {
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return 0, jsonErr(s, i, "nesting too deep")
		}
		return skipContainer(s, i, depth+1)
	case c == '"':
		return skipString(s, i)
	case c == 't':
		return skipLiteral(s, i, "true")
	case c == 'f':
		return skipLiteral(s, i, "false")
	case c == 'n':
		return skipLiteral(s, i, "null")
	case c == '-' || isDigit(c):
		return skipNumber(s, i)
	}
	return 0, jsonErr(s, i, "unexpected character "+strconv.QuoteRune(rune(s[i])))
}

// skipContainer skips the object or array that starts at s[i].
func skipContainer(s string, i, depth int) (int, error) {
	obj := s[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == closer {
		return i + 1, nil
	}
	for {
		var err error
		if obj {
			if i >= len(s) || s[i] != '"' {
				return 0, jsonErr(s, i, "expected a key")
			}
			if i, err = skipString(s, i); err != nil {
				return 0, err
			}
			if i = skipWS(s, i); i >= len(s) || s[i] != ':' {
				return 0, jsonErr(s, i, "expected ':'")
			}
			i = skipWS(s, i+1)
		}
		if i, err = skipValue(s, i, depth); err != nil {
			return 0, err
		}
		i = skipWS(s, i)
		switch {
		case i < len(s) && s[i] == closer:
			return i + 1, nil
		case i < len(s) && s[i] == ',':
			i = skipWS(s, i+1)
		default:
			return 0, jsonErr(s, i, "expected ',' or '"+string(closer)+"'")
		}
	}
}

// skipString skips the string that starts at s[i] ('"'), checking its
// escapes.
func skipString(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return j + 1, nil
		case c < 0x20:
			return 0, jsonErr(s, j, "control character in a string")
		case c == '\\':
			j++
			if j >= len(s) {
				return 0, jsonErr(s, j, "unfinished escape")
			}
			switch s[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s) || !isHex4(s[j+1:j+5]) {
					return 0, jsonErr(s, j, "bad \\u escape")
				}
				j += 4
			default:
				return 0, jsonErr(s, j, "bad escape")
			}
		}
	}
	return 0, jsonErr(s, len(s), "unfinished string")
}

func isHex4(s string) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !isDigit(c) && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

func skipLiteral(s string, i int, lit string) (int, error) {
	if !strings.HasPrefix(s[i:], lit) {
		return 0, jsonErr(s, i, "unexpected word")
	}
	return i + len(lit), nil
}

// skipNumber skips -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?.
func skipNumber(s string, i int) (int, error) {
	start := i
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return 0, jsonErr(s, start, "bad number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return 0, jsonErr(s, start, "bad number")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, jsonErr(s, start, "bad number")
		}
	}
	return i, nil
}

// findKey returns where the value of key starts in the valid object at
// s[i]; the last of duplicate keys wins, as in encoding/json.
func findKey(s string, i int, key string) (int, bool) {
	at, found := 0, false
	eachMember(s, i, func(k string, v int) bool {
		if keyIs(k, key) {
			at, found = v, true
		}
		return true
	})
	return at, found
}

// eachMember calls fn with the raw key and the value start of each member
// of the valid object at s[i], until fn returns false.
func eachMember(s string, i int, fn func(rawKey string, valueAt int) bool) {
	i = skipWS(s, i+1)
	for s[i] != '}' {
		kEnd, _ := skipString(s, i)
		v := skipWS(s, skipWS(s, kEnd)+1)
		if !fn(s[i:kEnd], v) {
			return
		}
		end, _ := skipValue(s, v, 0)
		if i = skipWS(s, end); s[i] == ',' {
			i = skipWS(s, i+1)
		}
	}
}

// findIndex returns where element n starts in the valid array at s[i].
func findIndex(s string, i, n int) (int, bool) {
	if n < 0 {
		return 0, false
	}
	i = skipWS(s, i+1)
	for k := 0; s[i] != ']'; k++ {
		if k == n {
			return i, true
		}
		end, _ := skipValue(s, i, 0)
		if i = skipWS(s, end); s[i] == ',' {
			i = skipWS(s, i+1)
		}
	}
	return 0, false
}

// keyIs compares a raw (quoted, possibly escaped) key with key.
func keyIs(raw, key string) bool {
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner == key
	}
	return decodeString(raw) == key
}

// decodeString decodes a valid raw JSON string, quotes included.
func decodeString(raw string) string {
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner
	}
	b := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch inner[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(inner[i+1 : i+5])
			i += 4
			// A surrogate pair is two escapes: \uD83D\uDE00.
			if utf16.IsSurrogate(r) && i+6 < len(inner) && inner[i+1] == '\\' && inner[i+2] == 'u' {
				if d := utf16.DecodeRune(r, hex4(inner[i+3:i+7])); d != utf8.RuneError {
					r = d
					i += 6
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, inner[i])
		}
	}
	return string(b)
}

func hex4(s string) rune {
	n, _ := strconv.ParseUint(s, 16, 32)
	return rune(n)
}

// valueOfJSON turns the raw text of a valid JSON value into a Value:
// strings decoded, numbers as int or float, true/false, null, objects and
// arrays kept as JSON text.
func valueOfJSON(raw string) (Value, error) {
	switch raw[0] {
	case '"':
		return String(decodeString(raw)), nil
	case 't':
		return valueTrue, nil
	case 'f':
		return valueFalse, nil
	case 'n':
		return Null(), nil
	case '{', '[':
		return Value{kind: KindJSON, s: raw}, nil
	}
	if n, ok := parseNumber(raw); ok {
		return n, nil
	}
	return Value{}, errorf(ErrNumberRange, "JSON number %s is out of range", raw)
}

// ParseJSON reads a JSON text into a Value (objects and arrays stay JSON
// text), for instance the arguments of -runAction.
func ParseJSON(text []byte) (Value, error) {
	doc := string(text)
	start, err := validJSON(doc)
	if err != nil {
		return Value{}, err
	}
	return valueOfJSON(strings.TrimRight(doc[start:], " \t\r\n"))
}

// Members returns the members of a JSON object value in document order,
// decoded; ok is false when v is not a JSON object.
func Members(v Value) (keys []string, values []Value, ok bool) {
	if v.kind != KindJSON || v.s == "" || v.s[0] != '{' {
		return nil, nil, false
	}
	eachMember(v.s, 0, func(k string, at int) bool {
		end, _ := skipValue(v.s, at, 0)
		val, err := valueOfJSON(v.s[at:end])
		if err != nil {
			val = String(v.s[at:end])
		}
		keys, values = append(keys, decodeString(k)), append(values, val)
		return true
	})
	return keys, values, true
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// appendJSON appends v as a JSON value: EMPTY and null as null, numbers,
// booleans, JSON as its text, everything else as a JSON string.
func appendJSON(dst []byte, v Value) []byte {
	switch v.kind {
	case KindEmpty, KindNull:
		return append(dst, "null"...)
	case KindInt, KindFloat, KindBool:
		return v.AppendText(dst)
	case KindJSON:
		return append(dst, v.s...)
	}
	return appendJSONString(dst, v.s)
}
