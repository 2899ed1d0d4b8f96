package interp

import (
	"math"
	"strings"

	"gantry/lot/syntax"
)

// This file holds the value semantics of LOT.md §2 and §3.1: truthiness,
// arithmetic, concatenation and comparison.
//
//   - A string that reads as a number is a number in arithmetic and
//     comparison; "T=" + PAYLOAD concatenates because "T=" is not one.
//   - EMPTY and null are 0 next to a number in arithmetic and ordering
//     (GET TOPIC "count" + 1 on a fresh broker is 1), but equal only to
//     EMPTY, null and "".
//   - / always divides exactly (7 / 2 is 3.5); ints stay ints under + - *
//     % unless they overflow, then they become floats.

// Truthy reports whether v counts as true in IF, UNTIL, AND, OR and NOT:
// FALSE, 0, "", "false" (any case), EMPTY and null are false; every other
// value is true.
func Truthy(v Value) bool {
	switch v.kind {
	case KindBool, KindInt:
		return v.i != 0
	case KindFloat:
		return v.f != 0
	case KindString:
		if b, ok := boolText(v.s); ok {
			return b
		}
		if n, ok := parseNumber(v.s); ok {
			return n.float() != 0
		}
		return v.s != ""
	case KindJSON, KindBytes:
		return v.s != ""
	}
	return false
}

// add is +: the sum of two numbers (EMPTY or null counting as 0 next to a
// number), otherwise the concatenation of the texts, at most max bytes.
func add(a, b Value, max int) (Value, error) {
	if a.kind == KindBytes || b.kind == KindBytes {
		return Value{}, errorf(ErrCast, "PAYLOAD AS BYTES cannot be used with +")
	}
	na, oka := a.numeric()
	nb, okb := b.numeric()
	switch {
	case oka && okb:
		return arith(syntax.OpAdd, na, nb)
	case oka && b.blank():
		return na, nil
	case okb && a.blank():
		return nb, nil
	case a.kind == KindEmpty:
		return b, nil
	case b.kind == KindEmpty:
		return a, nil
	}
	ta, tb := a.Text(), b.Text()
	if len(ta)+len(tb) > max {
		return Value{}, errorf(ErrTooLarge, "text of %d bytes is over the limit of %d", len(ta)+len(tb), max)
	}
	return String(ta + tb), nil
}

// arithmetic applies - * / % (and + on numbers). Operands must be numbers,
// numeric text, EMPTY or null (as 0).
func arithmetic(op syntax.Op, a, b Value) (Value, error) {
	na, err := operand(op, a)
	if err != nil {
		return Value{}, err
	}
	nb, err := operand(op, b)
	if err != nil {
		return Value{}, err
	}
	return arith(op, na, nb)
}

// operand returns v as a number for op.
func operand(op syntax.Op, v Value) (Value, error) {
	if n, ok := v.numeric(); ok {
		return n, nil
	}
	if v.blank() {
		return Int(0), nil
	}
	return Value{}, errorf(ErrNotNumber, "%s needs numbers, got %s", op, quoteForMsg(v))
}

// arith computes a op b on two numbers.
func arith(op syntax.Op, a, b Value) (Value, error) {
	if a.kind == KindInt && b.kind == KindInt && op != syntax.OpDiv {
		if v, ok := intArith(op, a.i, b.i); ok {
			return v, nil
		}
		if op == syntax.OpMod && b.i == 0 {
			return Value{}, errorf(ErrDivisionByZero, "modulo by zero")
		}
	}
	x, y := a.float(), b.float()
	var r float64
	switch op {
	case syntax.OpAdd:
		r = x + y
	case syntax.OpSub:
		r = x - y
	case syntax.OpMul:
		r = x * y
	case syntax.OpDiv:
		if y == 0 {
			return Value{}, errorf(ErrDivisionByZero, "division by zero")
		}
		r = x / y
	case syntax.OpMod:
		if y == 0 {
			return Value{}, errorf(ErrDivisionByZero, "modulo by zero")
		}
		r = math.Mod(x, y)
	}
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return Value{}, errorf(ErrNumberRange, "%s %s %s is out of range", a.Text(), op, b.Text())
	}
	return Float(r), nil
}

// intArith computes on int64; ok is false on overflow or a zero divisor,
// where the caller falls back to floats (or reports the zero).
func intArith(op syntax.Op, x, y int64) (Value, bool) {
	switch op {
	case syntax.OpAdd:
		s := x + y
		if (x > 0 && y > 0 && s < 0) || (x < 0 && y < 0 && s >= 0) {
			return Value{}, false
		}
		return Int(s), true
	case syntax.OpSub:
		s := x - y
		if (x >= 0 && y < 0 && s < 0) || (x < 0 && y > 0 && s >= 0) {
			return Value{}, false
		}
		return Int(s), true
	case syntax.OpMul:
		if x == 0 || y == 0 {
			return Int(0), true
		}
		p := x * y
		if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return Value{}, false
		}
		return Int(p), true
	case syntax.OpMod:
		if y == 0 {
			return Value{}, false
		}
		if y == -1 {
			return Int(0), true
		}
		return Int(x % y), true
	}
	return Value{}, false
}

// negate is unary minus.
func negate(v Value) (Value, error) {
	n, err := operand(syntax.OpNeg, v)
	if err != nil {
		return Value{}, err
	}
	if n.kind == KindInt && n.i != math.MinInt64 {
		return Int(-n.i), nil
	}
	return Float(-n.float()), nil
}

// Equal is == (also = and EQUALS): numbers (and numeric text) compare as
// numbers, TRUE/FALSE against "true"/"false", 1 or 0; EMPTY equals only
// EMPTY, null and ""; anything else compares as text.
func Equal(a, b Value) bool {
	if a.blank() || b.blank() {
		return isNothing(a) && isNothing(b) ||
			a.kind == KindNull && b.kind == KindString && b.s == "null" ||
			b.kind == KindNull && a.kind == KindString && a.s == "null"
	}
	if na, ok := a.numeric(); ok {
		if nb, ok := b.numeric(); ok {
			return compareNumbers(na, nb) == 0
		}
	}
	if a.kind == KindBool || b.kind == KindBool {
		ba, oka := boolOf(a)
		bb, okb := boolOf(b)
		if oka && okb {
			return ba == bb
		}
	}
	return a.Text() == b.Text()
}

// isNothing reports whether v is EMPTY, null or "".
func isNothing(v Value) bool {
	return v.blank() || v.kind == KindString && v.s == ""
}

// boolOf reads v as a bool for comparison: a bool, "true"/"false" in any
// case, or the numbers 1 and 0.
func boolOf(v Value) (b, ok bool) {
	switch v.kind {
	case KindBool:
		return v.i != 0, true
	case KindString:
		if b, ok := boolText(v.s); ok {
			return b, true
		}
	}
	if n, ok := v.numeric(); ok {
		switch n.float() {
		case 1:
			return true, true
		case 0:
			return false, true
		}
	}
	return false, false
}

// order compares a and b for < > <= >=: as numbers when both are numbers
// (EMPTY and null counting as 0 next to a number), otherwise as texts.
func order(a, b Value) int {
	na, oka := a.numeric()
	nb, okb := b.numeric()
	if oka && b.blank() {
		nb, okb = Int(0), true
	}
	if okb && a.blank() {
		na, oka = Int(0), true
	}
	if oka && okb {
		return compareNumbers(na, nb)
	}
	return strings.Compare(a.Text(), b.Text())
}

// compareNumbers compares two numbers exactly when both are ints.
func compareNumbers(a, b Value) int {
	if a.kind == KindInt && b.kind == KindInt {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	x, y := a.float(), b.float()
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// compare applies a comparison or string-test operator.
func compare(op syntax.Op, a, b Value) bool {
	switch op {
	case syntax.OpEq:
		return Equal(a, b)
	case syntax.OpNe:
		return !Equal(a, b)
	case syntax.OpLt:
		return order(a, b) < 0
	case syntax.OpGt:
		return order(a, b) > 0
	case syntax.OpLe:
		return order(a, b) <= 0
	case syntax.OpGe:
		return order(a, b) >= 0
	case syntax.OpContains:
		return strings.Contains(a.Text(), b.Text())
	case syntax.OpStartsWith:
		return strings.HasPrefix(a.Text(), b.Text())
	case syntax.OpEndsWith:
		return strings.HasSuffix(a.Text(), b.Text())
	}
	return false
}
