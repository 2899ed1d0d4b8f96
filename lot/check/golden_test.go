package check

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of lot/testdata/diagnostics")

// goldenEnv is what the diagnostics test files may assume is deployed.
var goldenEnv = Deployed{
	Callables: map[string]Callable{
		"Average2": {Inputs: []string{"a", "b"}, Outputs: 1},
		"LampOn":   {},
		"Scale":    {Inputs: []string{"value", "factor"}, Outputs: 2},
	},
	Models: map[string]Model{
		"Reading": {Fields: []string{"device", "temp", "ts"}},
	},
}

// TestGoldenDiagnostics checks every lot/testdata/diagnostics/*.lot
// against its .golden file: the formatted diagnostics, with line, column,
// caret and hint. Run with -update to rewrite the golden files.
func TestGoldenDiagnostics(t *testing.T) {
	files, err := filepath.Glob("../testdata/diagnostics/*.lot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no diagnostics files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := Source(filepath.Base(path), string(src), goldenEnv)
			got := Format(diags)
			golden := strings.TrimSuffix(path, ".lot") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./lot/check -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestReferencePrograms checks the reference programs: those marked
// "expect: reject" must have an error, the others none.
func TestReferencePrograms(t *testing.T) {
	files, _ := filepath.Glob("../testdata/programs/*.lot")
	if len(files) == 0 {
		t.Fatal("no programs")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := Source(filepath.Base(path), string(src), nil)
			reject := strings.Contains(string(src), "// expect: reject")
			if HasErrors(diags) != reject {
				t.Errorf("reject = %v, diagnostics:\n%s", reject, Format(diags))
			}
		})
	}
}
