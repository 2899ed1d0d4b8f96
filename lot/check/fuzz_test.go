package check

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheck holds the checker to never panicking on whatever the parser
// returns, errors or not, and to giving every diagnostic a position inside
// the source.
func FuzzCheck(f *testing.F) {
	for _, pattern := range []string{"../testdata/programs/*.lot", "../testdata/diagnostics/*.lot"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			if b, err := os.ReadFile(path); err == nil {
				f.Add(string(b))
			}
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		file, diags := Source("f", src, goldenEnv)
		if file != nil {
			diags = append(diags, Check(file, goldenEnv)...) // also on partial files
		}
		for _, d := range diags {
			if !d.Pos.IsValid() || d.Pos.Offset > len(src) || d.Msg == "" {
				t.Fatalf("bad diagnostic %+v", d)
			}
			_ = d.Format()
		}
	})
}
