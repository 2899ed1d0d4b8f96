package store_test

import (
	"errors"
	"reflect"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/broker/store"
)

func sampleEntries() []broker.EntryRecord {
	return []broker.EntryRecord{
		{Msg: plainMessage("t", "")},
		{Msg: fullMessage("a/b/c", "payload"), QoS: 2, Retain: true, SubIDs: []uint32{1, 268435455}, State: broker.EntryReleased, PID: 65535},
		{Msg: &broker.Message{Topic: "x", Origin: broker.OriginPeer, ExpiresAt: -1}, QoS: 1, State: broker.EntrySent, PID: 1},
		{Msg: &broker.Message{Topic: "p", Origin: broker.OriginPeer, Record: broker.PeerRecord{Node: "node-2", Boot: 1<<63 + 5, Seq: 300}}, QoS: 2},
		{Msg: &broker.Message{Topic: "l", Record: broker.PeerRecord{Seq: 1}}, QoS: 1}, // published here: this node's own record
		{QoS: 1}, // no message
	}
}

func sampleSessions() []broker.SessionRecord {
	return []broker.SessionRecord{
		{ClientID: "c"},
		*sessionRecord("client-1"),
		{ClientID: "w", Expiry: 0xFFFFFFFF, DisconnectedAt: -5, Will: &broker.WillRecord{Delay: 1}},
		{ClientID: "s", Subscriptions: []broker.SubscriptionRecord{
			{Filter: "", Options: packet.SubOptions{RetainHandling: 1}, SubID: 0xFFFFFFFF},
		}},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for i, e := range sampleEntries() {
		b := store.EncodeEntry(nil, &e)
		got, err := store.DecodeEntry(b)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("entry %d: got %+v, %v; want %+v", i, got, err, e)
		}
	}
	for i, s := range sampleSessions() {
		b := store.EncodeSession([]byte("prefix"), &s)[len("prefix"):]
		got, err := store.DecodeSession(b)
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("session %d: got %+v, %v; want %+v", i, got, err, s)
		}
	}
	m := fullMessage("r", "v")
	got, err := store.DecodeMessage(store.EncodeMessage(nil, m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("message: got %+v, %v; want %+v", got, err, m)
	}
}

func TestDecodeRejects(t *testing.T) {
	entry := store.EncodeEntry(nil, &sampleEntries()[1])
	withRecord := store.EncodeEntry(nil, &sampleEntries()[3])
	session := store.EncodeSession(nil, sessionRecord("c"))
	tests := []struct {
		name   string
		decode func([]byte) error
		in     []byte
	}{
		{"empty entry", decodeEntry, nil},
		{"entry format 2", decodeEntry, append([]byte{2}, entry[1:]...)},
		{"truncated entry", decodeEntry, entry[:len(entry)-1]},
		{"entry with trailing byte", decodeEntry, append(entry[:len(entry):len(entry)], 0)},
		{"entry with unknown flag", decodeEntry, []byte{1, 0, 0, 0, 1, 8, 0}},
		{"entry record without a message", decodeEntry, []byte{1, 0, 0, 0, 1, 4, 0, 0, 0, 0}},
		{"entry with truncated record", decodeEntry, withRecord[:len(withRecord)-1]},
		{"entry with huge sub id count", decodeEntry, []byte{1, 0, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"entry sub id over 32 bits", decodeEntry, []byte{1, 0, 0, 0, 1, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x10}},
		{"empty session", decodeSession, nil},
		{"truncated session", decodeSession, session[:len(session)/2]},
		{"session with trailing byte", decodeSession, append(session[:len(session):len(session)], 0)},
		{"session with huge client id length", decodeSession, []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"session will flag 2", decodeSession, []byte{1, 1, 'c', 0, 0, 0, 2}},
		{"session bad sub options", decodeSession, []byte{1, 1, 'c', 0, 0, 1, 0, 0xc0, 0, 0}},
		{"message format 0", decodeMessage, []byte{0}},
		{"message with huge user property count", decodeMessage, []byte{1, 0, 0, 1 << 5, 0, 0, 0, 0x7f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.decode(tt.in); !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decode(%x) = %v, want ErrCorrupt", tt.in, err)
			}
		})
	}
}

func decodeEntry(b []byte) error   { _, err := store.DecodeEntry(b); return err }
func decodeSession(b []byte) error { _, err := store.DecodeSession(b); return err }
func decodeMessage(b []byte) error { _, err := store.DecodeMessage(b); return err }

// FuzzDecodeEntry: DecodeEntry never panics, fails only with ErrCorrupt,
// and what it accepts re-encodes canonically to the same record.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range sampleEntries() {
		f.Add(store.EncodeEntry(nil, &e))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := store.DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := store.EncodeEntry(nil, &e)
		e2, err := store.DecodeEntry(again)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoding %+v decodes to %+v, %v", e, e2, err)
		}
		if len(again) > len(b) {
			t.Fatalf("re-encoding is %d bytes, longer than the %d-byte input", len(again), len(b))
		}
	})
}

// FuzzDecodeSession: as FuzzDecodeEntry, for session records.
func FuzzDecodeSession(f *testing.F) {
	for _, s := range sampleSessions() {
		f.Add(store.EncodeSession(nil, &s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := store.DecodeSession(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := store.EncodeSession(nil, &s)
		s2, err := store.DecodeSession(again)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-encoding %+v decodes to %+v, %v", s, s2, err)
		}
		if len(again) > len(b) {
			t.Fatalf("re-encoding is %d bytes, longer than the %d-byte input", len(again), len(b))
		}
	})
}
