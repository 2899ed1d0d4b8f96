package auth

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAdoptCluster: the cluster's users replace the file; a file that
// held other users (the node's own, or a change made on the file) is
// backed up first; an older state of the same cluster never replaces a
// newer one; a change on the file drops the mark.
func TestAdoptCluster(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("own", "pw", true); err != nil {
		t.Fatal(err)
	}
	root := User{Name: "root", Hash: "$2a$04$x", Admin: true}
	alice := User{Name: "alice", Hash: "$2a$04$y"}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	backups := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, FileName+".local-*"))
		return m
	}
	for _, tc := range []struct {
		name    string
		users   []User
		mark    ClusterMark
		written bool
		differ  []string
		backups int
		want    []string // user names afterwards
	}{
		{"joining: own users backed up", []User{root}, ClusterMark{"s1", 1}, true, []string{"own", "root"}, 1, []string{"root"}},
		{"same version again", []User{root}, ClusterMark{"s1", 1}, false, nil, 1, []string{"root"}},
		{"newer version", []User{alice, root}, ClusterMark{"s1", 2}, true, []string{"alice"}, 1, []string{"alice", "root"}},
		{"older version replayed at start", []User{root}, ClusterMark{"s1", 1}, false, nil, 1, []string{"alice", "root"}},
		{"another cluster's session", []User{root}, ClusterMark{"s2", 1}, true, []string{"alice"}, 2, []string{"root"}},
	} {
		a, err := s.AdoptCluster(tc.users, tc.mark, now)
		now = now.Add(time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if a.Written != tc.written || !slices.Equal(a.Differ, tc.differ) || len(backups()) != tc.backups {
			t.Errorf("%s: %+v, %d backups; want written %v, differ %v, %d backups", tc.name, a, len(backups()), tc.written, tc.differ, tc.backups)
		}
		if got := s.Names(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: users %v, want %v", tc.name, got, tc.want)
		}
	}
	if data, _ := os.ReadFile(backups()[0]); !strings.Contains(string(data), `"own"`) {
		t.Errorf("the first backup lacks the node's own user: %s", data)
	}
	// A change on the file (the gantry command, node stopped) drops the
	// mark, so the next adoption backs the file up.
	if err := s.Add("local", "pw", false); err != nil {
		t.Fatal(err)
	}
	if mark, _, _ := s.Marked(); mark != nil {
		t.Fatalf("mark after a change on the file: %+v", mark)
	}
	if a, _ := s.AdoptCluster([]User{root}, ClusterMark{"s2", 2}, now); !a.Written || a.Backup == "" {
		t.Errorf("adopting over a file changed locally: %+v, want a backup", a)
	}
}

type funcReplicator func(func(map[string]User) error) error

func (f funcReplicator) Replicate(c func(map[string]User) error) error { return f(c) }

// TestReplicatorTakesChanges: with a Replicator every change goes to it,
// not to the file, and its refusals reach the caller.
func TestReplicatorTakesChanges(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("root", "pw", true); err != nil {
		t.Fatal(err)
	}
	var seen map[string]User
	refuse := errors.New("no majority")
	s.SetReplicator(funcReplicator(func(change func(map[string]User) error) error {
		m := map[string]User{"root": {Name: "root", Hash: "h", Admin: true}}
		if err := change(m); err != nil {
			return err
		}
		seen = m
		return refuse
	}))
	if err := s.Add("bob", "pw", false); !errors.Is(err, refuse) {
		t.Fatalf("Add through a refusing replicator: %v", err)
	}
	if _, ok := seen["bob"]; !ok {
		t.Errorf("the replicator saw %v, want bob added", seen)
	}
	if err := s.Remove("root"); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("removing the cluster's last administrator: %v, want ErrLastAdmin", err)
	}
	if names := s.Names(); !slices.Equal(names, []string{"root"}) {
		t.Errorf("the file changed: %v", names)
	}
}
