package webui

import (
	"bytes"
	"encoding/json"

	"slices"
	"strings"
	"unicode"
)

// The health page shows what it knows of GET /cluster in its own tiles
// and tables (clusterPart); every other field GET /cluster serves (the
// data plane's links, replication figures, server connectors'
// listeners, and whatever a later build adds) is shown as it comes:
// numbers and words as tiles, lists of records as tables.

// shownKeys are the GET /cluster fields clusterPart renders itself.
var shownKeys = []string{"enabled", "nodeName", "clusterId", "role", "leadership", "membersTotal", "membersAlive",
	"members", "partitions", "partitionsOwned", "raft", "leaderChanges", "problems"}

// extraSection is one more top-level field of GET /cluster.
type extraSection struct {
	Key, Title string
	Tiles      []extraTile
	Tables     []extraTable
}

type extraTile struct{ Label, Value string }

type extraTable struct {
	Title string
	Cols  []string
	Rows  [][]string
}

// clusterExtras reads GET /cluster's body and returns the fields the page
// does not show otherwise, in the order they come.
func clusterExtras(body []byte) []extraSection {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []extraSection
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return out
		}
		if slices.Contains(shownKeys, key) {
			continue
		}
		sec := extraSection{Key: key, Title: humanize(key)}
		sec.add(nil, v)
		if len(sec.Tiles) == 0 && len(sec.Tables) == 0 {
			sec.Tiles = append(sec.Tiles, extraTile{Label: sec.Title, Value: "none"})
		}
		out = append(out, sec)
	}
	return out
}

// add puts v, found at path within the section, into tiles or tables.
func (s *extraSection) add(path []string, v any) {
	label := strings.Join(path, " · ")
	if label == "" {
		label = s.Title
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s.add(append(slices.Clone(path), humanize(k)), x[k])
		}
	case []any:
		if len(x) == 0 {
			s.Tiles = append(s.Tiles, extraTile{label, "none"})
			return
		}
		if t, ok := recordTable(label, x); ok {
			s.Tables = append(s.Tables, t)
			return
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalarText(e)
		}
		s.Tiles = append(s.Tiles, extraTile{label, strings.Join(parts, ", ")})
	default:
		s.Tiles = append(s.Tiles, extraTile{label, scalarText(x)})
	}
}

// recordTable makes a table of a list of objects, one column per field
// (the union over the records, in first-seen order).
func recordTable(title string, list []any) (extraTable, bool) {
	t := extraTable{Title: title}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return extraTable{}, false
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(t.Cols, k) {
				t.Cols = append(t.Cols, k)
			}
		}
	}
	// The record's name first, when it has one.
	for _, first := range []string{"name", "connector", "partition"} {
		if i := slices.Index(t.Cols, first); i > 0 {
			t.Cols = append([]string{first}, slices.Delete(t.Cols, i, i+1)...)
			break
		}
	}
	for _, e := range list {
		m := e.(map[string]any)
		row := make([]string, len(t.Cols))
		for i, k := range t.Cols {
			if v, ok := m[k]; ok {
				row[i] = scalarText(v)
			}
		}
		t.Rows = append(t.Rows, row)
	}
	for i, k := range t.Cols {
		t.Cols[i] = humanize(k)
	}
	return t, true
}

// scalarText writes a JSON value for a person: nested values compactly.
func scalarText(v any) string {
	switch x := v.(type) {
	case nil:
		return "—"
	case string:
		return orDash(x)
	case bool:
		return yesNo(x)
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// humanize turns a JSON field name into words: "forwardDropped" →
// "Forward dropped".
func humanize(key string) string {
	var b strings.Builder
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case i == 0:
			b.WriteRune(unicode.ToUpper(r))
		case unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])):
			b.WriteRune(' ')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
