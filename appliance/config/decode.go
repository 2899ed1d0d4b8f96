package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
)

// loader applies a file and the environment to a Config, collecting every
// problem instead of stopping at the first.
type loader struct {
	root    reflect.Value     // the Config being loaded
	fromEnv map[string]string // field path to the variable that set it
	lines   []string          // problems found so far
}

func (l *loader) add(line string) { l.lines = append(l.lines, line) }

func (l *loader) addf(format string, args ...any) {
	l.add("config: " + fmt.Sprintf(format, args...))
}

// decodeFile applies the JSON document data, read from the file name.
// Key names are matched exactly; unknown and repeated keys, values of the
// wrong type and syntax errors are problems.
func (l *loader) decodeFile(name string, data []byte) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte order mark
	switch trimmed := bytes.TrimSpace(data); {
	case len(trimmed) == 0:
		l.addf("%s: empty file, want a JSON object", name)
		return
	case trimmed[0] != '{':
		l.addf("%s: want a JSON object at the top level", name)
		return
	}
	dec := newDecoder(data)
	if err := l.object(dec, ""); err != nil {
		l.addf("%s:%s", name, syntaxMessage(data, err))
		return
	}
	off := dec.InputOffset()
	if rest := data[off:]; len(bytes.TrimSpace(rest)) > 0 {
		off += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		l.addf("%s:%s: unexpected data after the top-level object", name, position(data, off))
	}
}

func newDecoder(data []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec
}

// object reads one JSON object from dec, the top level (sec "") or a section.
func (l *loader) object(dec *json.Decoder, sec string) error {
	if _, err := dec.Token(); err != nil { // the '{' the caller has seen
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if seen[key] {
			l.addf("duplicate key %q", joinPath(sec, key))
			continue
		}
		seen[key] = true
		l.member(sec, key, raw)
	}
	_, err := dec.Token() // '}'
	return err
}

// member applies key: raw of the object sec.
func (l *loader) member(sec, key string, raw json.RawMessage) {
	path := joinPath(sec, key)
	if sec == "" && schema.isSection(key) {
		l.section(key, raw)
		return
	}
	f, ok := schema.byPath[path]
	if !ok {
		l.unknownKey(sec, key)
		return
	}
	switch err := setJSON(f, f.value(l.root), raw); {
	case errors.Is(err, errOverflow):
		l.add(problem{f.path, string(raw), f.rng}.line())
	case err != nil:
		l.addf("%s = %s: %v", f.path, show(raw), err)
	}
}

func (l *loader) section(name string, raw json.RawMessage) {
	if raw[0] != '{' {
		l.addf("%s = %s: want an object", name, show(raw))
		return
	}
	if err := l.object(newDecoder(raw), name); err != nil {
		l.addf("%s: %v", name, err) // unreachable: raw is valid JSON
	}
}

func (l *loader) unknownKey(sec, key string) {
	path := joinPath(sec, key)
	if s := suggest(key, schema.keys[sec]); s != "" {
		l.addf("unknown key %q (did you mean %q?)", path, joinPath(sec, s))
		return
	}
	l.addf("unknown key %q", path)
}

// applyEnv sets every field whose environment variable env reports.
func (l *loader) applyEnv(env func(string) (string, bool)) {
	for _, f := range schema.fields {
		s, ok := env(f.env)
		if !ok {
			continue
		}
		l.fromEnv[f.path] = f.env
		switch err := setText(f, f.value(l.root), s); {
		case errors.Is(err, errOverflow):
			l.add(problem{f.path, strings.TrimSpace(s), f.rng}.withSource(f.env))
		case err != nil:
			l.addf("%s = %q: %v", f.env, s, err)
		}
	}
}

// errWant is a value of the wrong type or form; it completes "want ...".
type errWant string

func (e errWant) Error() string { return "want " + string(e) }

// errOverflow is a number that its field's type cannot hold; it is reported
// like any value out of range.
var errOverflow = errors.New("config: number out of range")

// setText sets v, the value of f, from s in the environment-variable syntax
// (also the syntax of default tags).
func setText(f *field, v reflect.Value, s string) error {
	switch f.kind {
	case kindString:
		v.SetString(f.canonical(s))
	case kindStrings:
		v.Set(reflect.ValueOf(splitList(s)))
	case kindBool:
		return setBool(v, s)
	case kindFloat:
		return setFloat(v, strings.TrimSpace(s))
	default:
		return setInteger(v, strings.TrimSpace(s))
	}
	return nil
}

// setJSON sets v, the value of f, from the JSON value raw.
func setJSON(f *field, v reflect.Value, raw json.RawMessage) error {
	switch c := raw[0]; {
	case f.kind == kindString && c == '"':
		var s string
		_ = json.Unmarshal(raw, &s) // raw is a valid JSON string
		v.SetString(f.canonical(s))
	case f.kind == kindStrings && (c == '"' || c == '['):
		return setListJSON(v, raw)
	case f.kind == kindBool && (c == 't' || c == 'f'):
		v.SetBool(c == 't')
	case f.kind == kindFloat && isNumber(c):
		return setFloat(v, string(raw))
	case (f.kind == kindInt || f.kind == kindUint32) && isNumber(c):
		return setInteger(v, string(raw))
	default:
		return jsonWant[f.kind]
	}
	return nil
}

var jsonWant = map[kind]errWant{
	kindString:  "a string",
	kindStrings: "a string or an array of strings",
	kindBool:    "true or false",
	kindFloat:   "a number",
	kindInt:     "an integer",
	kindUint32:  "an integer",
}

func isNumber(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

func setBool(v reflect.Value, s string) error {
	switch s = strings.TrimSpace(s); {
	case strings.EqualFold(s, "true") || s == "1":
		v.SetBool(true)
	case strings.EqualFold(s, "false") || s == "0":
		v.SetBool(false)
	default:
		return errWant("true, false, 1 or 0")
	}
	return nil
}

func setInteger(v reflect.Value, s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errOverflow
	case err != nil:
		return errWant("an integer")
	case v.Kind() == reflect.Uint32:
		if n < 0 || v.OverflowUint(uint64(n)) {
			return errOverflow
		}
		v.SetUint(uint64(n))
	case v.OverflowInt(n):
		return errOverflow
	default:
		v.SetInt(n)
	}
	return nil
}

func setFloat(v reflect.Value, s string) error {
	x, err := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errOverflow
	case err != nil || x != x || x > 1e308 || x < -1e308: // NaN, Inf
		return errWant("a number")
	}
	v.SetFloat(x)
	return nil
}

// setListJSON accepts a string, split like an environment variable, or an
// array of strings.
func setListJSON(v reflect.Value, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		v.Set(reflect.ValueOf(splitList(s)))
		return nil
	}
	var items []any
	_ = json.Unmarshal(raw, &items) // raw is a valid JSON array
	var list []string
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return jsonWant[kindStrings]
		}
		list = append(list, strings.TrimSpace(s))
	}
	v.Set(reflect.ValueOf(list))
	return nil
}

// splitList splits s on commas, semicolons and white space; nil when empty.
func splitList(s string) []string {
	list := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || unicode.IsSpace(r)
	})
	if len(list) == 0 {
		return nil
	}
	return list
}

func joinPath(sec, key string) string {
	if sec == "" {
		return key
	}
	return sec + "." + key
}

// show formats a JSON value for a message: compact and at most 60 bytes.
func show(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	if s := b.String(); len(s) <= 60 {
		return s
	}
	return b.String()[:57] + "..."
}

// syntaxMessage is "line:col: what" for err, met while decoding data. The
// decoder's offsets are relative to the value it was reading, so the whole
// document is checked again for the position.
func syntaxMessage(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal(data, new(any)), &se) {
		return "1:1: " + err.Error() // not expected: the decoder saw a syntax error
	}
	if strings.HasPrefix(se.Error(), "unexpected end of JSON input") {
		return position(data, int64(len(data))) + ": unexpected end of file"
	}
	return position(data, se.Offset-1) + ": " + se.Error()
}

// position is the 1-based "line:column" of byte offset off in data.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return strconv.Itoa(line) + ":" + strconv.Itoa(col)
}

// suggest returns the candidate that key most likely misspells, or "".
func suggest(key string, candidates []string) string {
	best, bestDist := "", 1+len(key)/5
	for _, c := range candidates {
		if strings.EqualFold(c, key) {
			return c
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(c)); d <= bestDist {
			best, bestDist = c, d-1
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of neighbours that turn
// one into the other.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
