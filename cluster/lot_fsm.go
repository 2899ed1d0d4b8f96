package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// This file is the replicated state of LoT in a cluster (see doc.go, "LoT
// in a cluster"): the definitions every node runs, and the owner map of
// the work that runs in one place (timers, ON START, exclusive
// connectors, scheduled events). The cluster does not read LoT: a
// definition is a kind, a name and its source, and a work item a key the
// appliance derives from the definitions.

// LoTDef is one LoT definition of the cluster: kind ("action", "model",
// "connector", "rule"), name and source, as lot/defs stores them.
type LoTDef struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Source string `json:"source"`
}

// LoTDelete removes one definition, or every definition of Kind when Name
// is empty.
type LoTDelete struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}

// LoTState is the cluster's LoT: the definitions with the version of the
// last change, and the work owners.
type LoTState struct {
	// Version is the Raft index of the last committed change of the
	// definitions; 0 while the cluster has not adopted any (each node
	// runs its own LoT until then).
	Version uint64 `json:"version"`
	// Changes counts the committed changes, the adoption included.
	Changes uint64 `json:"changes"`
	// AdoptedFrom is the node whose definitions became the cluster's.
	AdoptedFrom string   `json:"adoptedFrom,omitempty"`
	Defs        []LoTDef `json:"defs,omitempty"` // sorted by kind, then name
	Work        WorkMap  `json:"work"`
	// Started records the ON START actions claimed in this session
	// (lot_start.go): action name → the code version that ran.
	Started map[string]string `json:"started,omitempty"`
	// Session is the session ON START counts in (lot_start.go).
	Session LoTSession `json:"session"`
}

// lotCommand is the command of a LoT change: definitions (computed on
// top of Base, compare and set), or an adoption, or a new work map, or
// an ON START claim.
type lotCommand struct {
	From    string      `json:"from,omitempty"`
	Base    uint64      `json:"base"`
	Adopt   bool        `json:"adopt,omitempty"` // Puts are the whole set; only while Version is 0
	Deletes []LoTDelete `json:"deletes,omitempty"`
	Puts    []LoTDef    `json:"puts,omitempty"`
	Work    *WorkMap    `json:"work,omitempty"`
	Start   *StartClaim `json:"start,omitempty"`
	Session *LoTSession `json:"session,omitempty"`
}

// Errors of LoT changes.
var (
	// ErrLoTConflict: the definitions changed between reading and
	// committing; the change is computed and checked again on the new ones.
	ErrLoTConflict = errors.New("cluster: the LoT definitions changed meanwhile")
	// ErrLoTNoMajority: no leader, or the leader could not commit.
	ErrLoTNoMajority = errors.New("cluster: no majority of the members is reachable: LoT change refused")
	// ErrLoTNotFound: a delete names a definition the cluster lacks.
	ErrLoTNotFound = errors.New("cluster: no such LoT definition")
	errLoTNoSecret = errors.New("cluster: LoT changes between nodes need Cluster.SharedSecret: make the change on the leader, or set the secret")
)

// LoTConflictError is ErrLoTConflict with the version the cluster is at.
type LoTConflictError struct{ Current uint64 }

func (e *LoTConflictError) Error() string {
	return fmt.Sprintf("%v: now at version %d", ErrLoTConflict, e.Current)
}
func (e *LoTConflictError) Unwrap() error { return ErrLoTConflict }

// applyLoT runs on the FSM (mu held). index is the entry's Raft index,
// the version of a definitions change.
func (f *fsm) applyLoT(c *lotCommand, index uint64) (result any, changed bool) {
	st := &f.state.LoT
	switch {
	case c == nil:
		return errors.New("cluster: LoT command without a change"), false
	case c.Work != nil:
		if c.Work.Version <= st.Work.Version {
			return nil, false // a deposed leader's late map
		}
		st.Work = *c.Work
		return nil, true
	case c.Start != nil:
		return f.applyStart(c.Start)
	case c.Session != nil:
		return f.applySession(c.Session)
	case c.Adopt:
		if st.Version != 0 {
			return &LoTConflictError{Current: st.Version}, false
		}
		defs := slices.Clone(c.Puts)
		sortDefs(defs)
		st.Defs, st.Version, st.AdoptedFrom = defs, index, c.From
		st.Changes++
		return index, true
	case c.Base != st.Version:
		return &LoTConflictError{Current: st.Version}, false
	}
	next, err := changeDefs(st.Defs, c.Deletes, c.Puts)
	if err != nil {
		return err, false
	}
	st.Defs, st.Version = next, index
	st.Changes++
	return index, true
}

// changeDefs returns cur with the deletes, then the puts, applied, or an
// error when a delete names a definition cur lacks. cur is not modified.
func changeDefs(cur []LoTDef, deletes []LoTDelete, puts []LoTDef) ([]LoTDef, error) {
	next := slices.Clone(cur)
	var errs []error
	for _, d := range deletes {
		if d.Name == "" {
			next = slices.DeleteFunc(next, func(x LoTDef) bool { return x.Kind == d.Kind })
			continue
		}
		i := slices.IndexFunc(next, func(x LoTDef) bool { return x.Kind == d.Kind && x.Name == d.Name })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%w: %s %q", ErrLoTNotFound, d.Kind, d.Name))
			continue
		}
		next = slices.Delete(next, i, i+1)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, p := range puts {
		if i := slices.IndexFunc(next, func(x LoTDef) bool { return x.Kind == p.Kind && x.Name == p.Name }); i >= 0 {
			next[i] = p
		} else {
			next = append(next, p)
		}
	}
	sortDefs(next)
	return next, nil
}

func sortDefs(defs []LoTDef) {
	slices.SortFunc(defs, func(a, b LoTDef) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
}
