package partition

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"strings"
	"testing"
)

func TestForIsFNV1a(t *testing.T) {
	// Known FNV-1a 32 values (checked with an independent implementation):
	// the contract must not drift.
	golden := []struct {
		id    string
		count int
		want  int
	}{
		{"", 1 << 30, 0x811c9dc5 % (1 << 30)},
		{"a", 1 << 30, 0xe40c292c % (1 << 30)},
		{"foobar", 1 << 30, 0xbf9cf968 % (1 << 30)},
		{"sensor-17", 32, 26},
		{"plc/line-3", 4096, 3837},
		{"anything", 1, 0},
		{"anything", 0, 0},
		{"anything", -5, 0},
	}
	for _, g := range golden {
		if got := For(g.id, g.count); got != g.want {
			t.Errorf("For(%q, %d) = %d, want %d", g.id, g.count, got, g.want)
		}
	}
	for _, id := range []string{"", "x", "client-1", strings.Repeat("é", 100)} {
		h := fnv.New32a()
		h.Write([]byte(id))
		if got, want := For(id, 4096), int(h.Sum32()%4096); got != want {
			t.Errorf("For(%q, 4096) = %d, hash/fnv says %d", id, got, want)
		}
	}
}

func TestForSpreadsClients(t *testing.T) {
	const count, clients = 32, 32000
	hits := make([]int, count)
	for i := range clients {
		hits[For("client-"+itoa(i), count)]++
	}
	for p, n := range hits {
		if n < clients/count*8/10 || n > clients/count*12/10 {
			t.Errorf("partition %d got %d of %d clients, want about %d", p, n, clients, clients/count)
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func sampleMap() Map {
	return Map{Version: 9, Partitions: []Assignment{
		part(3, "a", "b", "c*"),
		part(9, "c", "a"),
		part(9, "", "b", "d"),
		{},
	}}
}

func TestBinaryRoundTrip(t *testing.T) {
	for _, m := range []Map{{}, sampleMap(), {Version: 1, Partitions: make([]Assignment, MaxCount)}} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil || !got.Equal(m) {
			t.Fatalf("Decode(MarshalBinary(m)) = %v, %v\nwant %s", got, err, dump(m))
		}
		var u Map
		if err := u.UnmarshalBinary(b); err != nil || !u.Equal(m) {
			t.Fatalf("UnmarshalBinary: %v", err)
		}
	}
	b, _ := sampleMap().MarshalBinary()
	t.Logf("sample map: %d bytes", len(b))
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := sampleMap().MarshalBinary()
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"unknown format", append([]byte{2}, good[1:]...), ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"trailing", append(good[:len(good):len(good)], 0), ErrCorrupt},
		{"huge name count", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, ErrCorrupt},
		{"names out of order", []byte{1, 0, 2, 1, 'b', 1, 'a', 0}, ErrCorrupt},
		{"empty name", []byte{1, 0, 1, 0, 0}, ErrCorrupt},
		{"name index beyond table", []byte{1, 1, 1, 1, 'a', 1, 1, 1, 1, 2}, ErrCorrupt},
		{"too many partitions", append([]byte{1, 0, 0, 0x81, 0x20}, make([]byte, 3*(MaxCount+1))...), ErrCorrupt},
		{"owner not first replica", []byte{1, 1, 2, 1, 'a', 1, 'b', 1, 1, 1, 2, 2, 0}, ErrInvalid},
		{"epoch above version", []byte{1, 1, 1, 1, 'a', 1, 2, 1, 1, 0}, ErrInvalid},
		{"owner syncing", []byte{1, 1, 1, 1, 'a', 1, 1, 1, 1, 1}, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.b)
			if !errors.Is(err, tc.want) || m.Count() != 0 {
				t.Fatalf("Decode = %v, %v; want %v", m, err, tc.want)
			}
			t.Log(err)
		})
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(sampleMap())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"version":9,"partitions":[` +
		`{"partition":0,"owner":"a","replicas":["a","b","c"],"syncing":["c"],"epoch":3},` +
		`{"partition":1,"owner":"c","replicas":["c","a"],"syncing":[],"epoch":9},` +
		`{"partition":2,"owner":"","replicas":["b","d"],"syncing":[],"epoch":9},` +
		`{"partition":3,"owner":"","replicas":[],"syncing":[],"epoch":0}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var m Map
	if err := json.Unmarshal(b, &m); err != nil || !m.Equal(sampleMap()) {
		t.Fatalf("round trip: %v\n%s", err, dump(m))
	}
	// As a field of a struct, by value and by pointer (the FSM's command
	// and state).
	type wrap struct {
		M  Map  `json:"m"`
		PM *Map `json:"pm"`
	}
	sm := sampleMap()
	b, _ = json.Marshal(wrap{M: sm, PM: &sm})
	var w wrap
	if err := json.Unmarshal(b, &w); err != nil || !w.M.Equal(sm) || !w.PM.Equal(sm) {
		t.Fatalf("in a struct: %v", err)
	}
	for _, bad := range []string{
		`{"version":1,"partitions":[{"partition":1,"owner":"","replicas":[],"syncing":[],"epoch":0}]}`,
		`{"version":1,"partitions":[],"extra":1}`,
		`{"version":1,"partitions":[{"partition":0,"owner":"a","replicas":["b"],"syncing":[],"epoch":0}]}`,
	} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

func TestAccessors(t *testing.T) {
	m := sampleMap()
	if m.Owner(0) != "a" || m.Owner(2) != "" || m.Owner(-1) != "" || m.Owner(4) != "" {
		t.Error("Owner")
	}
	r := m.Replicas(0)
	r[0] = "zz"
	if m.Partitions[0].Replicas[0] != "a" || m.Replicas(9) != nil {
		t.Error("Replicas must return a copy")
	}
	if got := m.OwnedBy("c"); len(got) != 1 || got[0] != 1 || m.OwnedBy("") != nil {
		t.Errorf("OwnedBy = %v", got)
	}
	if !m.CaughtUp(0, "b") || m.CaughtUp(0, "c") || m.CaughtUp(0, "z") || m.CaughtUp(7, "a") {
		t.Error("CaughtUp")
	}
	next, ok := m.MarkCaughtUp(0, "c")
	if !ok || next.Version != 10 || !next.CaughtUp(0, "c") || m.CaughtUp(0, "c") {
		t.Error("MarkCaughtUp must return a new map and leave m alone")
	}
	if again, ok := next.MarkCaughtUp(0, "c"); ok || again.Version != 10 {
		t.Error("a repeated report must change nothing")
	}
	f := m.Forget("a")
	want := Map{Version: 10, Partitions: []Assignment{part(10, "", "b"), part(9, "c"), part(9, "", "b", "d"), {}}}
	if !f.Equal(want) || m.Owner(0) != "a" {
		t.Errorf("Forget(a) =\n%swant\n%s", dump(f), dump(want))
	}
	if same := m.Forget("nobody"); same.Version != m.Version {
		t.Error("Forget of an unknown node must change nothing")
	}
}
