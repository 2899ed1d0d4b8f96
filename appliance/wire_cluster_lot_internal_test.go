package appliance

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"gantry/cluster"
	"gantry/lot/defs"
)

// TestDiffDefsAndBackUp: the change that turns a node's definitions into
// the cluster's, and the backup of what it removes or replaces under
// lot-backup/<time>/<kind>/<name>.lot.
func TestDiffDefsAndBackUp(t *testing.T) {
	local := []defs.Definition{
		{Kind: defs.Action, Name: "Same", Source: "same"},
		{Kind: defs.Action, Name: "Changed", Source: "mine"},
		{Kind: defs.Rule, Name: "OnlyHere", Source: "rule"},
	}
	theirs := []cluster.LoTDef{
		{Kind: "action", Name: "Same", Source: "same"},
		{Kind: "action", Name: "Changed", Source: "theirs"},
		{Kind: "model", Name: "New", Source: "model"},
	}
	c, dropped := diffDefs(local, theirs)
	if len(c.Deletes) != 1 || c.Deletes[0] != (defs.Delete{Kind: defs.Rule, Name: "OnlyHere"}) {
		t.Errorf("deletes %+v", c.Deletes)
	}
	if len(c.Puts) != 2 || c.Puts[0].Name != "Changed" || c.Puts[0].Source != "theirs" || c.Puts[1].Name != "New" {
		t.Errorf("puts %+v", c.Puts)
	}
	if len(dropped) != 2 {
		t.Fatalf("dropped %+v, want Changed and OnlyHere", dropped)
	}
	dir := t.TempDir()
	s := &clusterDefs{dataDir: dir, log: slog.New(slog.DiscardHandler)}
	at, err := s.backUp(dropped)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, want string }{{"action/Changed.lot", "mine"}, {"rule/OnlyHere.lot", "rule"}} {
		got, err := os.ReadFile(filepath.Join(at, f.path))
		if err != nil || string(got) != f.want {
			t.Errorf("%s: %q, %v; want %q", f.path, got, err, f.want)
		}
	}
	if filepath.Dir(at) != filepath.Join(dir, lotBackupDir) {
		t.Errorf("backup in %s, want under %s", at, filepath.Join(dir, lotBackupDir))
	}
	if c, d := diffDefs(local[:1], theirs[:1]); len(c.Deletes)+len(c.Puts)+len(d) != 0 {
		t.Errorf("equal sets differ: %+v %+v", c, d)
	}
}
