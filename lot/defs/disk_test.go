package defs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setup returns a store directory at version 2 holding action A ("a2"),
// action B and model M.
func setup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l := open(t, dir)
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "a1"), put(Action, "B", "b"), put(Model, "M", "m")}})
	mustApply(t, l, Change{Puts: []Put{put(Action, "A", "a2")}})
	return dir
}

func problems(l *Local) string {
	var out []string
	for _, p := range l.Problems() {
		out = append(out, p.Error())
	}
	return strings.Join(out, "\n")
}

// TestInterruptedChange fails a project load at each step of the write:
// the store and the disk keep every old definition and none of the new.
func TestInterruptedChange(t *testing.T) {
	for _, point := range []string{beforeRename, beforeCurrent} {
		t.Run(point, func(t *testing.T) {
			dir := setup(t)
			l := open(t, dir)
			testHook = func(p string) error {
				if p == point {
					return errors.New("injected crash")
				}
				return nil
			}
			t.Cleanup(func() { testHook = nil })
			project := Change{Deletes: []Delete{{Kind: Action}, {Kind: Model}}, Puts: []Put{put(Action, "P", "p"), put(Model, "Q", "q")}}
			if _, err := l.Apply(ctx, project); err == nil || !strings.Contains(err.Error(), "injected crash") {
				t.Fatalf("Apply = %v, want the injected failure", err)
			}
			want := "model/M@1 action/A@2 action/B@1"
			if got := names(l.List("")); got != want || l.Version() != 2 {
				t.Fatalf("in memory after the failure: v%d %s", l.Version(), got)
			}
			testHook = nil
			r := open(t, dir)
			if got := names(r.List("")); got != want || r.Version() != 2 || len(r.Problems()) != 0 {
				t.Fatalf("reopened: v%d %s, problems %s", r.Version(), got, problems(r))
			}
			if a, err := r.Apply(ctx, project); err != nil || a.Version != 3 {
				t.Fatalf("the same change afterwards: %+v, %v", a, err)
			}
		})
	}
}

// TestCrashLeftovers reopens directories as a crash at each point would
// leave them.
func TestCrashLeftovers(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(t *testing.T, dir string)
		want     string // definitions after reopening
		problems []string
	}{
		{"half-written generation", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, genName(3)+tmpSuffix, "action", "P.lot"), "DEFINE ACTION P")
		}, "model/M@1 action/A@2 action/B@1", nil},
		{"complete generation not yet current", func(t *testing.T, dir string) {
			copyDir(t, filepath.Join(dir, genName(2)), filepath.Join(dir, genName(3)))
			os.Remove(filepath.Join(dir, genName(3), "action", "B.lot"))
		}, "model/M@1 action/A@2 action/B@1", nil},
		{"CURRENT missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, currentFile))
		}, "model/M@1 action/A@2 action/B@1", []string{"CURRENT is missing or invalid", "using the latest generation"}},
		{"CURRENT garbage", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, currentFile), "\x00\x01")
		}, "model/M@1 action/A@2 action/B@1", []string{"CURRENT is missing or invalid"}},
		{"CURRENT names a missing generation, none left", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, genName(2)))
		}, "", []string{"which does not exist; starting empty"}},
		{"corrupt file", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, genName(2), "action", "B.lot"), "DEFINE ACTION B\ngarbage")
		}, "model/M@1 action/A@2", []string{"action/B.lot is corrupt", "skipped"}},
		{"truncated file", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, genName(2), "model", "M.lot"), "")
		}, "action/A@2 action/B@1", []string{"model/M.lot: model \"M\": the source is empty; skipped"}},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, genName(2), "model", "M.lot"))
		}, "action/A@2 action/B@1", []string{"model/M.lot is missing"}},
		{"stray files", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, genName(2), "action", "notes.txt"), "x")
			write(t, filepath.Join(dir, genName(2), "action", "bad name.lot"), "x")
			write(t, filepath.Join(dir, genName(2), "rule", "Extra.lot"), "DEFINE RULE Extra")
		}, "model/M@1 action/A@2 action/B@1", []string{"notes.txt is not a definition file", "bad name.lot is not a definition file",
			"rule/Extra.lot is not in the manifest"}},
		{"manifest unreadable", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, genName(2), manifestFile), `{"version":"x","files":[{"kind":"action"}]}`)
		}, "model/M@2 action/A@2 action/B@2", []string{"MANIFEST unreadable", "loading the files without checking them"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			tc.damage(t, dir)
			l := open(t, dir)
			if got := names(l.List("")); got != tc.want {
				t.Fatalf("definitions %q, want %q (problems: %s)", got, tc.want, problems(l))
			}
			ps := problems(l)
			for _, p := range tc.problems {
				if !strings.Contains(ps, p) {
					t.Fatalf("problems %q do not mention %q", ps, p)
				}
			}
			if tc.problems == nil && ps != "" {
				t.Fatalf("unexpected problems: %s", ps)
			}
			// Leftovers are cleaned up and the store takes changes.
			if gens, _ := filepath.Glob(filepath.Join(dir, genPrefix+"*")); len(gens) > 1 {
				t.Fatalf("leftover generations: %v", gens)
			}
			if _, err := l.Apply(ctx, Change{Puts: []Put{put(Rule, "Z", "ALLOW")}}); err != nil {
				t.Fatal(err)
			}
			if got := names(open(t, dir).List(Rule)); !strings.Contains(got, "rule/Z") {
				t.Fatalf("after a new change: %s", got)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	write(t, file, "x")
	if _, err := OpenLocal(filepath.Join(file, "lot"), nil); err == nil || !strings.Contains(err.Error(), "file/lot") {
		t.Fatalf("OpenLocal under a file = %v", err)
	}
	if _, err := OpenLocal(t.TempDir(), &Options{MaxSourceBytes: -1}); err == nil {
		t.Fatal("negative MaxSourceBytes accepted")
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
