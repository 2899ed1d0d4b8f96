package appliance

import (
	"context"
	"testing"

	"gantry/broker/auth"
	"gantry/lot/command"
)

// TestLoTUserCommandsProtectAdministrators: a user allowed to manage users
// by a rule cannot change or remove an administrator, and the last
// administrator cannot be removed.
func TestLoTUserCommandsProtectAdministrators(t *testing.T) {
	s, err := auth.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Add("root", "r00t", true)
	s.Add("bob", "b0b", false)
	s.Add("carol", "c4rol", false)
	u := lotUsers{s: s}
	ctx := context.Background()
	bob, root := command.Caller{User: "bob"}, command.Caller{User: "root"}
	if err := u.ChangePassword(ctx, bob, "root", "owned"); err == nil {
		t.Error("bob changed root's password")
	}
	if err := u.RemoveUser(ctx, bob, "root"); err == nil {
		t.Error("bob removed root")
	}
	if err := u.ChangePassword(ctx, bob, "carol", "new"); err != nil {
		t.Errorf("bob, allowed by the rules, could not change carol's password: %v", err)
	}
	if err := u.RemoveUser(ctx, root, "root"); err == nil {
		t.Error("the last administrator was removed")
	}
	if _, err := s.Verify("root", []byte("r00t")); err != nil {
		t.Errorf("root's password changed: %v", err)
	}
}
