package webui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// draftsFile keeps the editor's drafts under the data directory, so that a
// draft survives a reload of the page and a restart of the node.
const draftsFile = "console-drafts.json"

// maxDrafts bounds the drafts of one user.
const maxDrafts = 100

// draft is unsaved LoT source of one user, for one definition ("" name:
// a new one).
type draft struct {
	Source string    `json:"source"`
	Saved  time.Time `json:"saved"`
}

type drafts struct {
	path string     // "" in memory only
	mu   sync.Mutex // guards m and the file
	m    map[string]map[string]draft
}

func newDrafts(dataDir string) *drafts {
	d := &drafts{m: map[string]map[string]draft{}}
	if dataDir != "" {
		d.path = filepath.Join(dataDir, draftsFile)
		if b, err := os.ReadFile(d.path); err == nil {
			json.Unmarshal(b, &d.m) // a damaged file loses the drafts, nothing else
			if d.m == nil {
				d.m = map[string]map[string]draft{}
			}
		}
	}
	return d
}

func draftKey(kind, name string) string { return kind + "/" + name }

func (d *drafts) get(user, key string) (draft, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dr, ok := d.m[user][key]
	return dr, ok
}

func (d *drafts) put(user, key, src string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.m[user]
	if u == nil {
		u = map[string]draft{}
		d.m[user] = u
	}
	if _, ok := u[key]; !ok && len(u) >= maxDrafts {
		return errTooManyDrafts
	}
	u[key] = draft{Source: src, Saved: time.Now().UTC()}
	return d.saveLocked()
}

func (d *drafts) drop(user string, keys ...string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		delete(d.m[user], k)
	}
	return d.saveLocked()
}

func (d *drafts) saveLocked() error {
	if d.path == "" {
		return nil
	}
	b, err := json.Marshal(d.m)
	if err != nil {
		return err
	}
	tmp := d.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.path)
}
