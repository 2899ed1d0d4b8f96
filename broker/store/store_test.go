package store_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/store"
)

// TestRoundTrip persists batches, reopens the file and compares Load with
// the expected state, for every op kind.
func TestRoundTrip(t *testing.T) {
	full := fullMessage("sensors/1/temp", `{"t":21.5}`)
	plain := plainMessage("plain", "")
	tests := []struct {
		name    string
		batches [][]broker.PersistOp
		want    broker.PersistedState
	}{
		{
			name:    "empty store",
			batches: nil,
			want:    broker.PersistedState{},
		},
		{
			name:    "session with subscriptions and will",
			batches: [][]broker.PersistOp{{putSession(sessionRecord("c1"))}},
			want:    broker.PersistedState{Sessions: []broker.PersistedSession{{SessionRecord: *sessionRecord("c1")}}},
		},
		{
			name: "session replaced",
			batches: [][]broker.PersistOp{
				{putSession(sessionRecord("c1"))},
				{putSession(&broker.SessionRecord{ClientID: "c1", Expiry: 0xFFFFFFFF})},
			},
			want: broker.PersistedState{Sessions: []broker.PersistedSession{{SessionRecord: broker.SessionRecord{ClientID: "c1", Expiry: 0xFFFFFFFF}}}},
		},
		{
			name: "entries with every message property, in seq order",
			batches: [][]broker.PersistOp{
				{putSession(&broker.SessionRecord{ClientID: "c1"})},
				{putEntry("c1", entryRecord(300, plain)), putEntry("c1", entryRecord(2, full))},
				{putEntry("c1", entryRecord(1<<40, full))},
			},
			want: oneSession("c1", []broker.EntryRecord{*entryRecord(2, full), *entryRecord(300, plain), *entryRecord(1<<40, full)}, nil),
		},
		{
			name: "entry state updated, missing entry ignored",
			batches: [][]broker.PersistOp{
				{putSession(&broker.SessionRecord{ClientID: "c1"}), putEntry("c1", entryRecord(5, full))},
				{entryState("c1", 5, broker.EntrySent, 77), entryState("c1", 6, broker.EntrySent, 78)},
				{entryState("c1", 5, broker.EntryReleased, 77)},
			},
			want: oneSession("c1", []broker.EntryRecord{withState(entryRecord(5, full), broker.EntryReleased, 77)}, nil),
		},
		{
			name: "entry deleted, missing entry delete is a no-op",
			batches: [][]broker.PersistOp{
				{putSession(&broker.SessionRecord{ClientID: "c1"}), putEntry("c1", entryRecord(1, full)), putEntry("c1", entryRecord(2, plain))},
				{delEntry("c1", 1), delEntry("c1", 99)},
			},
			want: oneSession("c1", []broker.EntryRecord{*entryRecord(2, plain)}, nil),
		},
		{
			name: "inbound qos2 ids",
			batches: [][]broker.PersistOp{
				{putSession(&broker.SessionRecord{ClientID: "c1"}), putQoS2("c1", 1), putQoS2("c1", 65535), putQoS2("c1", 256)},
				{delQoS2("c1", 1), delQoS2("c1", 2)},
			},
			want: oneSession("c1", nil, []uint16{256, 65535}),
		},
		{
			name: "retained put and delete",
			batches: [][]broker.PersistOp{
				{putRetained(full), putRetained(plain), putRetained(fullMessage("x/y", ""))},
				{delRetained("x/y"), delRetained("never/retained")},
			},
			want: broker.PersistedState{Retained: []*broker.Message{plain, full}},
		},
		{
			name: "session deleted with its queue",
			batches: [][]broker.PersistOp{
				{putSession(sessionRecord("c1")), putEntry("c1", entryRecord(1, full)), putQoS2("c1", 9)},
				{delSession("c1"), delSession("never-existed")},
			},
			want: broker.PersistedState{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, dbPath(t), store.Options{})
			for _, ops := range tt.batches {
				mustPersist(t, s, ops...)
			}
			_, got := reload(t, s)
			if err := diffState(got, &tt.want); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func oneSession(id string, entries []broker.EntryRecord, qos2 []uint16) broker.PersistedState {
	return broker.PersistedState{Sessions: []broker.PersistedSession{{
		SessionRecord: broker.SessionRecord{ClientID: id},
		Entries:       entries,
		InboundQoS2:   qos2,
	}}}
}

func withState(e *broker.EntryRecord, state uint8, pid uint16) broker.EntryRecord {
	c := *e
	c.State, c.PID = state, pid
	return c
}

// TestDeleteSessionKeepsOthers deletes "a" next to clients whose ids
// start with "a".
func TestDeleteSessionKeepsOthers(t *testing.T) {
	ids := []string{"a", "ab", "a\x01", "b"}
	s := openStore(t, dbPath(t), store.Options{})
	for _, id := range ids {
		mustPersist(t, s,
			putSession(&broker.SessionRecord{ClientID: id}),
			putEntry(id, entryRecord(1, plainMessage("t/"+id, id))),
			putEntry(id, entryRecord(2, plainMessage("t/"+id, id))),
			putQoS2(id, 10), putQoS2(id, 11))
	}
	mustPersist(t, s, delSession("a"))
	_, got := reload(t, s)
	var gotIDs []string
	for _, ps := range got.Sessions {
		gotIDs = append(gotIDs, ps.ClientID)
		if len(ps.Entries) != 2 || len(ps.InboundQoS2) != 2 {
			t.Errorf("session %q: %d entries, %d qos2 ids, want 2 and 2", ps.ClientID, len(ps.Entries), len(ps.InboundQoS2))
		}
	}
	if want := "a\x01,ab,b"; strings.Join(gotIDs, ",") != want {
		t.Fatalf("sessions %q, want %q", gotIDs, want)
	}
}

// TestOrdering checks that ops apply in submission order, within one
// transaction and across transactions.
func TestOrdering(t *testing.T) {
	m := plainMessage("r", "x")
	tests := []struct {
		name    string
		calls   [][]broker.PersistOp // Persist calls, submitted without waiting
		barrier bool                 // wait for each call before the next
		want    int                  // retained messages left
	}{
		{"put then delete in one call", [][]broker.PersistOp{{putRetained(m), delRetained("r")}}, false, 0},
		{"delete then put in one call", [][]broker.PersistOp{{delRetained("r"), putRetained(m)}}, false, 1},
		{"put then delete in two queued calls", [][]broker.PersistOp{{putRetained(m)}, {delRetained("r")}}, false, 0},
		{"delete then put in two queued calls", [][]broker.PersistOp{{delRetained("r")}, {putRetained(m)}}, false, 1},
		{"put then delete across commits", [][]broker.PersistOp{{putRetained(m)}, {delRetained("r")}}, true, 0},
		{"delete then put across commits", [][]broker.PersistOp{{putRetained(m)}, {delRetained("r")}, {putRetained(m)}}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, dbPath(t), store.Options{})
			done := make(chan error, len(tt.calls))
			for _, ops := range tt.calls {
				s.Persist(ops, func(err error) { done <- err })
				if tt.barrier {
					if err := wait(t, done); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range len(tt.calls) * boolInt(!tt.barrier) {
				if err := wait(t, done); err != nil {
					t.Fatal(err)
				}
			}
			_, got := reload(t, s)
			if len(got.Retained) != tt.want {
				t.Fatalf("%d retained messages, want %d", len(got.Retained), tt.want)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestInvalidOps checks that an op the store cannot write fails its own
// call only.
func TestInvalidOps(t *testing.T) {
	tests := []struct {
		name string
		op   broker.PersistOp
	}{
		{"unknown kind", broker.PersistOp{Kind: 99, ClientID: "c"}},
		{"zero kind", broker.PersistOp{ClientID: "c"}},
		{"empty client id", putQoS2("", 1)},
		{"client id with NUL", delSession("a\x00b")},
		{"session without record", broker.PersistOp{Kind: broker.PersistSession, ClientID: "c"}},
		{"session client id mismatch", broker.PersistOp{Kind: broker.PersistSession, ClientID: "c", Session: &broker.SessionRecord{ClientID: "d"}}},
		{"entry without record", broker.PersistOp{Kind: broker.PersistEntry, ClientID: "c", Seq: 1}},
		{"entry seq mismatch", broker.PersistOp{Kind: broker.PersistEntry, ClientID: "c", Seq: 1, Entry: entryRecord(2, plainMessage("t", ""))}},
		{"retained without message", broker.PersistOp{Kind: broker.PersistRetained, Topic: "t"}},
		{"retained empty topic", delRetained("")},
		{"retained topic too long", putRetained(plainMessage(strings.Repeat("t", 40000), ""))},
		{"client id too long", delEntry(strings.Repeat("c", 40000), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, dbPath(t), store.Options{})
			bad := make(chan error, 1)
			good := make(chan error, 1)
			s.Persist([]broker.PersistOp{putRetained(plainMessage("bad", "")), tt.op}, func(err error) { bad <- err })
			s.Persist([]broker.PersistOp{putRetained(plainMessage("good", ""))}, func(err error) { good <- err })
			if err := wait(t, bad); !errors.Is(err, store.ErrInvalidOp) {
				t.Fatalf("invalid call: done(%v), want ErrInvalidOp", err)
			}
			if err := wait(t, good); err != nil {
				t.Fatalf("valid call: done(%v)", err)
			}
			_, got := reload(t, s)
			if len(got.Retained) != 1 || got.Retained[0].Topic != "good" {
				t.Fatalf("retained %v, want only \"good\"", got.Retained)
			}
		})
	}
}

func TestPersistAfterClose(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := persist(t, s, putRetained(plainMessage("t", ""))); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("done(%v), want ErrClosed", err)
	}
	s.Persist([]broker.PersistOp{delRetained("t")}, nil) // nil done is allowed
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Load after Close: %v, want ErrClosed", err)
	}
}

// TestCloseCommitsPending queues calls without waiting and closes: every
// done must have been called, with nil, when Close returns.
func TestCloseCommitsPending(t *testing.T) {
	s := openStore(t, dbPath(t), store.Options{})
	const n = 500
	called := make([]int, n)
	for i := range n {
		s.Persist([]broker.PersistOp{putQoS2("c", uint16(i))}, func(err error) {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			called[i]++
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range called {
		if c != 1 {
			t.Fatalf("done of call %d called %d times", i, c)
		}
	}
}

func TestLastAlive(t *testing.T) {
	path := dbPath(t)
	s := openStore(t, path, store.Options{AliveInterval: time.Millisecond})
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.LastAlive != 0 {
		t.Fatalf("new store: LastAlive %d, want 0", st.LastAlive)
	}
	eventually(t, waitLimit, func() error {
		if n := s.Stats().AliveStamps; n < 3 {
			return errors.New("fewer than 3 idle stamps")
		}
		return nil
	})
	before := time.Now().UnixNano()
	_, st = reload(t, s)
	after := time.Now().UnixNano()
	if st.LastAlive < before || st.LastAlive > after {
		t.Fatalf("LastAlive %d, want within Close: [%d, %d]", st.LastAlive, before, after)
	}
}

// TestCloseLeavesNoGoroutine: Close ends the writer and the notifier.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := store.Open(dbPath(t), store.Options{AliveInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mustPersist(t, s, putQoS2("c", 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLimit, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines after Close, %d before Open", n, before)
		}
		return nil
	})
}
