package discovery

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"gantry/cluster/signing"
)

// mcastRig is a Multicast fed datagrams directly, on a clock the test
// moves, and a way to build the datagrams of other nodes.
type mcastRig struct {
	t   *testing.T
	m   *Multicast
	rec *logRecorder
	now time.Time
}

func newMcastRig(t *testing.T) *mcastRig {
	r := &mcastRig{t: t, now: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)}
	log := newLogRecorderInto(&r.rec)
	m, err := NewMulticast(MulticastOptions{
		ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: ":9100",
		Interval: time.Second, Signer: r.signer("secret"), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.now = r.clock
	r.m = m
	return r
}

func newLogRecorderInto(dst **logRecorder) *slog.Logger {
	rec, log := newLogRecorder()
	*dst = rec
	return log
}

func (r *mcastRig) clock() time.Time { return r.now }

// signer returns a signer for secret on the rig's clock ("" = none).
func (r *mcastRig) signer(secret string) *signing.Signer {
	return signing.New([]byte(secret), &signing.Options{Now: r.clock})
}

// datagram is an announcement a as s would send it now.
func (r *mcastRig) datagram(s *signing.Signer, a announcement) []byte {
	return s.Sign(appendAnnouncement(nil, &a))
}

func (r *mcastRig) peers() []Peer {
	ps, _ := r.m.Peers(r.t.Context())
	return ps
}

func (r *mcastRig) warnings(substr string) int { return len(r.rec.records("WARN", substr)) }

func TestMulticastAcceptsPeers(t *testing.T) {
	r := newMcastRig(t)
	s := r.signer("secret")
	r.m.receive(r.datagram(s, announcement{Incarnation: 2, ClusterID: "line-1", NodeName: "gw-2", RaftAddr: ":9200", OpsAddr: ":9100"}), ips("10.0.0.2")[0])
	r.m.receive(r.datagram(s, announcement{Incarnation: 3, ClusterID: "line-1", NodeName: "gw-3", RaftAddr: "gw-3.plant.example:9300"}), ips("10.0.0.3")[0])
	want := []Peer{
		{NodeName: "gw-2", ClusterID: "line-1", RaftAddr: "10.0.0.2:9200", OpsAddr: "10.0.0.2:9100"},
		{NodeName: "gw-3", ClusterID: "line-1", RaftAddr: "gw-3.plant.example:9300"},
	}
	if got := r.peers(); !slices.Equal(got, want) {
		t.Fatalf("peers\n%+v\nwant\n%+v", got, want)
	}
	if n := len(r.rec.records("INFO", "found peer")); n != 2 {
		t.Fatalf("%d 'found peer' lines, want 2:\n%s", n, r.rec)
	}
}

func TestMulticastRejects(t *testing.T) {
	gw2 := announcement{Incarnation: 2, ClusterID: "line-1", NodeName: "gw-2", RaftAddr: ":9200"}
	for _, tc := range []struct {
		name string
		send func(r *mcastRig) []byte
		warn string // substring of the one warning expected; "" = none
	}{
		{"other secret", func(r *mcastRig) []byte { return r.datagram(r.signer("other"), gw2) }, "bad signature"},
		{"unsigned", func(r *mcastRig) []byte { return r.datagram(r.signer(""), gw2) }, "different SharedSecret setting"},
		{"tampered", func(r *mcastRig) []byte {
			b := r.datagram(r.signer("secret"), gw2)
			b[len(b)-1] ^= 1
			return b
		}, "bad signature"},
		{"stale", func(r *mcastRig) []byte {
			old := r.now.Add(-2 * signing.DefaultWindow)
			s := signing.New([]byte("secret"), &signing.Options{Now: func() time.Time { return old }})
			return r.datagram(s, gw2)
		}, "stale"},
		{"other cluster, same secret", func(r *mcastRig) []byte {
			a := gw2
			a.ClusterID = "line-2"
			return r.datagram(r.signer("secret"), a)
		}, ""},
		{"other cluster, other secret", func(r *mcastRig) []byte {
			a := gw2
			a.ClusterID = "line-2"
			return r.datagram(r.signer("theirs"), a)
		}, ""},
		{"not an envelope", func(*mcastRig) []byte { return []byte("M-SEARCH * HTTP/1.1") }, ""},
		{"envelope, bad payload", func(r *mcastRig) []byte { return r.signer("secret").Sign([]byte("Ax")) }, "malformed"},
		{"our own", func(r *mcastRig) []byte {
			return r.datagram(r.signer("secret"), r.m.self)
		}, ""},
		{"another node with our name", func(r *mcastRig) []byte {
			a := r.m.self
			a.Incarnation++
			return r.datagram(r.signer("secret"), a)
		}, "this node's NodeName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMcastRig(t)
			// Every second for a minute: one warning at most.
			for range 60 {
				r.m.receive(tc.send(r), ips("10.0.0.66")[0])
				r.now = r.now.Add(time.Second - time.Millisecond)
			}
			if p := r.peers(); len(p) != 0 {
				t.Fatalf("accepted: %+v", p)
			}
			all := r.rec.records("WARN", "")
			switch {
			case tc.warn == "" && len(all) != 0:
				t.Fatalf("warnings, want none:\n%s", r.rec)
			case tc.warn != "" && (len(all) != 1 || r.warnings(tc.warn) != 1):
				t.Fatalf("want exactly one warning containing %q:\n%s", tc.warn, r.rec)
			}
			for _, w := range all {
				if w["component"] != "discovery" || w["from"] != "10.0.0.66" {
					t.Fatalf("warning without component or source: %v", w)
				}
			}
		})
	}
}

func TestMulticastReplayAndDuplicates(t *testing.T) {
	r := newMcastRig(t)
	s := r.signer("secret")
	gw2 := announcement{Incarnation: 2, ClusterID: "line-1", NodeName: "gw-2", RaftAddr: ":9200"}
	first := r.datagram(s, gw2)
	r.now = r.now.Add(time.Second)
	second := r.datagram(s, gw2)
	r.m.receive(second, ips("10.0.0.2")[0])
	r.m.receive(second, ips("10.0.1.2")[0]) // the same datagram through a second NIC: silent
	if n := len(r.rec.records("WARN", "")); n != 0 {
		t.Fatalf("a duplicate caused warnings:\n%s", r.rec)
	}
	r.m.receive(first, ips("10.0.0.2")[0]) // an older one: a replay
	if r.warnings("replayed") != 1 {
		t.Fatalf("replay not warned:\n%s", r.rec)
	}
	if got := r.peers(); len(got) != 1 || got[0].RaftAddr != "10.0.0.2:9200" {
		t.Fatalf("peers %+v, want gw-2 at the first source address", got)
	}
}

func TestMulticastExpiryAndSourceAddress(t *testing.T) {
	r := newMcastRig(t)
	s := r.signer("secret")
	gw2 := announcement{Incarnation: 2, ClusterID: "line-1", NodeName: "gw-2", RaftAddr: ":9200"}
	hear := func(src string) {
		r.m.receive(r.datagram(s, gw2), ips(src)[0])
		r.now = r.now.Add(time.Second)
	}
	addr := func() string {
		p := r.peers()
		if len(p) != 1 {
			return ""
		}
		return p[0].RaftAddr
	}
	// Heard through two LANs alternately: the address stays the first.
	for range 3 {
		hear("10.0.1.2")
		hear("10.0.2.2")
	}
	if a := addr(); a != "10.0.1.2:9200" {
		t.Fatalf("address %q, want it stable at the first source", a)
	}
	// LAN 1 goes quiet: after the expiry the other source is used.
	for range 7 {
		hear("10.0.2.2")
	}
	if a := addr(); a != "10.0.2.2:9200" {
		t.Fatalf("address %q, want the remaining source", a)
	}
	// The peer stops: gone from Peers after ExpireAfter (5 s), logged once.
	r.now = r.now.Add(5*time.Second + time.Millisecond)
	r.m.expire()
	r.m.expire()
	if p := r.peers(); len(p) != 0 {
		t.Fatalf("expired peer still listed: %+v", p)
	}
	if n := len(r.rec.records("INFO", "stopped announcing")); n != 1 {
		t.Fatalf("%d 'stopped announcing' lines, want 1:\n%s", n, r.rec)
	}
	// Its record is kept for the replay window, then forgotten.
	r.m.mu.Lock()
	_, kept := r.m.heard["gw-2"]
	r.m.mu.Unlock()
	if !kept {
		t.Fatal("record forgotten before the replay window passed")
	}
	r.now = r.now.Add(signing.DefaultWindow)
	r.m.expire()
	r.m.mu.Lock()
	_, kept = r.m.heard["gw-2"]
	r.m.mu.Unlock()
	if kept {
		t.Fatal("record kept beyond the replay window")
	}
	// It comes back: found again.
	hear("10.0.2.2")
	if a := addr(); a != "10.0.2.2:9200" {
		t.Fatalf("returning peer at %q", a)
	}
	if n := len(r.rec.records("INFO", "found peer")); n != 2 {
		t.Fatalf("%d 'found peer' lines, want 2:\n%s", n, r.rec)
	}
}

func TestMulticastValidate(t *testing.T) {
	base := MulticastOptions{ClusterID: "c", NodeName: "n", RaftAddr: ":9200"}
	for _, tc := range []struct {
		name string
		f    func(o *MulticastOptions)
	}{
		{"no cluster id", func(o *MulticastOptions) { o.ClusterID = "" }},
		{"no node name", func(o *MulticastOptions) { o.NodeName = "" }},
		{"bad raft address", func(o *MulticastOptions) { o.RaftAddr = "9200" }},
		{"unicast group", func(o *MulticastOptions) { o.Group = "10.0.0.1" }},
		{"IPv6 group", func(o *MulticastOptions) { o.Group = "ff02::1" }},
		{"port", func(o *MulticastOptions) { o.Port = 70000 }},
		{"expiry below interval", func(o *MulticastOptions) { o.Interval, o.ExpireAfter = time.Second, time.Second/2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.f(&o)
			if _, err := NewMulticast(o); err == nil {
				t.Fatalf("%+v accepted", o)
			}
		})
	}
	if _, err := NewMulticast(base); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
}
