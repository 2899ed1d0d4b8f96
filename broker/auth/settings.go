package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors of permission flags and groups.
var (
	ErrUnknownFlag  = errors.New("auth: unknown permission flag")
	ErrInvalidGroup = errors.New("auth: invalid group name")
	ErrNotInGroup   = errors.New("auth: user is not in the group")
)

// KnownFlags are the permission flags a user can hold (LOT.md §6.3): the
// built-in access rules grant the command and management scopes by them.
var KnownFlags = []string{
	"AllowedSystemConfiguration",
	"AllowedUserManagement",
	"AllowedLogManagement",
	"AllowedAssetManipulation",
}

// CanonicalFlag returns the spelling of KnownFlags for flag, compared
// ignoring case.
func CanonicalFlag(flag string) (string, error) {
	for _, f := range KnownFlags {
		if strings.EqualFold(f, flag) {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: %q, want one of %s", ErrUnknownFlag, flag, strings.Join(KnownFlags, ", "))
}

// ValidGroup reports whether name can be a group name; groups follow the
// rules of user names.
func ValidGroup(name string) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%w: %q: want 1..128 printable characters without spaces", ErrInvalidGroup, name)
	}
	return nil
}

// HasFlag reports whether u holds flag (any case).
func (u User) HasFlag(flag string) bool {
	for _, f := range u.Flags {
		if strings.EqualFold(f, flag) {
			return true
		}
	}
	return false
}

// SetFlag sets or clears a permission flag of a user.
func (s *Store) SetFlag(name, flag string, on bool) error {
	f, err := CanonicalFlag(flag)
	if err != nil {
		return err
	}
	return s.update(name, func(u *User) error {
		u.Flags = setMember(u.Flags, f, on)
		return nil
	})
}

// AddToGroup puts a user in a group; groups exist by being named. Adding a
// member again is no error.
func (s *Store) AddToGroup(name, group string) error {
	if err := ValidGroup(group); err != nil {
		return err
	}
	return s.update(name, func(u *User) error {
		u.Groups = setMember(u.Groups, group, true)
		return nil
	})
}

// RemoveFromGroup takes a user out of a group (ErrNotInGroup when it was
// not a member).
func (s *Store) RemoveFromGroup(name, group string) error {
	return s.update(name, func(u *User) error {
		if !slices.Contains(u.Groups, group) {
			return fmt.Errorf("%w: %s is not in %s", ErrNotInGroup, name, group)
		}
		u.Groups = setMember(u.Groups, group, false)
		return nil
	})
}

// Users returns every user, sorted by name. The slices are shared: do not
// modify them.
func (s *Store) Users() []User {
	s.reload()
	s.mu.RLock()
	out := make([]User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// update changes one existing user under the file lock.
func (s *Store) update(name string, f func(*User) error) error {
	return s.change(func(users map[string]User) error {
		u, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownUser, name)
		}
		if err := f(&u); err != nil {
			return err
		}
		users[name] = u
		return nil
	})
}

// setMember returns list (sorted) with x in it or not, as a new slice.
func setMember(list []string, x string, in bool) []string {
	out := make([]string, 0, len(list)+1)
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	if in {
		out = append(out, x)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil
	}
	return out
}
