package s7

import (
	"fmt"
	"strconv"
	"strings"
)

// Area is an S7 memory area.
type Area uint8

// The areas a tag may address.
const (
	DB Area = iota + 1
	Merker
	Input
	Output
)

func (a Area) String() string { return [...]string{"", "DB", "M", "I", "Q"}[a] }

// Address is a parsed S7 address: DB1.DBD0, DB1.DBX8.0, MW10, I0.3, QB2.
type Address struct {
	Area   Area
	DB     int  // DB number (DB area only)
	Byte   int  // byte offset
	Bit    int  // bit of a BOOL (X), 0..7
	Size   byte // 'X', 'B', 'W', 'D'
	HasBit bool
}

func (a Address) String() string {
	s := ""
	if a.Area == DB {
		s = fmt.Sprintf("DB%d.DB", a.DB)
	} else {
		s = a.Area.String()
	}
	if a.HasBit {
		if a.Area == DB {
			return fmt.Sprintf("%sX%d.%d", s, a.Byte, a.Bit)
		}
		return fmt.Sprintf("%s%d.%d", s, a.Byte, a.Bit)
	}
	return fmt.Sprintf("%s%c%d", s, a.Size, a.Byte)
}

// maxOffset bounds byte offsets (S7 addresses are 16-bit byte offsets in
// the request's 24-bit bit address).
const maxOffset = 65535

// ParseAddress reads an S7 address. German mnemonics (E for inputs, A for
// outputs) are accepted.
func ParseAddress(s string) (Address, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var a Address
	rest := ""
	switch {
	case strings.HasPrefix(u, "DB"):
		i := strings.IndexByte(u, '.')
		if i < 0 {
			return a, fmt.Errorf("S7 address %q: want DB<n>.DB<X|B|W|D><offset>, such as DB1.DBD0", s)
		}
		n, err := strconv.Atoi(u[2:i])
		if err != nil || n < 1 || n > 65535 {
			return a, fmt.Errorf("S7 address %q: DB number %q, want 1..65535", s, u[2:i])
		}
		a.Area, a.DB = DB, n
		rest = u[i+1:]
		if !strings.HasPrefix(rest, "DB") {
			return a, fmt.Errorf("S7 address %q: after DB%d. want DBX, DBB, DBW or DBD", s, n)
		}
		rest = rest[2:]
	case u != "" && strings.ContainsRune("MEIAQ", rune(u[0])):
		a.Area = map[byte]Area{'M': Merker, 'E': Input, 'I': Input, 'A': Output, 'Q': Output}[u[0]]
		rest = u[1:]
		if rest != "" && (rest[0] >= '0' && rest[0] <= '9') {
			rest = "X" + rest // M0.1 is MX0.1
		}
	default:
		return a, fmt.Errorf("S7 address %q: want DB<n>.DBD<offset>, M/I/Q<size><offset> (MW10, I0.1, QB2)", s)
	}
	if rest == "" || !strings.ContainsRune("XBWD", rune(rest[0])) {
		return a, fmt.Errorf("S7 address %q: size must be X (bit), B, W or D", s)
	}
	a.Size = rest[0]
	num := rest[1:]
	if a.Size == 'X' {
		i := strings.IndexByte(num, '.')
		if i < 0 {
			return a, fmt.Errorf("S7 address %q: a bit address needs <byte>.<bit>, such as DB1.DBX8.0", s)
		}
		bit, err := strconv.Atoi(num[i+1:])
		if err != nil || bit < 0 || bit > 7 {
			return a, fmt.Errorf("S7 address %q: bit %q, want 0..7", s, num[i+1:])
		}
		a.Bit, a.HasBit, num = bit, true, num[:i]
	}
	off, err := strconv.Atoi(num)
	if err != nil || off < 0 || off > maxOffset {
		return a, fmt.Errorf("S7 address %q: byte offset %q, want 0..%d", s, num, maxOffset)
	}
	a.Byte = off
	return a, nil
}
