package store_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/broker/store"
)

// waitLimit bounds every wait of these tests; reaching it is a failure.
const waitLimit = 10 * time.Second

func dbPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "gantry.db")
}

// openStore opens path and closes the store at the end of the test.
func openStore(t *testing.T, path string, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// persist calls Persist and waits for done.
func persist(t *testing.T, s *store.Store, ops ...broker.PersistOp) error {
	t.Helper()
	ch := make(chan error, 1)
	s.Persist(ops, func(err error) { ch <- err })
	return wait(t, ch)
}

func mustPersist(t *testing.T, s *store.Store, ops ...broker.PersistOp) {
	t.Helper()
	if err := persist(t, s, ops...); err != nil {
		t.Fatalf("Persist: %v", err)
	}
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no result within %v", waitLimit)
		panic("unreachable")
	}
}

// reload closes s, opens its file again and loads it.
func reload(t *testing.T, s *store.Store) (*store.Store, *broker.PersistedState) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2 := openStore(t, s.Path(), store.Options{})
	st, err := s2.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s2, st
}

// eventually polls cond until it returns nil or the limit passes.
func eventually(t *testing.T, limit time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", limit, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// fullMessage returns a message with every field set.
func fullMessage(topic string, payload string) *broker.Message {
	return &broker.Message{
		Topic:           topic,
		Payload:         bytesOrNil(payload),
		QoS:             2,
		Retain:          true,
		PayloadFormat:   1,
		ContentType:     "application/json",
		ResponseTopic:   "reply/" + topic,
		CorrelationData: []byte{0, 1, 2, 0xff},
		UserProperties:  []packet.UserProperty{{Key: "k", Value: "v"}, {Key: "k", Value: ""}, {Key: "", Value: "x"}},
		ExpiresAt:       time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(),
		Origin:          broker.OriginLoT,
		ClientID:        "publisher",
		Username:        "alice",
	}
}

func plainMessage(topic, payload string) *broker.Message {
	return &broker.Message{Topic: topic, Payload: bytesOrNil(payload), QoS: 1}
}

// bytesOrNil returns s as bytes, nil if empty: the store loads an empty
// payload as nil.
func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func sessionRecord(id string) *broker.SessionRecord {
	return &broker.SessionRecord{
		ClientID:       id,
		Expiry:         3600,
		DisconnectedAt: 1_700_000_000_000_000_000,
		Subscriptions: []broker.SubscriptionRecord{
			{Filter: "a/+/c", Options: packet.SubOptions{QoS: 2, NoLocal: true, RetainAsPublished: true, RetainHandling: 2}, SubID: 7},
			{Filter: "#", Options: packet.SubOptions{QoS: 0}},
		},
		Will: &broker.WillRecord{Msg: fullMessage("will/"+id, "gone"), Delay: 30, Expiry: 60},
	}
}

func entryRecord(seq uint64, m *broker.Message) *broker.EntryRecord {
	return &broker.EntryRecord{Seq: seq, Msg: m, QoS: m.QoS, Retain: m.Retain, SubIDs: []uint32{1, 1 << 31}}
}

// Op constructors.

func putSession(r *broker.SessionRecord) broker.PersistOp {
	return broker.PersistOp{Kind: broker.PersistSession, ClientID: r.ClientID, Session: r}
}

func delSession(id string) broker.PersistOp {
	return broker.PersistOp{Kind: broker.DeleteSession, ClientID: id}
}

func putEntry(id string, e *broker.EntryRecord) broker.PersistOp {
	return broker.PersistOp{Kind: broker.PersistEntry, ClientID: id, Seq: e.Seq, Entry: e}
}

func entryState(id string, seq uint64, state uint8, pid uint16) broker.PersistOp {
	return broker.PersistOp{Kind: broker.PersistEntryState, ClientID: id, Seq: seq, State: state, PID: pid}
}

func delEntry(id string, seq uint64) broker.PersistOp {
	return broker.PersistOp{Kind: broker.DeleteEntry, ClientID: id, Seq: seq}
}

func putQoS2(id string, pid uint16) broker.PersistOp {
	return broker.PersistOp{Kind: broker.PersistInboundQoS2, ClientID: id, PID: pid}
}

func delQoS2(id string, pid uint16) broker.PersistOp {
	return broker.PersistOp{Kind: broker.DeleteInboundQoS2, ClientID: id, PID: pid}
}

func putRetained(m *broker.Message) broker.PersistOp {
	return broker.PersistOp{Kind: broker.PersistRetained, Msg: m}
}

func delRetained(topic string) broker.PersistOp {
	return broker.PersistOp{Kind: broker.DeleteRetained, Topic: topic}
}

// diffState compares two states, LastAlive aside.
func diffState(got, want *broker.PersistedState) error {
	g, w := *got, *want
	g.LastAlive, w.LastAlive = 0, 0
	if reflect.DeepEqual(g, w) {
		return nil
	}
	return fmt.Errorf("state\n got: %s\nwant: %s", describe(&g), describe(&w))
}

func describe(st *broker.PersistedState) string {
	s := ""
	for _, ps := range st.Sessions {
		s += fmt.Sprintf("\n  session %+v will=%+v", ps.SessionRecord, ps.Will)
		for _, e := range ps.Entries {
			s += fmt.Sprintf("\n    entry %+v msg=%+v", e, e.Msg)
		}
		s += fmt.Sprintf("\n    qos2 %v", ps.InboundQoS2)
	}
	for _, m := range st.Retained {
		s += fmt.Sprintf("\n  retained %+v", *m)
	}
	return s
}
