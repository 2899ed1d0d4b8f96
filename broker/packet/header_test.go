package packet_test

import (
	"bytes"
	"errors"
	"testing"

	"gantry/broker/packet"
)

func TestDecodeFixedHeaderNeedsWholeHeader(t *testing.T) {
	for _, b := range [][]byte{nil, {0x30}, {0x30, 0x80}, {0x30, 0xFF, 0xFF}, {0x30, 0xFF, 0xFF, 0xFF}} {
		if _, _, err := packet.DecodeFixedHeader(b); !errors.Is(err, packet.ErrShort) {
			t.Errorf("% X: err = %v, want ErrShort", b, err)
		}
	}
}

func TestDecodeFixedHeaderIgnoresMissingBody(t *testing.T) {
	h, n, err := packet.DecodeFixedHeader([]byte{0x32, 0xC1, 0x02})
	want := packet.FixedHeader{Type: packet.PUBLISH, Flags: 2, Remaining: 321}
	if err != nil || n != 3 || h != want {
		t.Errorf("got %+v, %d, %v; want %+v, 3", h, n, err, want)
	}
}

func TestDecodeFixedHeaderRejectsBadFirstByteEarly(t *testing.T) {
	for _, b := range []byte{0x00, 0x0F, 0x11, 0x21, 0x36, 0x3E, 0x41, 0x60, 0x63, 0x80, 0xA3, 0xC2, 0xD8, 0xE1, 0xF2} {
		if _, _, err := packet.DecodeFixedHeader([]byte{b}); err != packet.MalformedPacket {
			t.Errorf("first byte %02X: err = %v, want MalformedPacket", b, err)
		}
	}
}

func TestDecodeFixedHeaderRejectsFifthLengthByte(t *testing.T) {
	if _, _, err := packet.DecodeFixedHeader([]byte{0x30, 0x80, 0x80, 0x80, 0x80}); err != packet.MalformedPacket {
		t.Errorf("err = %v, want MalformedPacket", err)
	}
}

func TestFixedHeaderRemainingLengthBoundaries(t *testing.T) {
	cases := []struct {
		remaining int
		wire      []byte
	}{
		{0, []byte{0x00}},
		{127, []byte{0x7F}},
		{128, []byte{0x80, 0x01}},
		{16383, []byte{0xFF, 0x7F}},
		{16384, []byte{0x80, 0x80, 0x01}},
		{2097151, []byte{0xFF, 0xFF, 0x7F}},
		{2097152, []byte{0x80, 0x80, 0x80, 0x01}},
		{packet.MaxRemainingLength, []byte{0xFF, 0xFF, 0xFF, 0x7F}},
	}
	for _, tc := range cases {
		want := append([]byte{0xE0}, tc.wire...)
		got := packet.AppendFixedHeader(nil, packet.DISCONNECT, 0, tc.remaining)
		if !bytes.Equal(got, want) {
			t.Errorf("AppendFixedHeader(%d) = % X, want % X", tc.remaining, got, want)
		}
		h, n, err := packet.DecodeFixedHeader(want)
		if err != nil || n != len(want) || h.Remaining != tc.remaining || h.Type != packet.DISCONNECT {
			t.Errorf("DecodeFixedHeader(% X) = %+v, %d, %v", want, h, n, err)
		}
	}
}

func TestAppendPingreqAndPingresp(t *testing.T) {
	if got := packet.AppendPingreq([]byte{1}); !bytes.Equal(got, []byte{1, 0xC0, 0}) {
		t.Errorf("AppendPingreq = % X", got)
	}
	if got := packet.AppendPingresp(nil); !bytes.Equal(got, []byte{0xD0, 0}) {
		t.Errorf("AppendPingresp = % X", got)
	}
}
