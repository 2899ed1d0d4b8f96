package interp

import (
	"strconv"
	"strings"
	"time"
)

// TIMESTAMP formats, LOT.md §3.5. The built-in formats are UTC:
//
//	"ISO"     2025-03-17T14:25:30.123Z (also a bare TIMESTAMP)
//	"UTC"     2025-03-17 14:25:30
//	"UNIX"    epoch seconds, a number
//	"UNIX-MS" epoch milliseconds, a number
//
// Any other text is a .NET-style custom pattern, rendered in
// Options.Location: yyyy yy MMMM MMM MM M dddd ddd dd d HH H hh h mm m ss s
// f..fffffff F..FFFFFFF tt t zzz zz z K, 'quoted' or "quoted" literals, \x
// for a literal x, %x for a lone specifier; other characters are copied.
// A pattern that cannot be read (an open quote, more than seven f) gives
// "" as the reference says.

const (
	isoLayout = "2006-01-02T15:04:05.000Z"
	utcLayout = "2006-01-02 15:04:05"
)

// tsFormat is a compiled TIMESTAMP format.
type tsFormat struct {
	builtin string   // "ISO", "UTC", "UNIX", "UNIX-MS", or "" for a pattern
	parts   []tsPart // the pattern
	invalid bool     // the pattern cannot be read: render ""
}

// tsPart is a literal (spec 0) or a specifier letter repeated n times.
type tsPart struct {
	spec byte
	n    int
	lit  string
}

// compileTimestamp reads a TIMESTAMP format.
func compileTimestamp(format string) *tsFormat {
	switch up := strings.ToUpper(strings.TrimSpace(format)); up {
	case "", "ISO", "UTC", "UNIX", "UNIX-MS":
		if up == "" {
			up = "ISO"
		}
		return &tsFormat{builtin: up}
	}
	parts, ok := parsePattern(format)
	return &tsFormat{parts: parts, invalid: !ok}
}

// maxRun is the longest run of each specifier letter; a longer run of f
// or F is invalid, longer runs of the others are read as the longest.
var maxRun = map[byte]int{'y': 5, 'M': 4, 'd': 4, 'H': 2, 'h': 2, 'm': 2, 's': 2,
	'f': 7, 'F': 7, 't': 2, 'z': 3, 'K': 1}

func parsePattern(p string) ([]tsPart, bool) {
	var parts []tsPart
	lit := func(s string) {
		if n := len(parts); n > 0 && parts[n-1].spec == 0 {
			parts[n-1].lit += s
			return
		}
		parts = append(parts, tsPart{lit: s})
	}
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(p[i+1:], c)
			if end < 0 {
				return nil, false
			}
			lit(p[i+1 : i+1+end])
			i += end + 2
		case c == '\\' || c == '%':
			if i+1 >= len(p) {
				return nil, false
			}
			if c == '\\' {
				lit(p[i+1 : i+2])
				i += 2
			} else {
				i++
			}
		case maxRun[c] > 0:
			n := 1
			for i+n < len(p) && p[i+n] == c {
				n++
			}
			if n > maxRun[c] {
				if c == 'f' || c == 'F' {
					return nil, false
				}
				n = maxRun[c]
			}
			parts = append(parts, tsPart{spec: c, n: n})
			i += n
		default:
			lit(p[i : i+1])
			i++
		}
	}
	return parts, true
}

// value renders the time t in the format.
func (f *tsFormat) value(t time.Time, loc *time.Location) Value {
	switch f.builtin {
	case "ISO":
		return String(t.UTC().Format(isoLayout))
	case "UTC":
		return String(t.UTC().Format(utcLayout))
	case "UNIX":
		return Int(t.Unix())
	case "UNIX-MS":
		return Int(t.UnixMilli())
	}
	if f.invalid {
		return String("")
	}
	t = t.In(loc)
	b := make([]byte, 0, 32)
	for _, p := range f.parts {
		b = p.append(b, t)
	}
	return String(string(b))
}

// append renders one part of a pattern.
func (p tsPart) append(b []byte, t time.Time) []byte {
	switch p.spec {
	case 0:
		return append(b, p.lit...)
	case 'y':
		y := t.Year()
		if p.n <= 2 {
			y %= 100
		}
		return pad(b, y, max(p.n, 1))
	case 'M':
		return appendNamed(b, p.n, int(t.Month()), t.Month().String())
	case 'd':
		return appendNamed(b, p.n, t.Day(), t.Weekday().String())
	case 'H':
		return pad(b, t.Hour(), p.n)
	case 'h':
		h := t.Hour() % 12
		if h == 0 {
			h = 12
		}
		return pad(b, h, p.n)
	case 'm':
		return pad(b, t.Minute(), p.n)
	case 's':
		return pad(b, t.Second(), p.n)
	case 'f', 'F':
		return appendFraction(b, t.Nanosecond(), p.n, p.spec == 'F')
	case 't':
		ampm := "AM"
		if t.Hour() >= 12 {
			ampm = "PM"
		}
		return append(b, ampm[:p.n]...)
	case 'z':
		return appendZone(b, t, p.n)
	case 'K':
		if _, off := t.Zone(); off == 0 && t.Location() == time.UTC {
			return append(b, 'Z')
		}
		return appendZone(b, t, 3)
	}
	return b
}

// appendNamed renders M/MM (d/dd) as numbers and MMM/MMMM (ddd/dddd) as
// the abbreviated or full English name.
func appendNamed(b []byte, n, num int, name string) []byte {
	switch n {
	case 1, 2:
		return pad(b, num, n)
	case 3:
		return append(b, name[:3]...)
	}
	return append(b, name...)
}

func appendFraction(b []byte, nanos, n int, trim bool) []byte {
	digits := []byte(strconv.Itoa(nanos + 1e9))[1 : 1+n]
	if trim {
		digits = []byte(strings.TrimRight(string(digits), "0"))
		if len(digits) == 0 && len(b) > 0 && b[len(b)-1] == '.' {
			return b[:len(b)-1]
		}
	}
	return append(b, digits...)
}

func appendZone(b []byte, t time.Time, n int) []byte {
	_, off := t.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	switch n {
	case 1:
		return strconv.AppendInt(b, int64(off/3600), 10)
	case 2:
		return pad(b, off/3600, 2)
	}
	b = pad(b, off/3600, 2)
	b = append(b, ':')
	return pad(b, off%3600/60, 2)
}

// pad appends v with at least width digits.
func pad(b []byte, v, width int) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
