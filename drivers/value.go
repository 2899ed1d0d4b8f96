package drivers

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind says what a Value holds.
type Kind uint8

// Value kinds.
const (
	Number Kind = iota + 1
	Boolean
	Text
)

// Value is one tag value: a number (already scaled to engineering units
// when read), a boolean or a string.
type Value struct {
	Kind Kind
	Num  float64
	Bool bool
	Str  string
}

// NumberValue, BoolValue and TextValue build values.
func NumberValue(f float64) Value { return Value{Kind: Number, Num: f} }
func BoolValue(b bool) Value      { return Value{Kind: Boolean, Bool: b} }
func TextValue(s string) Value    { return Value{Kind: Text, Str: s} }

// Equal reports whether v and w are the same value.
func (v Value) Equal(w Value) bool { return v == w }

// Words is the number of 16-bit registers a tag of this type occupies.
func (t *Tag) Words() int {
	switch t.Type {
	case Int32, UInt32, Float32:
		return 2
	case Float64:
		return 4
	case String:
		return (t.Length + 1) / 2
	}
	return 1
}

// Bytes is the number of bytes a tag of this type occupies (S7, OPC UA
// strings aside).
func (t *Tag) Bytes() int {
	if t.Type == String {
		return t.Length
	}
	return 2 * t.Words()
}

// ErrShort is returned for a reply shorter than the tag needs.
var ErrShort = errors.New("drivers: reply shorter than the tag")

// canonical reorders wire bytes (registers as sent, each big-endian) into
// the value's big-endian byte order, undoing the tag's byte and word
// order. It works on a copy.
func (t *Tag) canonical(wire []byte) []byte {
	b := append([]byte(nil), wire...)
	if t.Type == String {
		if t.ByteSwap {
			for i := 0; i+1 < len(b); i += 2 {
				b[i], b[i+1] = b[i+1], b[i]
			}
		}
		return b
	}
	if t.ByteSwap {
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	}
	if t.WordSwap {
		for i, j := 0, len(b)-2; i < j; i, j = i+2, j-2 {
			b[i], b[i+1], b[j], b[j+1] = b[j], b[j+1], b[i], b[i+1]
		}
	}
	return b
}

// Decode turns the tag's bytes as they came from the device (Modbus
// registers in wire order, an S7 area's bytes) into its engineering value.
func (t *Tag) Decode(wire []byte) (Value, error) {
	need := t.Bytes()
	if t.Type == Bool {
		need = 2
	}
	if len(wire) < need {
		return Value{}, fmt.Errorf("%w: %d bytes, want %d", ErrShort, len(wire), need)
	}
	b := t.canonical(wire[:need])
	var raw float64
	switch t.Type {
	case Int16:
		raw = float64(int16(binary.BigEndian.Uint16(b)))
	case UInt16:
		raw = float64(binary.BigEndian.Uint16(b))
	case Int32:
		raw = float64(int32(binary.BigEndian.Uint32(b)))
	case UInt32:
		raw = float64(binary.BigEndian.Uint32(b))
	case Float32:
		raw = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case Float64:
		raw = math.Float64frombits(binary.BigEndian.Uint64(b))
	case Bool:
		return BoolValue(binary.BigEndian.Uint16(b) != 0), nil
	case String:
		s := string(b)
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return TextValue(strings.ToValidUTF8(strings.TrimRight(s, " "), "\uFFFD")), nil
	}
	if math.IsNaN(raw) || math.IsInf(raw, 0) {
		return Value{}, fmt.Errorf("drivers: tag %s: the device holds %v", t.Name, raw)
	}
	return NumberValue(t.Engineering(raw)), nil
}

// Engineering scales a raw device number: raw*SCALING + OFFSET.
func (t *Tag) Engineering(raw float64) float64 { return raw*t.Scale + t.Offset }

// Raw is the inverse of Engineering, checked against MIN_VALUE/MAX_VALUE
// and the range of the tag's type (integers are rounded).
func (t *Tag) Raw(eng float64) (float64, error) {
	if math.IsNaN(eng) || math.IsInf(eng, 0) {
		return 0, fmt.Errorf("tag %s: %v is not a number to write", t.Name, eng)
	}
	if !math.IsNaN(t.Min) && eng < t.Min || !math.IsNaN(t.Max) && eng > t.Max {
		return 0, fmt.Errorf("tag %s: %v is outside MIN_VALUE..MAX_VALUE %v..%v", t.Name, eng, t.Min, t.Max)
	}
	raw := (eng - t.Offset) / t.Scale
	lo, hi := t.Type.rawRange()
	switch t.Type {
	case Int16, UInt16, Int32, UInt32:
		raw = math.Round(raw)
	}
	if raw < lo || raw > hi {
		return 0, fmt.Errorf("tag %s: %v is %v on the device, outside %s's range %v..%v", t.Name, eng, raw, t.Type, lo, hi)
	}
	return raw, nil
}

func (d DataType) rawRange() (lo, hi float64) {
	switch d {
	case Int16:
		return math.MinInt16, math.MaxInt16
	case UInt16:
		return 0, math.MaxUint16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case UInt32:
		return 0, math.MaxUint32
	case Float32:
		return -math.MaxFloat32, math.MaxFloat32
	}
	return -math.MaxFloat64, math.MaxFloat64
}

// Encode turns an engineering value into the tag's bytes in device
// order: the inverse of Decode. A value out of range is refused.
func (t *Tag) Encode(v Value) ([]byte, error) {
	b := make([]byte, t.Bytes())
	switch t.Type {
	case Bool:
		if v.Kind != Boolean {
			return nil, fmt.Errorf("tag %s is BOOL: write true or false", t.Name)
		}
		if v.Bool {
			b[1] = 1
		}
		return b, nil
	case String:
		if v.Kind != Text {
			return nil, fmt.Errorf("tag %s is STRING: write text", t.Name)
		}
		if len(v.Str) > t.Length {
			return nil, fmt.Errorf("tag %s: %d bytes, longer than its LENGTH %d", t.Name, len(v.Str), t.Length)
		}
		copy(b, v.Str)
		return t.canonical(b), nil
	}
	if v.Kind != Number {
		return nil, fmt.Errorf("tag %s is %s: write a number", t.Name, t.Type)
	}
	raw, err := t.Raw(v.Num)
	if err != nil {
		return nil, err
	}
	switch t.Type {
	case Int16:
		binary.BigEndian.PutUint16(b, uint16(int16(raw)))
	case UInt16:
		binary.BigEndian.PutUint16(b, uint16(raw))
	case Int32:
		binary.BigEndian.PutUint32(b, uint32(int32(raw)))
	case UInt32:
		binary.BigEndian.PutUint32(b, uint32(raw))
	case Float32:
		binary.BigEndian.PutUint32(b, math.Float32bits(float32(raw)))
	case Float64:
		binary.BigEndian.PutUint64(b, math.Float64bits(raw))
	}
	return t.canonical(b), nil // the reordering is its own inverse
}

// FormatNumber writes f in its shortest form (42, not 42.0), or with
// DECIMAL_PLACES digits when set.
func (t *Tag) FormatNumber(f float64) string {
	if t.Decimals >= 0 {
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'f', t.Decimals, 64), 64)
	}
	if f == 0 {
		f = 0 // no "-0"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// Payload is what a read value publishes: the plain value, or with
// PUBLISH_MODE JSON {"value":...,"unit":...,"timestamp":<ms>}.
func (t *Tag) Payload(v Value, unixMillis int64) []byte {
	var plain string
	switch v.Kind {
	case Number:
		plain = t.FormatNumber(v.Num)
	case Boolean:
		plain = strconv.FormatBool(v.Bool)
	default:
		plain = v.Str
	}
	if !t.JSON {
		return []byte(plain)
	}
	out := []byte(`{"value":`)
	if v.Kind == Text {
		out = strconv.AppendQuote(out, plain)
	} else {
		out = append(out, plain...)
	}
	if t.Unit != "" {
		out = append(out, `,"unit":`...)
		out = strconv.AppendQuote(out, t.Unit)
	}
	out = append(out, `,"timestamp":`...)
	out = strconv.AppendInt(out, unixMillis, 10)
	return append(out, '}')
}

// ParsePayload reads a value to write: a number, true/false (or 1/0 for
// a BOOL), text for a STRING, or JSON {"value": ...}.
func (t *Tag) ParsePayload(p []byte) (Value, error) {
	s := strings.TrimSpace(string(p))
	if strings.HasPrefix(s, "{") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return Value{}, fmt.Errorf("tag %s: payload is not valid JSON: %v", t.Name, err)
		}
		raw, ok := obj["value"]
		if !ok {
			return Value{}, fmt.Errorf(`tag %s: JSON payload has no "value"`, t.Name)
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			s = str
		} else {
			s = string(raw)
		}
	}
	switch t.Type {
	case String:
		if !utf8.ValidString(s) {
			return Value{}, fmt.Errorf("tag %s: payload is not UTF-8", t.Name)
		}
		return TextValue(s), nil
	case Bool:
		switch strings.ToLower(s) {
		case "true", "1", "on":
			return BoolValue(true), nil
		case "false", "0", "off":
			return BoolValue(false), nil
		}
		return Value{}, fmt.Errorf("tag %s is BOOL: payload %q is not true or false", t.Name, clip(s))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, fmt.Errorf("tag %s is %s: payload %q is not a number", t.Name, t.Type, clip(s))
	}
	return NumberValue(f), nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
