package interp

import (
	"math"
	"strings"
	"time"

	"gantry/lot/syntax"
)

// Cast converts v as <x> AS <type> does (LOT.md §2):
//
//   - INT and DOUBLE read numbers and numeric text (INT truncates toward
//     zero); TRUE is 1; EMPTY and null are 0; other text is an error.
//   - STRING is the text of the value ("null" for null, "" for EMPTY).
//   - BOOL reads TRUE/FALSE, "true"/"false" in any case and numbers (0 is
//     false); EMPTY, null and "" are false; other text is an error.
//   - TIMESTAMP reads epoch seconds or an ISO-8601 / "yyyy-MM-dd HH:mm:ss"
//     time and gives the ISO form in UTC.
//   - JSON parses text into a JSON value; OBJECT and ARRAY also require
//     that kind. EMPTY and null stay null.
func Cast(v Value, t syntax.TypeName) (Value, error) {
	switch t {
	case syntax.TypeInt:
		return castInt(v)
	case syntax.TypeDouble:
		return castDouble(v)
	case syntax.TypeString:
		if v.kind == KindString {
			return v, nil
		}
		return String(v.Text()), nil
	case syntax.TypeBool:
		return castBool(v)
	case syntax.TypeTimestamp:
		return castTimestamp(v)
	case syntax.TypeJSON, syntax.TypeObject, syntax.TypeArray:
		return castJSON(v, t)
	case syntax.TypeBytes:
		return Value{kind: KindBytes, s: v.Text()}, nil
	}
	return v, nil
}

func castFailed(v Value, t syntax.TypeName) error {
	return errorf(ErrCast, "cannot cast %s to %s", quoteForMsg(v), t)
}

// castNumber reads v as a number for INT and DOUBLE.
func castNumber(v Value, t syntax.TypeName) (Value, error) {
	if n, ok := v.numeric(); ok {
		return n, nil
	}
	switch v.kind {
	case KindEmpty, KindNull:
		return Int(0), nil
	case KindBool:
		return Int(v.i), nil
	case KindString:
		if b, ok := boolText(v.s); ok {
			return Bool(b), nil
		}
	}
	return Value{}, castFailed(v, t)
}

func castInt(v Value) (Value, error) {
	n, err := castNumber(v, syntax.TypeInt)
	if err != nil || n.kind == KindInt {
		return n, err
	}
	if n.kind == KindBool {
		return Int(n.i), nil
	}
	f := math.Trunc(n.f)
	if f >= math.MaxInt64 || f < math.MinInt64 {
		return Value{}, errorf(ErrNumberRange, "%s is out of the range of INT", n.Text())
	}
	return Int(int64(f)), nil
}

func castDouble(v Value) (Value, error) {
	n, err := castNumber(v, syntax.TypeDouble)
	if err != nil {
		return n, err
	}
	switch n.kind {
	case KindBool, KindInt:
		return Float(float64(n.i)), nil
	}
	return n, nil
}

func castBool(v Value) (Value, error) {
	switch v.kind {
	case KindBool:
		return v, nil
	case KindInt:
		return Bool(v.i != 0), nil
	case KindFloat:
		return Bool(v.f != 0), nil
	case KindEmpty, KindNull:
		return valueFalse, nil
	case KindString:
		s := strings.TrimSpace(v.s)
		if b, ok := boolText(s); ok {
			return Bool(b), nil
		}
		if n, ok := parseNumber(s); ok {
			return Bool(n.float() != 0), nil
		}
		if s == "" {
			return valueFalse, nil
		}
	}
	return Value{}, castFailed(v, syntax.TypeBool)
}

// timeLayouts are the texts AS TIMESTAMP reads, besides epoch seconds.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

func castTimestamp(v Value) (Value, error) {
	if v.blank() {
		return v, nil
	}
	if n, ok := v.numeric(); ok {
		f := n.float()
		if math.Abs(f) > 1e13 {
			return Value{}, errorf(ErrNumberRange, "%s is out of the range of TIMESTAMP", n.Text())
		}
		sec, frac := math.Modf(f)
		t := time.Unix(int64(sec), int64(frac*1e9))
		return String(t.UTC().Format(isoLayout)), nil
	}
	if v.kind == KindString {
		s := strings.TrimSpace(v.s)
		for _, layout := range timeLayouts {
			if t, err := time.Parse(layout, s); err == nil {
				return String(t.UTC().Format(isoLayout)), nil
			}
		}
	}
	return Value{}, castFailed(v, syntax.TypeTimestamp)
}

func castJSON(v Value, t syntax.TypeName) (Value, error) {
	var j Value
	switch v.kind {
	case KindEmpty, KindNull:
		return Null(), nil
	case KindString, KindBytes:
		doc := v.s
		start, err := validJSON(doc)
		if err != nil {
			return Value{}, err
		}
		if j, err = valueOfJSON(strings.TrimRight(doc[start:], " \t\r\n")); err != nil {
			return Value{}, err
		}
	default:
		j = v
	}
	switch {
	case t == syntax.TypeObject && !(j.kind == KindJSON && j.s[0] == '{'),
		t == syntax.TypeArray && !(j.kind == KindJSON && j.s[0] == '['):
		return Value{}, castFailed(v, t)
	}
	return j, nil
}
