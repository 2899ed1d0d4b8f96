package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/crypto/bcrypt"
)

// Errors of the user store.
var (
	ErrUnknownUser = errors.New("auth: unknown user")
	ErrUserExists  = errors.New("auth: user exists")
	ErrBadPassword = errors.New("auth: bad password")
	ErrInvalidName = errors.New("auth: invalid user name")
	ErrEmptyPasswd = errors.New("auth: empty password")
	ErrLastAdmin   = errors.New("auth: the last administrator cannot be removed")
	errFileVersion = errors.New("auth: users file has an unknown version")
)

// FileName is the users file inside the data directory.
const FileName = "users.json"

// bcryptCost balances login time on an armv7 gateway (~0.3 s) against
// brute force.
var bcryptCost = 10 // lowered by tests

// User is one account. Flags and Groups are shared with the store: read
// them, never modify them.
type User struct {
	Name  string `json:"name"`
	Hash  string `json:"hash"`
	Admin bool   `json:"admin,omitempty"`
	// Flags are the permission flags set to true, in the spelling of
	// KnownFlags, sorted.
	Flags []string `json:"flags,omitempty"`
	// Groups are the groups the user belongs to, sorted.
	Groups []string `json:"groups,omitempty"`
}

type usersFile struct {
	Version int          `json:"version"`
	Users   []User       `json:"users"`
	Cluster *ClusterMark `json:"cluster,omitempty"` // written by AdoptCluster only (replica.go)
}

// Store is the set of users, backed by DataDir/users.json.
type Store struct {
	path string

	mu      sync.RWMutex // guards users, modTime, size, inode, gen
	users   map[string]User
	modTime time.Time
	size    int64
	inode   uint64
	// gen counts the contents loaded: what the login cache is valid for (an
	// inode alone is not: a file written in its place, or a new one that
	// gets a freed inode's number, keeps it)
	gen uint64

	// statted is when the file was last looked at (Unix ns): Lookup, which
	// access checks call on every publish, looks at most every
	// lookupStatEvery; Verify (a login) always looks.
	statted atomic.Int64

	replicator atomic.Pointer[Replicator] // nil: changes are made on the file (replica.go)
}

// lookupStatEvery bounds how stale Lookup may be about a change made by
// another process (the gantry command).
const lookupStatEvery = time.Second

// Open loads the users file in dir, creating dir if needed. A missing file
// is an empty store; an unreadable or corrupt one is an error naming it.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	s := &Store{path: filepath.Join(dir, FileName), users: map[string]User{}}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the users file.
func (s *Store) Path() string { return s.path }

// reload re-reads the file when its size or modification time changed.
func (s *Store) reload() error {
	s.statted.Store(time.Now().UnixNano())
	st, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.mu.Lock()
		s.users, s.modTime, s.size, s.inode = map[string]User{}, time.Time{}, 0, 0
		s.gen++
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	ino := inodeOf(st)
	s.mu.RLock()
	same := st.ModTime().Equal(s.modTime) && st.Size() == s.size && ino == s.inode
	s.mu.RUnlock()
	if same {
		return nil
	}
	users, err := readUsers(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.users, s.modTime, s.size, s.inode = users, st.ModTime(), st.Size(), ino
	s.gen++
	s.mu.Unlock()
	return nil
}

func readUsers(path string) (map[string]User, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	var f usersFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("auth: %s is corrupt (%v): restore it from a backup, or remove it to start with a new root user", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%w: %s has version %d, want 1", errFileVersion, path, f.Version)
	}
	users := make(map[string]User, len(f.Users))
	for _, u := range f.Users {
		users[u.Name] = u
	}
	return users, nil
}

// Lookup returns the user called name. A change made by another process
// is seen within lookupStatEvery (a login through Verify sees it at once).
func (s *Store) Lookup(name string) (User, bool) {
	if now := time.Now().UnixNano(); now-s.statted.Load() >= int64(lookupStatEvery) {
		s.reload()
	}
	return s.cached(name)
}

func (s *Store) cached(name string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return u, ok
}

// Len returns the number of users.
func (s *Store) Len() int {
	s.reload()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users)
}

// Names returns the user names in order.
func (s *Store) Names() []string {
	s.reload()
	s.mu.RLock()
	names := make([]string, 0, len(s.users))
	for n := range s.users {
		names = append(names, n)
	}
	s.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Verify checks name's password, against the file as it is now.
func (s *Store) Verify(name string, password []byte) (User, error) {
	s.reload()
	u, ok := s.cached(name)
	if !ok {
		// Spend the same time as for a known user, so that timing does
		// not tell which names exist.
		bcrypt.CompareHashAndPassword(dummyHash(), password)
		return User{}, ErrUnknownUser
	}
	if bcrypt.CompareHashAndPassword([]byte(u.Hash), password) != nil {
		return User{}, ErrBadPassword
	}
	return u, nil
}

// dummyHash is a hash of the production cost, made on first use.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("gantry-timing-equaliser"), 10)
	return h
})

// ValidName reports whether name can be a user name: 1..128 printable
// characters without spaces.
func ValidName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("%w: %q: want 1..128 characters", ErrInvalidName, name)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q: no spaces or control characters", ErrInvalidName, name)
		}
	}
	return nil
}

// Add creates a user.
func (s *Store) Add(name, password string, admin bool) error {
	if err := ValidName(name); err != nil {
		return err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return err
	}
	return s.change(func(users map[string]User) error {
		if _, ok := users[name]; ok {
			return fmt.Errorf("%w: %s", ErrUserExists, name)
		}
		users[name] = User{Name: name, Hash: hash, Admin: admin}
		return nil
	})
}

// Admins returns how many users are administrators.
func (s *Store) Admins() int {
	s.reload()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return countAdmins(s.users)
}

func countAdmins(users map[string]User) int {
	n := 0
	for _, u := range users {
		if u.Admin {
			n++
		}
	}
	return n
}

// addFirstAdmin, under the file lock, does nothing when an administrator
// exists; otherwise it creates name as an administrator with password
// (created true) or, when name exists as an ordinary user, makes it an
// administrator with its own password (created false).
func (s *Store) addFirstAdmin(name, password string) (created bool, err error) {
	hash, err := hashPassword(password)
	if err != nil {
		return false, err
	}
	err = s.change(func(users map[string]User) error {
		if countAdmins(users) > 0 {
			return nil
		}
		if u, ok := users[name]; ok {
			u.Admin = true
			users[name] = u
			return nil
		}
		users[name] = User{Name: name, Hash: hash, Admin: true}
		created = true
		return nil
	})
	return created, err
}

// Remove deletes a user; the last administrator stays (ErrLastAdmin).
func (s *Store) Remove(name string) error {
	return s.change(func(users map[string]User) error {
		u, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownUser, name)
		}
		if u.Admin && countAdmins(users) == 1 {
			return fmt.Errorf("%w: %s: add another administrator first", ErrLastAdmin, name)
		}
		delete(users, name)
		return nil
	})
}

// SetPassword changes a user's password.
func (s *Store) SetPassword(name, password string) error {
	hash, err := hashPassword(password)
	if err != nil {
		return err
	}
	return s.change(func(users map[string]User) error {
		u, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownUser, name)
		}
		u.Hash = hash
		users[name] = u
		return nil
	})
}

func hashPassword(password string) (string, error) {
	if password == "" {
		return "", ErrEmptyPasswd
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcryptCost)
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return string(h), nil
}

// change applies f to the users under the file lock and writes the file.
func (s *Store) change(f func(map[string]User) error) error {
	if r := s.replicator.Load(); r != nil {
		if err := (*r).Replicate(f); err != nil {
			return err
		}
		return s.reload()
	}
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	users := map[string]User{}
	if _, err := os.Stat(s.path); err == nil {
		if users, err = readUsers(s.path); err != nil {
			return err
		}
	}
	if err := f(users); err != nil {
		return err
	}
	if err := writeUsers(s.path, users); err != nil {
		return err
	}
	return s.reload()
}

func writeUsers(path string, users map[string]User) error {
	f := usersFile{Version: 1, Users: make([]User, 0, len(users))}
	for _, u := range users {
		f.Users = append(f.Users, u)
	}
	sort.Slice(f.Users, func(i, j int) bool { return f.Users[i].Name < f.Users[j].Name })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'), 0o600)
}

// writeFileAtomic writes data to a temporary file, fsyncs it and renames
// it over path, then fsyncs the directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err == nil {
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			return fmt.Errorf("auth: writing %s: %w", path, err)
		}
	} else {
		tmp.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("auth: locking %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// inodeOf returns the file's inode: a rename puts a new one in place even
// when size and modification time look unchanged.
func inodeOf(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ino
	}
	return 0
}
