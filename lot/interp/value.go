package interp

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// Kind says what a Value holds.
type Kind uint8

// The kinds of value. The zero Value is EMPTY.
const (
	// KindEmpty is EMPTY: a topic never written, an unset variable, a
	// message without payload.
	KindEmpty Kind = iota
	// KindString is text. Payloads and topic values are strings; a string
	// that reads as a number behaves as one in arithmetic and comparison.
	KindString
	// KindInt is a whole number (int64).
	KindInt
	// KindFloat is a floating point number (float64, always finite).
	KindFloat
	// KindBool is TRUE or FALSE.
	KindBool
	// KindNull is JSON null, the result of GET JSON on a missing key. It
	// reads as "null" and casts to false, 0 and 0.0.
	KindNull
	// KindJSON is a JSON object or array, held as its JSON text.
	KindJSON
	// KindBytes is PAYLOAD AS BYTES: the payload for bit-exact forwarding.
	KindBytes
)

var kindNames = [...]string{KindEmpty: "EMPTY", KindString: "string", KindInt: "int",
	KindFloat: "double", KindBool: "bool", KindNull: "null", KindJSON: "JSON", KindBytes: "bytes"}

// String names the kind: "string", "int", "EMPTY", ...
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is a LoT value. It is small and passed by value; the zero Value is
// EMPTY. Strings may share memory with the payload or topic value they
// were read from, which the broker never modifies.
type Value struct {
	kind Kind
	i    int64   // KindInt; KindBool as 0 or 1
	f    float64 // KindFloat
	s    string  // KindString, KindJSON (JSON text), KindBytes
}

// String returns a text value.
func String(s string) Value { return Value{kind: KindString, s: s} }

// Int returns a whole number.
func Int(i int64) Value { return Value{kind: KindInt, i: i} }

// Float returns a floating point number; NaN and infinities become EMPTY,
// since LoT has no value for them.
func Float(f float64) Value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}
	}
	return Value{kind: KindFloat, f: f}
}

// Bool returns TRUE or FALSE.
func Bool(b bool) Value {
	if b {
		return Value{kind: KindBool, i: 1}
	}
	return Value{kind: KindBool}
}

// Null returns JSON null.
func Null() Value { return Value{kind: KindNull} }

var (
	valueTrue  = Bool(true)
	valueFalse = Bool(false)
)

// Kind returns what v holds.
func (v Value) Kind() Kind { return v.kind }

// IsEmpty reports whether v is EMPTY.
func (v Value) IsEmpty() bool { return v.kind == KindEmpty }

// Text returns v as LoT publishes it: text as is, numbers in their
// shortest form (42, 21.5), TRUE as "true", null as "null", JSON as its
// text, EMPTY as "".
func (v Value) Text() string {
	switch v.kind {
	case KindString, KindJSON, KindBytes:
		return v.s
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindFloat:
		return string(appendFloat(nil, v.f))
	case KindBool:
		if v.i != 0 {
			return "true"
		}
		return "false"
	case KindNull:
		return "null"
	}
	return ""
}

// String returns v.Text(); it makes Value print well with %v.
func (v Value) String() string { return v.Text() }

// AppendText appends v.Text() to dst.
func (v Value) AppendText(dst []byte) []byte {
	switch v.kind {
	case KindString, KindJSON, KindBytes:
		return append(dst, v.s...)
	case KindInt:
		return strconv.AppendInt(dst, v.i, 10)
	case KindFloat:
		return appendFloat(dst, v.f)
	}
	return append(dst, v.Text()...)
}

// Payload returns v as a message payload: a new slice the caller owns.
func (v Value) Payload() []byte {
	switch v.kind {
	case KindEmpty:
		return []byte{}
	case KindString, KindJSON, KindBytes:
		return []byte(v.s)
	}
	return v.AppendText(make([]byte, 0, 24))
}

// appendFloat writes f in its shortest form: no exponent between 1e-6 and
// 1e21 (21.5, not 2.15e1), a short one outside (1e+21, 1e-7), an integral value without a decimal point (15,
// not 15.0), negative zero as 0.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		n := len(dst)
		dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
		// 1e-07 becomes 1e-7, as JavaScript writes it
		if e := bytes.IndexByte(dst[n:], 'e'); e >= 0 && len(dst) > n+e+3 && dst[n+e+2] == '0' {
			dst = append(dst[:n+e+2], dst[n+e+3:]...)
		}
		return dst
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// stringOf returns b as a string without copying. The broker hands LoT
// payloads and topic values that nobody modifies afterwards (see the
// package documentation), which is what makes this safe.
func stringOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// textValue turns a payload or topic value into a Value: EMPTY when it
// has no bytes, a string otherwise.
func textValue(b []byte) Value { return textOf(stringOf(b)) }

// textOf is String(s), or EMPTY for "".
func textOf(s string) Value {
	if s == "" {
		return Value{}
	}
	return Value{kind: KindString, s: s}
}

// blank reports whether v stands for "no value": EMPTY or null.
func (v Value) blank() bool { return v.kind == KindEmpty || v.kind == KindNull }

// numeric returns v as a number (KindInt or KindFloat): numbers as they
// are, strings that read as a number (surrounding white space allowed)
// converted. ok is false for anything else.
func (v Value) numeric() (Value, bool) {
	switch v.kind {
	case KindInt, KindFloat:
		return v, true
	case KindString:
		return parseNumber(v.s)
	}
	return Value{}, false
}

// float returns a number as float64.
func (v Value) float() float64 {
	if v.kind == KindInt {
		return float64(v.i)
	}
	return v.f
}

// parseNumber reads a decimal number: an optional sign, digits with an
// optional fraction, an optional exponent. Hexadecimal, "Inf", "NaN" and
// digit separators are not numbers in LoT. A whole number that fits int64
// is an int; anything else a float.
func parseNumber(s string) (Value, bool) {
	s = strings.TrimSpace(s)
	whole, ok := numberSyntax(s)
	if !ok {
		return Value{}, false
	}
	if whole {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return Int(i), true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return Value{}, false
	}
	return Float(f), true
}

// numberSyntax checks s against [+-]? (d+ (. d*)? | . d+) ([eE] [+-]? d+)?
// and reports whether it has neither fraction nor exponent.
func numberSyntax(s string) (whole, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	whole = true
	if i < len(s) && s[i] == '.' {
		whole = false
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return false, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		whole = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			exp++
		}
		if exp == 0 {
			return false, false
		}
	}
	return whole, i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// boolText reads "true" or "false" in any case.
func boolText(s string) (b, ok bool) {
	switch {
	case strings.EqualFold(s, "true"):
		return true, true
	case strings.EqualFold(s, "false"):
		return false, true
	}
	return false, false
}

// quoteForMsg shows a value in an error message: text quoted and cut to a
// readable length, other kinds as they print.
func quoteForMsg(v Value) string {
	const max = 40
	switch v.kind {
	case KindEmpty:
		return "EMPTY"
	case KindString, KindJSON, KindBytes:
		s := v.s
		if len(s) > max {
			s = s[:max] + "..."
		}
		return strconv.Quote(s)
	}
	return v.Text()
}
