package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// This file lets a cluster own the users: changes go through a Replicator
// instead of the file, and the cluster's committed set is written back
// into users.json with a ClusterMark (AdoptCluster).

// ClusterMark says which state of a cluster's user store users.json
// holds. Any change made on the file itself (the gantry command while the
// node is stopped) writes the file without it.
type ClusterMark struct {
	Session string `json:"session,omitempty"` // the cluster's session (its life)
	Version uint64 `json:"version"`           // the version of the cluster's users
}

// Replicator commits changes of the users elsewhere than the file: it
// applies change to its own copy of the users, commits the result, and
// returns once users.json holds it (through AdoptCluster).
type Replicator interface {
	Replicate(change func(map[string]User) error) error
}

// SetReplicator makes every change of the store (Add, Remove, SetPassword,
// flags and groups) go through r; nil makes them local again.
func (s *Store) SetReplicator(r Replicator) {
	if r == nil {
		s.replicator.Store(nil)
		return
	}
	s.replicator.Store(&r)
}

func readUsersFile(path string) (usersFile, []byte, error) {
	var f usersFile
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil, nil
	}
	if err != nil {
		return f, nil, fmt.Errorf("auth: %w", err)
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, raw, fmt.Errorf("auth: %s is corrupt: %v", path, err)
	}
	return f, raw, nil
}

// Adopted says what AdoptCluster did.
type Adopted struct {
	Written bool     // users.json now holds the given users
	Differ  []string // the names the cluster's users add, remove or change
	// Backup is where the previous file was copied: it held users that
	// were not this cluster's (the node's own before it joined, or changes
	// made on the file while the node was stopped).
	Backup string
}

// AdoptCluster makes users.json hold users, the cluster's set at mark,
// under the file lock. A file that holds an older version of the same
// cluster's users is replaced; one that holds a newer version is kept (a
// restarting node replays older states first); one that holds other users
// (no mark, or another cluster's session) is first copied to
// users.json.local-TIME in the same directory.
func (s *Store) AdoptCluster(users []User, mark ClusterMark, now time.Time) (Adopted, error) {
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return Adopted{}, err
	}
	a, err := s.adoptLocked(users, mark, now)
	unlock()
	if err != nil {
		return a, err
	}
	return a, s.reload()
}

func (s *Store) adoptLocked(users []User, mark ClusterMark, now time.Time) (Adopted, error) {
	old, raw, err := readUsersFile(s.path)
	if err != nil && raw == nil {
		return Adopted{}, err
	}
	om := old.Cluster
	ours := om != nil && (om.Session == "" || mark.Session == "" || om.Session == mark.Session)
	if ours && om.Version > mark.Version {
		return Adopted{}, nil
	}
	differ := diffUsers(old.Users, users)
	if ours && len(differ) == 0 && *om == mark {
		return Adopted{}, nil
	}
	var a Adopted
	if raw != nil && !ours && (len(differ) > 0 || err != nil) {
		a.Backup = s.path + ".local-" + now.UTC().Format("20060102T150405.000Z")
		if err := writeFileAtomic(a.Backup, raw, 0o600); err != nil {
			return Adopted{}, err
		}
	}
	f := usersFile{Version: 1, Users: slices.Clone(users), Cluster: &mark}
	sort.Slice(f.Users, func(i, j int) bool { return f.Users[i].Name < f.Users[j].Name })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return Adopted{}, err
	}
	if err := writeFileAtomic(s.path, append(data, '\n'), 0o600); err != nil {
		return Adopted{}, err
	}
	a.Written, a.Differ = true, differ
	return a, nil
}

// diffUsers returns the names that are in one list and not the other, or
// in both with another hash, administrator flag, flags or groups; sorted.
func diffUsers(a, b []User) []string {
	byName := map[string]User{}
	for _, u := range a {
		byName[u.Name] = u
	}
	var out []string
	for _, u := range b {
		o, ok := byName[u.Name]
		delete(byName, u.Name)
		if !ok || o.Hash != u.Hash || o.Admin != u.Admin || !slices.Equal(o.Flags, u.Flags) || !slices.Equal(o.Groups, u.Groups) {
			out = append(out, u.Name)
		}
	}
	for name := range byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// DropStaleInitialRoot removes dir's initial-root-password file when its
// password no longer logs root in with users (the cluster's root replaced
// this node's), and returns its path then; otherwise "".
func DropStaleInitialRoot(dir string, users []User) (string, error) {
	path := filepath.Join(dir, InitialRootFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil
	}
	password := strings.TrimSpace(string(data))
	for _, u := range users {
		if u.Name == RootName && bcrypt.CompareHashAndPassword([]byte(u.Hash), []byte(password)) == nil {
			return "", nil
		}
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return path, nil
}

// Marked returns, from one reading of users.json, its cluster mark (nil
// when it holds no cluster's users) and its users.
func (s *Store) Marked() (*ClusterMark, map[string]User, error) {
	f, _, err := readUsersFile(s.path)
	if err != nil {
		return nil, nil, err
	}
	users := make(map[string]User, len(f.Users))
	for _, u := range f.Users {
		users[u.Name] = u
	}
	return f.Cluster, users, nil
}
