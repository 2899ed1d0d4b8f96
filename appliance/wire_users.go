package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"gantry/broker"
	"gantry/broker/auth"
	"gantry/lot/command"
)

// This file joins the user store (broker/auth) to the LoT commands of
// permission flags and groups, and publishes $SYS/Coreflux/Config/Users.

// UsersTopic is the retained list of users, without password hashes.
const UsersTopic = "$SYS/Coreflux/Config/Users"

func (n *Node) lotUsers() lotUsers { return lotUsers{s: n.Users, changed: n.usersChanged} }

// usersChanged runs after a change through the commands: the list is
// published again, and subscriptions are decided again, since rules on
// USER HAS and USER IN GROUP may now answer otherwise.
func (n *Node) usersChanged() {
	n.publishUsers()
	n.Broker.ReauthorizeSubscriptions()
}

// done runs the change hook after a successful change.
func (u lotUsers) done(err error) error {
	if err == nil && u.changed != nil {
		u.changed()
	}
	return err
}

// SetUserFlag implements command.UserSettings. Only an administrator
// changes an administrator, and only an administrator or a holder of the
// flag grants it: a user allowed to update users must not give himself
// (or an accomplice) more than he has.
func (u lotUsers) SetUserFlag(_ context.Context, c command.Caller, name, flag string, on bool) error {
	f, err := auth.CanonicalFlag(flag)
	if err != nil {
		return err
	}
	if err := u.mayManage(c, name); err != nil {
		return err
	}
	if on {
		if me, ok := u.s.Lookup(c.User); !ok || !(me.Admin || me.HasFlag(f)) {
			return fmt.Errorf("only an administrator or a user who holds %s may grant it", f)
		}
	}
	return u.done(u.s.SetFlag(name, f, on))
}

// AddUserToGroup implements command.UserSettings.
func (u lotUsers) AddUserToGroup(_ context.Context, c command.Caller, name, group string) error {
	if err := u.mayManage(c, name); err != nil {
		return err
	}
	return u.done(u.s.AddToGroup(name, group))
}

// RemoveUserFromGroup implements command.UserSettings.
func (u lotUsers) RemoveUserFromGroup(_ context.Context, c command.Caller, name, group string) error {
	if err := u.mayManage(c, name); err != nil {
		return err
	}
	return u.done(u.s.RemoveFromGroup(name, group))
}

// UserGroups implements command.UserSettings.
func (u lotUsers) UserGroups(_ context.Context, _ command.Caller, name string) ([]string, error) {
	usr, ok := u.s.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", auth.ErrUnknownUser, name)
	}
	return usr.Groups, nil
}

var _ command.UserSettings = lotUsers{}

// usersTopic publishes UsersTopic when the list changed.
type usersTopic struct {
	mu   sync.Mutex // guards c, last
	c    *broker.Client
	last string
}

// userEntry is one user of UsersTopic.
type userEntry struct {
	Name   string   `json:"name"`
	Admin  bool     `json:"admin"`
	Flags  []string `json:"flags"`
	Groups []string `json:"groups"`
}

// UsersJSON is the payload of UsersTopic: every user with its
// administrator flag, permission flags and groups, never a password hash.
func UsersJSON(s *auth.Store) []byte {
	users := s.Users()
	out := make([]userEntry, 0, len(users))
	for _, u := range users {
		e := userEntry{Name: u.Name, Admin: u.Admin, Flags: u.Flags, Groups: u.Groups}
		if e.Flags == nil {
			e.Flags = []string{}
		}
		if e.Groups == nil {
			e.Groups = []string{}
		}
		out = append(out, e)
	}
	b, _ := json.Marshal(out)
	return b
}

// publishUsers publishes UsersTopic, retained, if it changed since the
// last time. It runs at start, after changes through the commands and on
// every $SYS interval (changes made with the gantry command).
func (n *Node) publishUsers() {
	t := &n.usersTopic
	payload := UsersJSON(n.Users)
	t.mu.Lock()
	defer t.mu.Unlock()
	if string(payload) == t.last {
		return
	}
	if t.c == nil {
		t.c = n.Broker.NewClient("$gantry-users", broker.OriginBroker, nil)
	}
	if err := t.c.Publish(UsersTopic, payload, 1, true); err != nil {
		n.log.Warn("cannot publish the user list", "component", "auth", "err", err)
		return
	}
	t.last = string(payload)
}
