package auth

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"gantry/broker"
	"gantry/broker/packet"
)

func TestMain(m *testing.M) {
	bcryptCost = bcrypt.MinCost
	os.Exit(m.Run())
}

func TestStoreLifecycle(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("alice", "wonder", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("alice", "x", false); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second add: %v, want ErrUserExists", err)
	}
	if _, err := s.Verify("alice", []byte("wonder")); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := s.Verify("alice", []byte("wrong")); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := s.Verify("bob", []byte("x")); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("unknown user: %v", err)
	}
	if err := s.SetPassword("alice", "rabbit"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify("alice", []byte("wonder")); err == nil {
		t.Fatal("old password still accepted")
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if err := s.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("alice"); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("second remove: %v", err)
	}
}

func TestStoreSeesChangesOfAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	running, _ := Open(dir)
	cli, _ := Open(dir) // the gantry command, as a second handle on the file
	if err := cli.Add("bob", "builder", false); err != nil {
		t.Fatal(err)
	}
	if _, err := running.Verify("bob", []byte("builder")); err != nil {
		t.Fatalf("running store does not see the added user: %v", err)
	}
	if err := cli.SetPassword("bob", "b2"); err != nil {
		t.Fatal(err)
	}
	if _, err := running.Verify("bob", []byte("b2")); err != nil {
		t.Fatalf("running store does not see the new password: %v", err)
	}
}

func TestInvalidInput(t *testing.T) {
	s, _ := Open(t.TempDir())
	for name, c := range map[string]struct {
		user, pass string
		want       error
	}{
		"empty name":     {"", "x", ErrInvalidName},
		"space in name":  {"a b", "x", ErrInvalidName},
		"control char":   {"a\x01", "x", ErrInvalidName},
		"empty password": {"carol", "", ErrEmptyPasswd},
	} {
		if err := s.Add(c.user, c.pass, false); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestCorruptFileNamesIt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o600)
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Fatalf("corrupt file: %v, want an error naming the file", err)
	}
}

func TestEnsureRootOnce(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	path, err := EnsureRoot(s, dir)
	if err != nil || path == "" {
		t.Fatalf("EnsureRoot: %q %v", path, err)
	}
	data, _ := os.ReadFile(path)
	password := string(data[:len(data)-1])
	if len(password) < 16 {
		t.Fatalf("password %q too short", password)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("password file mode %v, want 0600", st.Mode().Perm())
	}
	u, err := s.Verify("root", []byte(password))
	if err != nil || !u.Admin {
		t.Fatalf("root: %+v %v", u, err)
	}
	again, err := EnsureRoot(s, dir)
	if err != nil || again != "" {
		t.Fatalf("second EnsureRoot: %q %v, want nothing done", again, err)
	}
}

func TestAuthenticatorThrottles(t *testing.T) {
	s, _ := Open(t.TempDir())
	s.Add("dave", "secret", false)
	th := NewThrottle()
	a := NewAuthenticator(s, th, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.FailureDelay = 0
	attacker := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5555}
	other := &net.TCPAddr{IP: net.ParseIP("10.9.9.9"), Port: 5555}
	try := func(addr net.Addr, pass string) error {
		return a.Authenticate(&broker.ConnInfo{Username: "dave", Password: []byte(pass), RemoteAddr: addr})
	}
	for i := 0; i < th.Burst; i++ {
		if err := try(attacker, "guess"); err != packet.BadUserNameOrPassword {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := try(attacker, "secret"); err != packet.ConnectionRateExceeded {
		t.Fatalf("throttled address with the right password: %v, want 0x9F", err)
	}
	if err := try(other, "secret"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if th.Throttled.Load() != 1 || a.Failures.Load() != uint64(th.Burst)+1 {
		t.Fatalf("throttled %d failures %d", th.Throttled.Load(), a.Failures.Load())
	}
	// The block ends.
	now := time.Now().Add(th.Block + time.Second)
	th.now = func() time.Time { return now }
	if err := try(attacker, "secret"); err != nil {
		t.Fatalf("after the block: %v", err)
	}
}

func TestAuthenticatorCacheFollowsPasswordChange(t *testing.T) {
	s, _ := Open(t.TempDir())
	s.Add("erin", "one", false)
	a := NewAuthenticator(s, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.FailureDelay = 0
	info := &broker.ConnInfo{Username: "erin", Password: []byte("one")}
	if err := a.Authenticate(info); err != nil {
		t.Fatal(err)
	}
	s.SetPassword("erin", "two")
	if err := a.Authenticate(info); err == nil {
		t.Fatal("cached old password accepted after a change")
	}
}

// TestEnsureRootWithoutAdministrator: a store with users but no
// administrator (the seed's quick start adds its cluster user before the
// first start) still gets root; an ordinary user called root is made an
// administrator with its own password; an administrator present means
// nothing is done.
func TestEnsureRootWithoutAdministrator(t *testing.T) {
	t.Run("ordinary users only", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := Open(dir)
		s.Add("cluster", "a-strong-password", false)
		path, err := EnsureRoot(s, dir)
		if err != nil || path == "" {
			t.Fatalf("EnsureRoot: %q %v, want root created", path, err)
		}
		if u, ok := s.Lookup("root"); !ok || !u.Admin || s.Admins() != 1 {
			t.Fatalf("root: %+v %v, admins %d", u, ok, s.Admins())
		}
		if InitialRootPending(dir) != path {
			t.Fatalf("InitialRootPending = %q, want %q", InitialRootPending(dir), path)
		}
	})
	t.Run("ordinary root", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := Open(dir)
		s.Add("root", "chosen", false)
		path, err := EnsureRoot(s, dir)
		if err != nil || path != "" {
			t.Fatalf("EnsureRoot: %q %v, want root promoted and no file", path, err)
		}
		if u, err := s.Verify("root", []byte("chosen")); err != nil || !u.Admin {
			t.Fatalf("root: %+v %v, want an administrator with its own password", u, err)
		}
		if InitialRootPending(dir) != "" {
			t.Fatal("a password file was written for a root that has its own password")
		}
	})
	t.Run("administrator present", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := Open(dir)
		s.Add("ops", "pw", true)
		if path, err := EnsureRoot(s, dir); err != nil || path != "" {
			t.Fatalf("EnsureRoot: %q %v, want nothing done", path, err)
		}
		if _, ok := s.Lookup("root"); ok {
			t.Fatal("root created beside an administrator")
		}
	})
}

func TestLastAdministratorStays(t *testing.T) {
	s, _ := Open(t.TempDir())
	s.Add("root", "a", true)
	s.Add("dave", "b", false)
	if err := s.Remove("root"); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("removing the last administrator: %v, want ErrLastAdmin", err)
	}
	s.Add("ops", "c", true)
	if err := s.Remove("root"); err != nil {
		t.Fatalf("removing one of two administrators: %v", err)
	}
	if err := s.Remove("dave"); err != nil {
		t.Fatalf("removing an ordinary user: %v", err)
	}
}

func TestFlagsAndGroups(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	s.Add("op", "pw", false)
	if err := s.SetFlag("op", "allowedsystemconfiguration", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlag("op", "AllowedEverything", true); !errors.Is(err, ErrUnknownFlag) {
		t.Fatalf("unknown flag: %v", err)
	}
	if err := s.SetFlag("nobody", "AllowedLogManagement", true); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("unknown user: %v", err)
	}
	s.AddToGroup("op", "operators")
	s.AddToGroup("op", "operators") // again: no duplicate
	s.AddToGroup("op", "night")
	if err := s.AddToGroup("op", "a b"); !errors.Is(err, ErrInvalidGroup) {
		t.Fatalf("group with a space: %v", err)
	}
	other, _ := Open(dir) // what another process reads
	u, _ := other.Lookup("op")
	if !u.HasFlag("AllowedSystemConfiguration") || strings.Join(u.Flags, ",") != "AllowedSystemConfiguration" ||
		strings.Join(u.Groups, ",") != "night,operators" {
		t.Fatalf("op: flags %v groups %v", u.Flags, u.Groups)
	}
	if err := s.RemoveFromGroup("op", "day"); !errors.Is(err, ErrNotInGroup) {
		t.Fatalf("not a member: %v", err)
	}
	s.RemoveFromGroup("op", "night")
	s.SetFlag("op", "AllowedSystemConfiguration", false)
	if err := s.SetPassword("op", "pw2"); err != nil { // other changes keep flags and groups
		t.Fatal(err)
	}
	u, _ = s.Lookup("op")
	if len(u.Flags) != 0 || strings.Join(u.Groups, ",") != "operators" {
		t.Fatalf("op: flags %v groups %v", u.Flags, u.Groups)
	}
}

// TestAuthenticatorCacheFollowsFileWrittenInPlace: a users file replaced
// by one with the same inode number (written in place, or a new file
// that got the number of one freed before: ext4 reuses them) still
// empties the login cache. The cache used to be keyed on the inode: a
// user removed on another node of a cluster kept logging in there
// (TestClusterUsers, now and then).
func TestAuthenticatorCacheFollowsFileWrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	s.Add("erin", "one", false)
	s.Add("frank", "two", false)
	a := NewAuthenticator(s, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.FailureDelay = 0
	info := &broker.ConnInfo{Username: "erin", Password: []byte("one")}
	if err := a.Authenticate(info); err != nil {
		t.Fatal(err)
	}
	// erin removed, by another writer of the same file, in place.
	other, _ := Open(t.TempDir())
	other.Add("frank", "two", false)
	raw, err := os.ReadFile(other.path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(raw)
	f.Close()
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cached("erin"); ok {
		t.Fatal("the store did not reload the file: the test proves nothing")
	}
	if err := a.Authenticate(info); err == nil {
		t.Fatal("a removed user logged in from the cache")
	}
}
