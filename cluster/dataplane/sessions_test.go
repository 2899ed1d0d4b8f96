package dataplane

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// A session's state survives its encoding between nodes: subscriptions,
// in-flight entries with their state and identifiers, queued entries in
// order with their messages' records, inbound QoS 2 identifiers, the
// records of what the client acknowledged; a queued QoS 0 entry is
// refused.
func TestSessionStateRoundTrip(t *testing.T) {
	msg := func(p string) *broker.Message {
		return &broker.Message{Topic: "t/" + p, Payload: []byte(p), QoS: 2, ClientID: "pub", ContentType: "text/plain"}
	}
	rec := broker.PeerRecord{Node: "node-2", Boot: 1796300580605394945, Seq: 12}
	named := func(p string) *broker.Message {
		m := msg(p)
		m.Record = rec
		return m
	}
	st := &broker.SessionState{ClientID: "x", Expiry: 60,
		Subscriptions: []broker.SubscriptionRecord{{Filter: "t/#", Options: packet.SubOptions{QoS: 2, NoLocal: true}, SubID: 7}},
		Inflight:      []broker.EntryRecord{{Msg: msg("a"), QoS: 2, State: broker.EntryReleased, PID: 9, SubIDs: []uint32{7}}},
		Queued:        []broker.EntryRecord{{Msg: msg("b"), QoS: 1, Retain: true}, {Msg: named("c"), QoS: 2}},
		InboundQoS2:   []uint16{3, 4}, Delivered: []broker.PeerRecord{rec, {Node: "node-3", Boot: 2, Seq: 5}}}
	data, err := json.Marshal(encodeState(st)) // as it travels
	if err != nil {
		t.Fatal(err)
	}
	var w0 wireState
	if err := json.Unmarshal(data, &w0); err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(&w0)
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientID != "x" || got.Expiry != 60 || len(got.Subscriptions) != 1 || got.Subscriptions[0] != st.Subscriptions[0] ||
		len(got.InboundQoS2) != 2 || !slices.Equal(got.Delivered, st.Delivered) {
		t.Fatalf("got %+v", got)
	}
	if f := got.Inflight; len(f) != 1 || f[0].PID != 9 || f[0].State != broker.EntryReleased || string(f[0].Msg.Payload) != "a" ||
		f[0].Msg.ContentType != "text/plain" || len(f[0].SubIDs) != 1 {
		t.Fatalf("in flight %+v", f)
	}
	if q := got.Queued; len(q) != 2 || string(q[0].Msg.Payload) != "b" || !q[0].Retain || q[0].QoS != 1 || string(q[1].Msg.Payload) != "c" ||
		q[0].Msg.Record != (broker.PeerRecord{}) || q[1].Msg.Record != rec {
		t.Fatalf("queued %+v", q)
	}
	w := encodeState(st)
	w.Queued[0].QoS = 0
	if _, err := decodeState(w); err == nil {
		t.Fatal("a queued QoS 0 entry decoded")
	}
	if _, err := decodeState(nil); err == nil {
		t.Fatal("no state decoded")
	}
}

// The directory's newest live entry of a client wins; an expired one, or
// one of a node that answered that it does not hold it, does not count.
func TestDirectoryLookup(t *testing.T) {
	s := &Sessions{dir: map[string]map[string]dirEntry{}}
	now := time.Now().UnixNano()
	s.dir["a"] = map[string]dirEntry{"x": {Client: "x", Since: 10, Expiry: 3600, DisconnectedAt: now}}
	s.dir["b"] = map[string]dirEntry{"x": {Client: "x", Since: 20, Expiry: 3600, DisconnectedAt: now}}
	s.dir["c"] = map[string]dirEntry{"x": {Client: "x", Since: 30, Expiry: 1, DisconnectedAt: now - int64(2*time.Second)}}
	if _, node, ok := s.lookup("x", nil); !ok || node != "b" {
		t.Fatalf("lookup: %s %v, want b", node, ok)
	}
	if _, node, ok := s.lookup("x", map[string]bool{"b": true}); !ok || node != "a" {
		t.Fatalf("lookup without b: %s %v, want a", node, ok)
	}
	if _, _, ok := s.lookup("y", nil); ok {
		t.Fatal("found a client nobody holds")
	}
}
