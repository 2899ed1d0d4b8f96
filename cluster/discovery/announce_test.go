package discovery

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestAnnouncementRoundTrip(t *testing.T) {
	for _, a := range []announcement{
		{Incarnation: 1, ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: ":9100"},
		{Incarnation: 1 << 63, ClusterID: "c", NodeName: "n", RaftAddr: "gw-1.plant.example:9200"},
		{ClusterID: "Fábrica", NodeName: "nó-ü", RaftAddr: "[fe80::1]:9200", OpsAddr: "10.0.0.1:9100"},
		{ClusterID: strings.Repeat("c", 255), NodeName: strings.Repeat("n", 255), RaftAddr: ":1"},
	} {
		b := appendAnnouncement(nil, &a)
		got, err := decodeAnnouncement(b)
		if err != nil || got != a {
			t.Errorf("round trip of %+v = %+v, %v", a, got, err)
		}
		// Later versions may append fields: they are ignored.
		got, err = decodeAnnouncement(append(b, 0xff, 0x01))
		if err != nil || got != a {
			t.Errorf("with trailing bytes: %+v, %v", got, err)
		}
	}
}

func TestAnnouncementDecodeErrors(t *testing.T) {
	good := appendAnnouncement(nil, &announcement{Incarnation: 7, ClusterID: "c", NodeName: "n", RaftAddr: ":9200"})
	with := func(f func(a *announcement)) []byte {
		a := announcement{Incarnation: 7, ClusterID: "c", NodeName: "n", RaftAddr: ":9200"}
		f(&a)
		return appendAnnouncement(nil, &a)
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"wrong kind", append([]byte{'B'}, good[1:]...)},
		{"no fields", good[:9]},
		{"truncated string", good[:len(good)-2]},
		{"length beyond the end", append(bytes.Clone(good[:9]), 200, 'c')},
		{"empty cluster id", with(func(a *announcement) { a.ClusterID = "" })},
		{"empty node name", with(func(a *announcement) { a.NodeName = "" })},
		{"control character", with(func(a *announcement) { a.NodeName = "gw\n1" })},
		{"invalid UTF-8", with(func(a *announcement) { a.NodeName = "gw\xff" })},
		{"raft address without port", with(func(a *announcement) { a.RaftAddr = "gw-1" })},
		{"raft port 0", with(func(a *announcement) { a.RaftAddr = ":0" })},
		{"bad ops address", with(func(a *announcement) { a.OpsAddr = "gw-1:http" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := decodeAnnouncement(tc.in)
			if !errors.Is(err, errAnnouncement) {
				t.Fatalf("decode = %+v, %v; want errAnnouncement", a, err)
			}
		})
	}
}

// FuzzDecodeAnnouncement checks that decoding never panics and that what
// it accepts encodes back to a prefix of the input that decodes the same.
func FuzzDecodeAnnouncement(f *testing.F) {
	f.Add(appendAnnouncement(nil, &announcement{Incarnation: 42, ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: ":9100"}))
	f.Add(appendAnnouncement(nil, &announcement{ClusterID: "c", NodeName: "n", RaftAddr: "[::1]:1"}))
	f.Add([]byte("A"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := decodeAnnouncement(in)
		if err != nil {
			return
		}
		b := appendAnnouncement(nil, &a)
		if !bytes.HasPrefix(in, b) {
			t.Fatalf("re-encoding %+v gives %q, not a prefix of the input %q", a, b, in)
		}
		if again, err := decodeAnnouncement(b); err != nil || again != a {
			t.Fatalf("re-decoding gives %+v, %v; want %+v", again, err, a)
		}
	})
}
