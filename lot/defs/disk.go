package defs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// On-disk layout under the store's directory:
//
//	CURRENT                           names the live generation: "gen-00000000000000000042\n"
//	gen-00000000000000000042/MANIFEST JSON: version and, per file, kind, name, size, sha256
//	gen-00000000000000000042/<kind>/<name>.lot
//
// A change writes a whole new generation (unchanged files are hard links
// to the previous one), fsyncs it, renames gen-N.tmp to gen-N and then
// replaces CURRENT by rename: a crash leaves CURRENT naming either the old
// or the new generation, complete either way.
const (
	currentFile  = "CURRENT"
	manifestFile = "MANIFEST"
	genPrefix    = "gen-"
	tmpSuffix    = ".tmp"
	fileExt      = ".lot"
)

type manifest struct {
	Version uint64          `json:"version"`
	Files   []manifestEntry `json:"files"`
}

type manifestEntry struct {
	Kind   Kind   `json:"kind"`
	Name   string `json:"name"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
	// Version is the version of the change that last wrote the definition.
	Version uint64 `json:"version"`
}

func genName(version uint64) string { return fmt.Sprintf("%s%020d", genPrefix, version) }

// parseGen returns the version of a generation directory name.
func parseGen(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, genPrefix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return v, err == nil
}

func defPath(gen string, k Kind, name string) string {
	return filepath.Join(gen, string(k), name+fileExt)
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// writeGeneration writes defs as generation version under dir and makes it
// current. prev is the current generation's directory ("" for none): files
// whose definition did not change are linked from it.
func writeGeneration(dir, prev string, version uint64, defs []Definition, old map[key]Definition) (string, error) {
	final := filepath.Join(dir, genName(version))
	tmp := final + tmpSuffix
	for _, p := range []string{tmp, final} { // leftovers of a failed attempt
		if err := os.RemoveAll(p); err != nil {
			return "", fmt.Errorf("defs: remove leftover %s: %w", p, err)
		}
	}
	err := fillGeneration(tmp, prev, version, defs, old)
	if err == nil {
		err = hook(beforeRename)
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err == nil {
		err = hook(beforeCurrent)
	}
	if err == nil {
		err = writeFileAtomic(dir, currentFile, []byte(genName(version)+"\n"))
	}
	if err != nil {
		os.RemoveAll(tmp)
		os.RemoveAll(final)
		return "", err
	}
	return final, nil
}

// Points where tests inject failures (testHook).
const (
	beforeRename  = "before-rename"  // the new generation is written, not yet renamed
	beforeCurrent = "before-current" // renamed, CURRENT not yet replaced
)

// testHook, when set by a test, is called at the points above; an error
// makes the write fail there.
var testHook func(point string) error

func hook(point string) error {
	if testHook == nil {
		return nil
	}
	return testHook(point)
}

func fillGeneration(tmp, prev string, version uint64, defs []Definition, old map[key]Definition) error {
	m := manifest{Version: version, Files: make([]manifestEntry, 0, len(defs))}
	for _, k := range Kinds() {
		if err := os.MkdirAll(filepath.Join(tmp, string(k)), 0o755); err != nil {
			return fmt.Errorf("defs: %w", err)
		}
	}
	for _, d := range defs {
		path := defPath(tmp, d.Kind, d.Name)
		o, same := old[key{d.Kind, d.Name}]
		same = same && prev != "" && o.Version == d.Version
		if !same || os.Link(defPath(prev, d.Kind, d.Name), path) != nil {
			if err := writeFileSync(path, []byte(d.Source)); err != nil {
				return err
			}
		}
		m.Files = append(m.Files, manifestEntry{Kind: d.Kind, Name: d.Name, Size: len(d.Source), SHA256: sum(d.Source), Version: d.Version})
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("defs: manifest: %w", err)
	}
	if err := writeFileSync(filepath.Join(tmp, manifestFile), data); err != nil {
		return err
	}
	for _, k := range Kinds() {
		if err := syncDir(filepath.Join(tmp, string(k))); err != nil {
			return err
		}
	}
	return syncDir(tmp)
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("defs: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("defs: write %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data by writing a temporary file,
// syncing it, renaming it over name and syncing dir.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	if err := writeFileSync(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("defs: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("defs: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("defs: sync %s: %w", dir, err)
	}
	return nil
}

// loaded is what readStore found on disk.
type loaded struct {
	gen      string // directory of the live generation, "" for none
	version  uint64
	defs     map[key]Definition
	problems []error // files skipped or oddities, each naming its path
}

// readStore loads the live generation of dir. It fails only when the
// directory cannot be read at all; damaged files are skipped and reported.
func readStore(dir string, maxSource int) (loaded, error) {
	out := loaded{defs: map[key]Definition{}}
	gens, err := generations(dir)
	if err != nil {
		return out, err
	}
	cur, err := os.ReadFile(filepath.Join(dir, currentFile))
	version, ok := parseGen(strings.TrimSpace(string(cur)))
	switch {
	case errors.Is(err, fs.ErrNotExist) && len(gens) == 0:
		return out, nil // a new store
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return out, fmt.Errorf("defs: read %s: %w", filepath.Join(dir, currentFile), err)
	case err == nil && ok && slices.Contains(gens, version):
	default:
		if len(gens) == 0 {
			out.problems = append(out.problems, fmt.Errorf("defs: %s names %q, which does not exist; starting empty",
				filepath.Join(dir, currentFile), strings.TrimSpace(string(cur))))
			return out, nil
		}
		version = slices.Max(gens)
		out.problems = append(out.problems, fmt.Errorf("defs: %s is missing or invalid (%q); using the latest generation %s",
			filepath.Join(dir, currentFile), strings.TrimSpace(string(cur)), genName(version)))
	}
	out.version, out.gen = version, filepath.Join(dir, genName(version))
	out.problems = append(out.problems, readGeneration(out.gen, version, maxSource, out.defs)...)
	return out, nil
}

// generations lists the versions of the complete generation directories.
func generations(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("defs: read %s: %w", dir, err)
	}
	var out []uint64
	for _, e := range entries {
		if v, ok := parseGen(e.Name()); ok && e.IsDir() {
			out = append(out, v)
		}
	}
	return out, nil
}

// readGeneration loads gen's files into defs, checking them against the
// manifest when there is one.
func readGeneration(gen string, version uint64, maxSource int, defs map[key]Definition) []error {
	var problems []error
	want := map[key]manifestEntry{}
	data, err := os.ReadFile(filepath.Join(gen, manifestFile))
	var m manifest
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		problems = append(problems, fmt.Errorf("defs: manifest %s unreadable (%v); loading the files without checking them",
			filepath.Join(gen, manifestFile), err))
		want = nil
	}
	for _, e := range m.Files {
		if want != nil {
			want[key{e.Kind, e.Name}] = e
		}
	}
	for _, k := range Kinds() {
		problems = append(problems, readKind(gen, k, version, maxSource, want, defs)...)
	}
	for k := range want {
		if _, ok := defs[k]; !ok {
			problems = append(problems, fmt.Errorf("defs: %s is missing", defPath(gen, k.kind, k.name)))
		}
	}
	return problems
}

func readKind(gen string, k Kind, version uint64, maxSource int, want map[key]manifestEntry, defs map[key]Definition) []error {
	var problems []error
	entries, err := os.ReadDir(filepath.Join(gen, string(k)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return []error{fmt.Errorf("defs: read %s: %w", filepath.Join(gen, string(k)), err)}
	}
	for _, e := range entries {
		path := filepath.Join(gen, string(k), e.Name())
		name, ok := strings.CutSuffix(e.Name(), fileExt)
		if !ok || e.IsDir() || ValidateName(k, name) != nil {
			problems = append(problems, fmt.Errorf("defs: %s is not a definition file (<name>%s); ignored", path, fileExt))
			continue
		}
		d, err := readDefinition(path, k, name, version, maxSource, want)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		defs[key{k, name}] = d
	}
	return problems
}

func readDefinition(path string, k Kind, name string, version uint64, maxSource int, want map[key]manifestEntry) (Definition, error) {
	f, err := os.Open(path)
	if err != nil {
		return Definition{}, fmt.Errorf("defs: %w; skipped", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(maxSource)+1))
	if err != nil {
		return Definition{}, fmt.Errorf("defs: read %s: %w; skipped", path, err)
	}
	d := Definition{Kind: k, Name: name, Source: string(data), Version: version}
	if err := validateSource(Put{Kind: k, Name: name, Source: d.Source}, maxSource); err != nil {
		return Definition{}, fmt.Errorf("defs: %s: %v; skipped", path, err)
	}
	if want == nil {
		return d, nil
	}
	e, ok := want[key{k, name}]
	switch {
	case !ok:
		return Definition{}, fmt.Errorf("defs: %s is not in the manifest; skipped", path)
	case e.Size != len(data) || e.SHA256 != sum(d.Source):
		return Definition{}, fmt.Errorf("defs: %s is corrupt (%d bytes, checksum differs from the manifest); skipped", path, len(data))
	}
	d.Version = e.Version
	return d, nil
}

// removeOtherGenerations deletes every generation and temporary directory
// of dir but keep, returning what it could not delete.
func removeOtherGenerations(dir, keep string) []error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []error{fmt.Errorf("defs: read %s: %w", dir, err)}
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !strings.HasPrefix(e.Name(), genPrefix) || p == keep {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("defs: remove old generation: %w", err))
		}
	}
	return errs
}
