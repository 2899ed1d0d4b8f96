package packet

import (
	"slices"
	"testing"
)

func TestDecodeVarint(t *testing.T) {
	cases := []struct {
		in    []byte
		value int
		n     int
		err   error
	}{
		{[]byte{0x00}, 0, 1, nil},
		{[]byte{0x7F, 0xAA}, 127, 1, nil},
		{[]byte{0x80, 0x01}, 128, 2, nil},
		{[]byte{0x80, 0x00}, 0, 2, nil}, // non-minimal, accepted
		{[]byte{0xFF, 0xFF, 0xFF, 0x7F}, MaxRemainingLength, 4, nil},
		{nil, 0, 0, errVarintShort},
		{[]byte{0x80}, 0, 0, errVarintShort},
		{[]byte{0xFF, 0xFF, 0xFF}, 0, 0, errVarintShort},
		{[]byte{0x80, 0x80, 0x80, 0x80}, 0, 0, MalformedPacket},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, 0, 0, MalformedPacket},
	}
	for _, tc := range cases {
		v, n, err := decodeVarint(tc.in)
		if v != tc.value || n != tc.n || err != tc.err {
			t.Errorf("decodeVarint(% X) = %d, %d, %v; want %d, %d, %v", tc.in, v, n, err, tc.value, tc.n, tc.err)
		}
	}
}

func TestVarintRoundTrip(t *testing.T) {
	for _, v := range []int{0, 1, 127, 128, 300, 16383, 16384, 2097151, 2097152, MaxRemainingLength} {
		b := appendVarint(nil, v)
		if len(b) != varintSize(v) {
			t.Errorf("varintSize(%d) = %d, encoded %d bytes", v, varintSize(v), len(b))
		}
		got, n, err := decodeVarint(b)
		if got != v || n != len(b) || err != nil {
			t.Errorf("round trip %d: % X -> %d, %d, %v", v, b, got, n, err)
		}
	}
}

func TestValidUTF8String(t *testing.T) {
	valid := []string{"", "a/b", "température", "日本語", "\U0001F600", "\u007F", "\uFFFF"}
	invalid := []string{"\x00", "a\x00b", "\xff", "\xc3\x28", "\xc0\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
		"\xf4\x90\x80\x80", "\xe2\x82"}
	for _, s := range valid {
		if !validUTF8String([]byte(s)) {
			t.Errorf("%q reported invalid", s)
		}
	}
	for _, s := range invalid {
		if validUTF8String([]byte(s)) {
			t.Errorf("%q reported valid", s)
		}
	}
}

func TestReaderNeverReadsPastBuffer(t *testing.T) {
	r := reader{buf: []byte{0, 5, 'a', 'b'}}
	if _, err := r.readBinary(); err != MalformedPacket {
		t.Errorf("readBinary of a lying length: %v", err)
	}
	r = reader{buf: []byte{1}}
	if _, err := r.take(-1); err != MalformedPacket {
		t.Errorf("take(-1): %v", err)
	}
	if _, err := r.readUint32(); err != MalformedPacket {
		t.Errorf("readUint32 of 1 byte: %v", err)
	}
}

func TestEveryPropertySpecHasItsField(t *testing.T) {
	var p Properties
	for i, spec := range propSpecs {
		id := PropID(i)
		var ok bool
		switch spec.kind {
		case kindNone:
			ok = spec.allowed == 0
		case kindByte:
			ok = p.byteField(id) != nil
		case kindUint16:
			ok = p.uint16Field(id) != nil
		case kindUint32:
			ok = p.uint32Field(id) != nil
		case kindString:
			ok = p.stringField(id) != nil
		case kindBinary:
			ok = p.binaryField(id) != nil
		case kindVarint:
			ok = id == PropSubscriptionID
		case kindPair:
			ok = id == PropUserProperty
		}
		if !ok || spec.kind != kindNone && spec.allowed == 0 {
			t.Errorf("property 0x%02X: spec %+v does not match the Properties fields", i, spec)
		}
	}
}

func TestAllowedPropsAreAscendingAndComplete(t *testing.T) {
	total := 0
	for ctx := range ctxCount {
		ids := allowedProps[ctx]
		if !slices.IsSorted(ids) || !slices.Contains(ids, PropUserProperty) {
			t.Errorf("context %d: %v", ctx, ids)
		}
		total += len(ids)
	}
	// (property, context) pairs of MQTT 5.0 section 2.2.2.2, counting the
	// four acks as one context.
	if total != 58 {
		t.Errorf("%d property/context pairs, want 58", total)
	}
}

func TestConnackCodeFromV3InvertsV3ConnackCode(t *testing.T) {
	for code := range byte(6) {
		c, ok := ConnackCodeFromV3(code)
		if !ok || V3ConnackCode(c) != code {
			t.Errorf("code %d -> %v, %v -> %d", code, c, ok, V3ConnackCode(c))
		}
	}
	if _, ok := ConnackCodeFromV3(6); ok {
		t.Error("return code 6 accepted")
	}
}

func TestCodeSet(t *testing.T) {
	s := newCodeSet(0, 63, 64, 0x80, 0xFF)
	for c := range 256 {
		want := c == 0 || c == 63 || c == 64 || c == 0x80 || c == 0xFF
		if s.has(ReasonCode(c)) != want {
			t.Errorf("has(0x%02X) = %v", c, !want)
		}
	}
}
