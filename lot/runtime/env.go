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
	path string
	mu   sync.RWMutex // guards vals
	vals envValues
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

// Env implements interp.EnvReader: a value set with -setEnv, else the
// process environment.
func (s *envStore) Env(name string) (string, bool) {
	s.mu.RLock()
	v, ok := s.vals.Env[name]
	s.mu.RUnlock()
	if ok {
		return v, true
	}
	return os.LookupEnv(name)
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

func (s *envStore) update(f func(*envValues)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.vals)
	if s.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(s.vals, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}
