package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

func usersEntry(t *testing.T, index, base uint64, users ...User) *raft.Log {
	t.Helper()
	data, err := json.Marshal(command{Version: commandVersion, Op: opUsers, Users: &usersChange{Base: base, Users: users}})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// TestFSMUsers: a change applies only on top of the version it was
// computed from, never leaves the cluster without an administrator, and
// travels in snapshots.
func TestFSMUsers(t *testing.T) {
	root := User{Name: "root", Hash: "h0", Admin: true}
	alice := User{Name: "alice", Hash: "h1", Flags: []string{"AllowedLogManagement"}, Groups: []string{"operators"}}
	f := &fsm{}
	for _, tc := range []struct {
		name    string
		base    uint64
		users   []User
		want    error
		version uint64
	}{
		{"seed", 0, []User{root}, nil, 1},
		{"second seed is stale", 0, []User{alice}, ErrUsersConflict, 1},
		{"add alice", 1, []User{alice, root}, nil, 2},
		{"stale base", 1, []User{root}, ErrUsersConflict, 2},
		{"no administrator left", 2, []User{alice}, ErrNoAdmin, 2},
	} {
		res := f.Apply(usersEntry(t, tc.version, tc.base, tc.users...))
		err, _ := res.(error)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: Apply = %v, want %v", tc.name, res, tc.want)
		}
		if v := f.current().Users.Version; v != tc.version || f.usersApplied.Load() != tc.version {
			t.Errorf("%s: version %d (applied %d), want %d", tc.name, v, f.usersApplied.Load(), tc.version)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	g := &fsm{}
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(g.current().Users)
	want, _ := json.Marshal(f.current().Users)
	if !bytes.Equal(got, want) || g.usersApplied.Load() != 2 {
		t.Errorf("restored users %s (applied %d), want %s", got, g.usersApplied.Load(), want)
	}
}

type sink struct{ *bytes.Buffer }

func (sink) ID() string    { return "test" }
func (sink) Cancel() error { return nil }
func (sink) Close() error  { return nil }
