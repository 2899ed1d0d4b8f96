package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// envStore holds the values of GET ENV and GET SECRET, set by -setEnv and
// -setSecret (and KEEP ENV|SECRET in actions). With a file, they survive a
// restart; the file is written atomically with mode 0600 (it holds secrets).
type envStore struct {
	path    string
	mu      sync.RWMutex // guards vals; never held during file I/O
	vals    envValues
	writeMu sync.Mutex // serialises writes of the file; taken before mu
}

type envValues struct {
	Env     map[string]string `json:"env"`
	Secrets map[string]string `json:"secrets"`
}

func openEnv(path string) (*envStore, error) {
	s := &envStore{path: path, vals: envValues{Env: map[string]string{}, Secrets: map[string]string{}}}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if err := json.Unmarshal(data, &s.vals); err != nil {
		return nil, fmt.Errorf("runtime: %s: %w (fix or remove the file; it holds the values of -setEnv and -setSecret)", path, err)
	}
	if s.vals.Env == nil {
		s.vals.Env = map[string]string{}
	}
	if s.vals.Secrets == nil {
		s.vals.Secrets = map[string]string{}
	}
	return s, nil
}

// Env implements interp.EnvReader: a value set with -setEnv. The process
// environment is not read: it holds the node's own settings (the cluster's
// SharedSecret among them), which anyone allowed to deploy an action could
// otherwise publish.
func (s *envStore) Env(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.vals.Env[name]
	return v, ok
}

// Secret implements interp.EnvReader.
func (s *envStore) Secret(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.vals.Secrets[name]
	return v, ok
}

// SetEnv implements interp.EnvWriter.
func (s *envStore) SetEnv(name, value string, secret bool) error {
	return s.update(func(v *envValues) {
		if secret {
			v.Secrets[name] = value
		} else {
			v.Env[name] = value
		}
	})
}

// DeleteEnv implements interp.EnvWriter.
func (s *envStore) DeleteEnv(name string, secret bool) error {
	return s.update(func(v *envValues) {
		if secret {
			delete(v.Secrets, name)
		} else {
			delete(v.Env, name)
		}
	})
}

// update changes the values, then writes the file (outside mu, so that
// GET ENV never waits for the disk). Each write takes the values as they
// are then, so the file ends with the latest whatever the order of
// concurrent updates.
func (s *envStore) update(f func(*envValues)) error {
	s.mu.Lock()
	f(&s.vals)
	s.mu.Unlock()
	if s.path == "" {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	data, err := json.MarshalIndent(s.vals, "", "  ")
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	return writeFileAtomic(s.path, data)
}

// writeFileAtomic replaces path with data, mode 0600: a temporary file,
// synced, then renamed, so that a crash leaves the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("runtime: %w", err)
	}
	return nil
}
