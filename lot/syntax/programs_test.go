package syntax

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferencePrograms parses every example program of the reference
// (lot/testdata/programs): each must parse without error, and each
// definition's Text must be its own source.
func TestReferencePrograms(t *testing.T) {
	files, err := filepath.Glob("../testdata/programs/*.lot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no programs: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(filepath.Base(path), string(src))
			if err != nil {
				t.Fatalf("parse:\n%s", err.(ErrorList).Format())
			}
			if len(f.Defs) == 0 {
				t.Fatal("no definitions")
			}
			for _, d := range f.Defs {
				h := d.Header()
				if !strings.HasPrefix(h.Text, "DEFINE") || h.Text != h.Span.Text(f.Src) {
					t.Errorf("%s %s: bad span %v: %q", h.Kind, h.Name, h.Span, h.Text)
				}
				reparse(t, h)
				if h.Name == "" || !h.NamePos.IsValid() {
					t.Errorf("%s: no name", h.Kind)
				}
			}
		})
	}
}
