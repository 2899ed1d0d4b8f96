package syntax

import "fmt"

// Pos is a place in a LoT source: Line and Col count from 1, Col in
// runes (a tab is one rune), Offset in bytes from the start of the
// source. The zero Pos means "no position".
type Pos struct {
	Line   int
	Col    int
	Offset int
}

// IsValid reports whether p names a place in a source.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String formats p as "line:col".
func (p Pos) String() string {
	if !p.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Col)
}

// Span is a half-open byte range [Start, End) of a source.
type Span struct {
	Start int
	End   int
}

// Text returns the part of src that s covers, or "" when s is outside src.
func (s Span) Text(src string) string {
	if s.Start < 0 || s.End > len(src) || s.Start > s.End {
		return ""
	}
	return src[s.Start:s.End]
}

// lineAt returns the text of the line that holds byte offset off, without
// its line break.
func lineAt(src string, off int) string {
	if off < 0 || off > len(src) {
		return ""
	}
	start := off
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	end := off
	for end < len(src) && src[end] != '\n' {
		end++
	}
	line := src[start:end]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}
