package syntax

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// addSeeds adds the reference programs to a fuzz corpus. The committed
// seeds under testdata/fuzz hold them too, with hand-written tricky inputs
// (flat forms, every definition kind, errors, deep brackets, unicode).
func addSeeds(f *testing.F) {
	files, _ := filepath.Glob("../testdata/programs/*.lot")
	for _, path := range files {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(string(b))
		}
	}
}

// posAt computes the line and rune column of byte offset off in src.
func posAt(src string, off int) Pos {
	line, col := 1, 1
	for i, r := range src {
		if i >= off {
			break
		}
		if i == 0 && r == '\uFEFF' {
			continue // a byte order mark takes no column
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return Pos{Line: line, Col: col, Offset: off}
}

func FuzzLex(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		toks, _ := Lex("f", src)
		if len(toks) == 0 || toks[len(toks)-1].Kind != EOF {
			t.Fatal("tokens do not end with EOF")
		}
		depth, last := 0, 0
		for _, tok := range toks {
			if tok.Pos.Offset < last || tok.End < tok.Pos.Offset || tok.End > len(src) {
				t.Fatalf("token %v at %d..%d out of order (last %d)", tok, tok.Pos.Offset, tok.End, last)
			}
			last = tok.Pos.Offset
			switch tok.Kind {
			case INDENT:
				depth++
			case DEDENT:
				depth--
			case NEWLINE, EOF:
			default:
				if src[tok.Pos.Offset:tok.End] != tok.Text {
					t.Fatalf("token text %q, source %q", tok.Text, src[tok.Pos.Offset:tok.End])
				}
				if utf8.ValidString(src) && tok.Pos != posAt(src, tok.Pos.Offset) {
					t.Fatalf("token %v at %v, want %v", tok, tok.Pos, posAt(src, tok.Pos.Offset))
				}
			}
			if depth < 0 {
				t.Fatal("DEDENT without INDENT")
			}
		}
		if depth != 0 {
			t.Fatalf("%d INDENTs left open", depth)
		}
	})
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		file, err := Parse("f", src)
		if file == nil {
			t.Fatal("nil file")
		}
		if err != nil {
			list, ok := err.(ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Pos.Offset < 0 || e.Pos.Offset > len(src) || e.Msg == "" {
					t.Fatalf("bad error %+v", e)
				}
				_ = e.Format()
			}
		}
		for _, d := range file.Defs {
			h := d.Header()
			if h.Text != h.Span.Text(src) || !strings.HasPrefix(strings.ToUpper(h.Text), "DEFINE") {
				t.Fatalf("definition text %q, span %v", h.Text, h.Span)
			}
			// An unsupported definition (a panel, an agent) is recognised
			// only far enough to be refused: its text is never stored, and
			// its body need not reparse alone (e05cac638d1dea66: a panel in
			// a file indented as a whole).
			if _, unsupported := d.(*UnsupportedDef); err == nil && !unsupported {
				reparse(t, h)
			}
			Inspect(d, func(n Node) bool {
				if p := n.Pos(); p.Offset < 0 || p.Offset > len(src) {
					t.Fatalf("%T at %v outside the source", n, p)
				}
				return true
			})
		}
	})
}

// reparse checks that the text of a definition parses on its own to the
// same definition: the runtime stores and republishes each one separately.
func reparse(t *testing.T, h *DefHeader) {
	t.Helper()
	f, err := Parse("def", h.Text)
	if err != nil || len(f.Defs) != 1 {
		t.Fatalf("definition %s %s does not parse alone (%d defs): %v\n%s", h.Kind, h.Name, len(f.Defs), err, h.Text)
	}
	if g := f.Defs[0].Header(); g.Kind != h.Kind || g.Name != h.Name || g.Text != h.Text {
		t.Fatalf("definition %s %s parses alone as %s %s", h.Kind, h.Name, g.Kind, g.Name)
	}
}
