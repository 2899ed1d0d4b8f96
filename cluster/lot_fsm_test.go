package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

func lotEntry(t *testing.T, index uint64, c lotCommand) *raft.Log {
	t.Helper()
	data, err := json.Marshal(command{Version: commandVersion, Op: opLoT, LoT: &c})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// TestFSMLoT: the cluster adopts one node's definitions once; a change
// applies only on top of the version it was checked on, all or nothing;
// the version is the entry's index; snapshots carry it all.
func TestFSMLoT(t *testing.T) {
	rule := LoTDef{Kind: "rule", Name: "AllowConnect", Source: "DEFINE RULE AllowConnect ..."}
	echo := LoTDef{Kind: "action", Name: "Echo", Source: "DEFINE ACTION Echo ..."}
	echo2 := LoTDef{Kind: "action", Name: "Echo", Source: "DEFINE ACTION Echo ... v2"}
	f := &fsm{}
	for _, tc := range []struct {
		name    string
		index   uint64
		c       lotCommand
		want    error
		version uint64
		defs    []LoTDef
	}{
		{"change before adoption conflicts", 3, lotCommand{Base: 5, Puts: []LoTDef{echo}}, ErrLoTConflict, 0, nil},
		{"adopt", 4, lotCommand{From: "a", Adopt: true, Puts: []LoTDef{rule}}, nil, 4, []LoTDef{rule}},
		{"second adoption conflicts", 5, lotCommand{From: "b", Adopt: true, Puts: []LoTDef{echo}}, ErrLoTConflict, 4, []LoTDef{rule}},
		{"put", 6, lotCommand{Base: 4, Puts: []LoTDef{echo}}, nil, 6, []LoTDef{echo, rule}},
		{"stale base", 7, lotCommand{Base: 4, Puts: []LoTDef{echo2}}, ErrLoTConflict, 6, []LoTDef{echo, rule}},
		{"replace", 8, lotCommand{Base: 6, Puts: []LoTDef{echo2}}, nil, 8, []LoTDef{echo2, rule}},
		{"delete unknown changes nothing", 9, lotCommand{Base: 8, Deletes: []LoTDelete{{Kind: "action", Name: "Echo"}, {Kind: "action", Name: "Nope"}}}, ErrLoTNotFound, 8, []LoTDef{echo2, rule}},
		{"delete a kind", 10, lotCommand{Base: 8, Deletes: []LoTDelete{{Kind: "action"}}}, nil, 10, []LoTDef{rule}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.Apply(lotEntry(t, tc.index, tc.c))
			err, _ := res.(error)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Apply = %v, want %v", res, tc.want)
			}
			st := f.current().LoT
			if st.Version != tc.version || !slices.Equal(st.Defs, tc.defs) {
				t.Fatalf("state %d %+v, want %d %+v", st.Version, st.Defs, tc.version, tc.defs)
			}
		})
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
	if a, b := f.current().LoT, g.current().LoT; a.Version != b.Version || !slices.Equal(a.Defs, b.Defs) || a.AdoptedFrom != "a" || b.AdoptedFrom != "a" {
		t.Fatalf("restored %+v, want %+v", b, a)
	}
}

// TestPlanWork: work spreads over the live nodes; a silent owner's work
// moves to its standby and nothing else moves; a node that returns takes
// new work only; a pinned item stays on its node, without a standby.
func TestPlanWork(t *testing.T) {
	items := []WorkItem{{Key: "timer/A"}, {Key: "timer/B"}, {Key: "timer/C"}, {Key: "connector/P", Pin: "b"}}
	m := PlanWork(WorkMap{}, items, []string{"a", "b", "c"})
	if m.Version != 1 || len(m.Items) != 4 {
		t.Fatalf("first plan %+v", m)
	}
	owners := map[string]int{}
	for _, a := range m.Items {
		owners[a.Owner]++
		if a.Pinned {
			if a.Owner != "b" || a.Standby != "" {
				t.Fatalf("pinned %+v", a)
			}
			continue
		}
		if a.Standby == "" || a.Standby == a.Owner {
			t.Fatalf("no standby: %+v", a)
		}
	}
	if owners["a"] > 2 || owners["b"] != 1 || owners["c"] != 1 {
		t.Fatalf("work not spread: %v (%+v)", owners, m.Items)
	}
	if again := PlanWork(m, items, []string{"a", "b", "c"}); again.Version != m.Version {
		t.Fatalf("an unchanged plan got a new version: %+v", again)
	}
	// b falls silent: its timer goes to its standby, the others stay.
	var bTimer WorkAssignment
	for _, a := range m.Items {
		if a.Owner == "b" && !a.Pinned {
			bTimer = a
		}
	}
	m2 := PlanWork(m, items, []string{"a", "c"})
	for _, a := range m2.Items {
		old, _ := m.Lookup(a.Key)
		switch {
		case a.Pinned:
			if a.Owner != "b" {
				t.Fatalf("pinned item moved: %+v", a)
			}
		case a.Key == bTimer.Key:
			if a.Owner != bTimer.Standby || a.Epoch != old.Epoch+1 {
				t.Fatalf("b's timer %+v, want it on its standby %s with a new epoch", a, bTimer.Standby)
			}
		case a.Owner != old.Owner:
			t.Fatalf("%s moved from %s to %s", a.Key, old.Owner, a.Owner)
		}
		if a.Standby == "b" {
			t.Fatalf("silent b is a standby: %+v", a)
		}
	}
	// b returns: nothing moves back; a new timer may go to it.
	items = append(items, WorkItem{Key: "timer/D"})
	m3 := PlanWork(m2, items, []string{"a", "b", "c"})
	for _, a := range m3.Items {
		if old, ok := m2.Lookup(a.Key); ok && old.Owner != a.Owner {
			t.Fatalf("%s moved back from %s to %s", a.Key, old.Owner, a.Owner)
		}
	}
	if d, _ := m3.Lookup("timer/D"); d.Owner != "b" {
		t.Fatalf("the new timer went to %s, want the least loaded b", d.Owner)
	}
}

// TestFSMStartClaims: an ON START run is claimed once per session and
// code; a new session forgets the claims; a claim for another session is
// refused.
func TestFSMStartClaims(t *testing.T) {
	f := &fsm{}
	apply := func(i uint64, c lotCommand) error {
		err, _ := f.Apply(lotEntry(t, i, c)).(error)
		return err
	}
	s1 := &LoTSession{ID: "s1", Boots: map[string]string{"a": "1", "b": "2"}}
	claim := func(session, code string) lotCommand {
		return lotCommand{Start: &StartClaim{Action: "Boot", Code: code, Node: "a", Session: session}}
	}
	for i, step := range []struct {
		c    lotCommand
		want error
	}{
		{lotCommand{Session: s1}, nil},
		{claim("s1", "c1"), nil},
		{claim("s1", "c1"), ErrStartClaimed},
		{claim("s0", "c2"), ErrStartClaimed},
		{claim("s1", "c2"), nil}, // new code runs again
		{lotCommand{Session: &LoTSession{ID: "s1", Boots: map[string]string{"a": "3", "b": "2"}}}, nil},
		{claim("s1", "c2"), ErrStartClaimed}, // same session: a restarted member does not run it again
		{lotCommand{Session: &LoTSession{ID: "s2"}}, nil},
		{claim("s2", "c2"), nil}, // a new session runs it again
	} {
		if err := apply(uint64(i+1), step.c); !errors.Is(err, step.want) {
			t.Fatalf("step %d: %v, want %v", i, err, step.want)
		}
	}
}
