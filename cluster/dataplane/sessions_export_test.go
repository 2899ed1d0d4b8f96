package dataplane

// The handover of a session between two real brokers with real MQTT
// clients, in one process, so that its requests can fail on purpose: a
// lost answer or a part the taker cannot store leaves the session with
// its holder, which hands it over again; a session larger than one part
// moves whole and in order.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/cluster/signing"
)

// sessNode is one node: a broker on 127.0.0.1:0, a data plane without
// links, and the session exchange on an HTTP server.
type sessNode struct {
	name string
	srv  *broker.Server
	addr string
	s    *Sessions
	ops  *httptest.Server
}

// sessPair starts nodes a and b, each the other's only member. tweak
// adjusts a node's options before it starts.
func sessPair(t *testing.T, tweak func(name string, o *SessionOptions)) (a, b *sessNode) {
	t.Helper()
	ops := map[string]string{}
	var mu sync.Mutex
	start := func(name, other string) *sessNode {
		srv, err := broker.New(broker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(Options{NodeName: name, ClusterID: "c1", Username: "cluster", Broker: srv,
			Signer: signing.New([]byte("a shared secret of the test"), nil)})
		if err != nil {
			t.Fatal(err)
		}
		o := SessionOptions{Broker: srv, Members: func() []string { return []string{other} },
			PeerOps: func(_ context.Context, m string) string {
				mu.Lock()
				defer mu.Unlock()
				return ops[m]
			}}
		if tweak != nil {
			tweak(name, &o)
		}
		s := p.NewSessions(o)
		srv.SetSessionClaimer(s)
		go srv.Serve(l, broker.ListenerConfig{Name: "tcp", AllowAnonymous: true})
		hs := httptest.NewServer(s.Handler())
		mu.Lock()
		ops[name] = strings.TrimPrefix(hs.URL, "http://")
		mu.Unlock()
		t.Cleanup(func() {
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
			p.Stop()
		})
		return &sessNode{name: name, srv: srv, addr: l.Addr().String(), s: s, ops: hs}
	}
	return start("a", "b"), start("b", "a")
}

// offlineWith leaves client's session offline on n, subscribed to t/#,
// with inflight messages in flight (sent, not acknowledged) and queued
// more queued, numbered in that order.
func offlineWith(t *testing.T, n *sessNode, client string, inflight, queued int) []string {
	t.Helper()
	st := &broker.SessionState{ClientID: client, Expiry: 3600,
		Subscriptions: []broker.SubscriptionRecord{{Filter: "t/#", Options: packet.SubOptions{QoS: 1}}}}
	var want []string
	entry := func(i int) broker.EntryRecord {
		p := fmt.Sprintf("m-%04d", i)
		want = append(want, p)
		return broker.EntryRecord{Msg: &broker.Message{Topic: "t/1", Payload: []byte(p), QoS: 1}, QoS: 1}
	}
	for i := range inflight {
		e := entry(i)
		e.State, e.PID = broker.EntrySent, uint16(i+1)
		st.Inflight = append(st.Inflight, e)
	}
	for i := range queued {
		st.Queued = append(st.Queued, entry(inflight+i))
	}
	if err := n.srv.ImportSession(st); err != nil {
		t.Fatal(err)
	}
	return want
}

// resume connects client to n (clean start 0) and records what it gets.
func resume(t *testing.T, n *sessNode, client string) (*paho.Client, *received) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := &received{}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			got.add(string(pr.Packet.Payload))
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	expiry := uint32(3600)
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: client, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatal(err)
	}
	if !ca.SessionPresent {
		t.Fatal("session present = 0")
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
	return c, got
}

type received struct {
	mu  sync.Mutex
	got []string
}

func (r *received) add(p string) {
	r.mu.Lock()
	r.got = append(r.got, p)
	r.mu.Unlock()
}

func (r *received) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// waitFor polls cond for up to 20 s; the error of the last try fails.
func waitFor(t *testing.T, cond func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// gotExactly waits until got holds want (in order, once each).
func gotExactly(t *testing.T, got *received, want []string) {
	t.Helper()
	waitFor(t, func() error {
		if g := got.list(); !slices.Equal(g, want) {
			return fmt.Errorf("got %d %v\nwant %d, in order, once each", len(g), g, len(want))
		}
		return nil
	})
}

func heldBy(n *sessNode, client string) bool {
	for _, ss := range n.srv.PersistentSessions() {
		if ss.ClientID == client {
			return true
		}
	}
	return false
}

// A session with more entries than one part (in-flight ones and queued
// ones across the parts' bounds) moves whole, in order, once each; its
// old holder keeps nothing once the taker confirmed.
func TestSessionExportInParts(t *testing.T) {
	a, b := sessPair(t, func(_ string, o *SessionOptions) { o.PartEntries = 7 })
	want := offlineWith(t, a, "x", 3, 40)
	_, got := resume(t, b, "x")
	gotExactly(t, got, want)
	if heldBy(a, "x") || a.s.exported.Load() != 1 || b.s.imported.Load() != 1 {
		t.Fatalf("a holds %v, exported %d; b imported %d: want false, 1, 1", heldBy(a, "x"), a.s.exported.Load(), b.s.imported.Load())
	}
	a.s.lmu.Lock()
	n := len(a.s.lends)
	a.s.lmu.Unlock()
	if n != 0 {
		t.Fatalf("a still lends %d sessions", n)
	}
}

// dropExportAnswer is a transport that sends the first export request
// and loses its answer (the holder has lent the session by then).
type dropExportAnswer struct{ dropped atomic.Bool }

func (d *dropExportAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.URL.Path == SessionsExportPath && d.dropped.CompareAndSwap(false, true) {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("test: the answer was lost")
	}
	return resp, err
}

// failingImport is a broker whose first import of messages fails (a
// store that refuses the write).
type failingImport struct {
	*broker.Server
	failed atomic.Bool
}

func (f *failingImport) ImportSessionAfter(st *broker.SessionState, after *broker.Message) (*broker.Message, error) {
	if len(st.Inflight)+len(st.Queued) > 0 && f.failed.CompareAndSwap(false, true) {
		return after, errors.New("test: the store refused the write")
	}
	return f.Server.ImportSessionAfter(st, after)
}

// When the taker never gets the session (the export's answer is lost, or
// it cannot store it), the holder keeps it, takes it back, and hands it
// over again: the client gets every message, once each, in order.
func TestSessionExportNotConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(o *SessionOptions)
	}{
		{"answer lost", func(o *SessionOptions) {
			o.HTTP = &http.Client{Transport: &dropExportAnswer{}, Timeout: 10 * time.Second}
		}},
		{"import fails", func(o *SessionOptions) { o.Broker = &failingImport{Server: o.Broker.(*broker.Server)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := sessPair(t, func(name string, o *SessionOptions) {
				o.PartEntries, o.LendWait, o.PartBytes = 7, 500*time.Millisecond, 64<<10 // the lend waits 0.75 s
				if name == "b" {
					tc.tweak(o)
				}
			})
			want := offlineWith(t, a, "x", 2, 20)
			_, got := resume(t, b, "x")
			gotExactly(t, got, want)
			waitFor(t, func() error {
				if heldBy(a, "x") || a.s.takenBack.Load() != 1 || a.s.returned.Load() != 1 {
					return fmt.Errorf("a holds %v, took back %d, returned %d; want false, 1, 1",
						heldBy(a, "x"), a.s.takenBack.Load(), a.s.returned.Load())
				}
				return nil
			})
		})
	}
}

// pushDuringExport is a transport that, before it sends the export
// request, has the holder push its directory to the claiming node (as
// its periodic push may): the push still lists the session, with the
// holder's claim, newer than any of the claiming node's.
type pushDuringExport struct {
	holder *Sessions
	once   atomic.Bool
	pushed chan struct{}
}

func (p *pushDuringExport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == SessionsExportPath && p.once.CompareAndSwap(false, true) {
		p.holder.push()
		close(p.pushed)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A directory push of the holder that reaches the claiming node during
// its claim does not make it hand back the session it is taking: a
// message delivered to it there meanwhile stays (it was lost: the
// session went back to the holder, and the message with nobody).
func TestSessionClaimIgnoresHolderPush(t *testing.T) {
	tr := &pushDuringExport{pushed: make(chan struct{})}
	a, b := sessPair(t, func(name string, o *SessionOptions) {
		if name == "b" {
			o.HTTP = &http.Client{Transport: tr, Timeout: 10 * time.Second}
		}
	})
	tr.holder = a.s
	want := offlineWith(t, a, "x", 0, 5)
	a.s.took("x")
	go func() {
		<-tr.pushed
		// Published on b during its claim, after the push: b's session
		// has the subscriptions, unless it handed them back.
		for end := time.Now().Add(time.Second); time.Now().Before(end) && heldBy(b, "x"); time.Sleep(5 * time.Millisecond) {
		}
		b.srv.PublishMessage(&broker.Message{Topic: "t/2", Payload: []byte("during"), QoS: 1})
	}()
	_, got := resume(t, b, "x")
	waitFor(t, func() error {
		g := got.list()
		for _, w := range append(slices.Clone(want), "during") {
			if !slices.Contains(g, w) {
				return fmt.Errorf("missing %s: got %v", w, g)
			}
		}
		return nil
	})
}

// holdParts is a transport that holds back the part requests it sends
// until release closes (or the request's deadline passes).
type holdParts struct{ release chan struct{} }

func (h *holdParts) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == SessionsPartPath {
		select {
		case <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The returns a directory push asks for run one after the other, after
// the push was taken: one that runs once this node's claim of the client
// ended (here: behind a slow return of another session; under load, a
// goroutine scheduled late did it) must see that claim, newer than the
// push's, and leave the session alone. It took the session, connected,
// from under its client (taken over, lent, given back), and the client
// got nothing more (TestSessionClaimIgnoresHolderPush failed so, 1 in
// some 100 runs under load).
func TestSessionReturnAfterClaimEnded(t *testing.T) {
	tr := &pushDuringExport{pushed: make(chan struct{})}
	hold := &holdParts{release: make(chan struct{})}
	a, b := sessPair(t, func(name string, o *SessionOptions) {
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		if name == "a" {
			c.Transport = hold
		}
		o.HTTP = c
	})
	tr.holder = a.s
	// b kept k and z while it was away; a claimed them since, and holds x.
	for _, c := range []string{"k", "z"} {
		offlineWith(t, b, c, 0, 1)
		b.s.took(c)
	}
	for _, c := range []string{"k", "z", "x"} {
		offlineWith(t, a, c, 0, 0)
		a.s.took(c)
	}
	want := offlineWith(t, a, "x", 0, 3)
	// b's claim of x: a's push during it lists k, x and z with a's
	// claims; b returns k (held back until x is connected here), then
	// must skip x, then returns z.
	_, got := resume(t, b, "x")
	gotExactly(t, got, want)
	close(hold.release)
	waitFor(t, func() error {
		if n := b.s.returned.Load(); n != 2 {
			return fmt.Errorf("b returned %d sessions, want 2 (k and z)", n)
		}
		return nil
	})
	if n := b.s.takenBack.Load(); n != 0 {
		t.Errorf("b lent and took back %d sessions, want 0 (x stays with its client)", n)
	}
	b.srv.PublishMessage(&broker.Message{Topic: "t/2", Payload: []byte("after"), QoS: 1})
	gotExactly(t, got, append(want, "after"))
}

// Lend numbers do not start again with a node's restart: a borrower's
// request for a lend of the previous run would match the new one of the
// same client (its confirmation released a session it never pulled).
func TestLendNumbersAcrossRestarts(t *testing.T) {
	a, _ := sessPair(t, nil)
	offlineWith(t, a, "x", 0, 1)
	first := a.s.lendTo("x", "b", true)
	if first == nil {
		t.Fatal("a does not lend x")
	}
	a.s.giveBack(first, "test", false)
	restarted := a.s.p.NewSessions(a.s.opts) // the exchange as a restart builds it
	again := restarted.lendTo("x", "b", true)
	if again == nil {
		t.Fatal("a does not lend x again")
	}
	defer restarted.giveBack(again, "test", false)
	if again.id == first.id {
		t.Fatalf("the restarted exchange numbered its lend %d, as the previous run did", again.id)
	}
	if st := a.s.Status(); st.TakenBack != 1 || st.Lent != 0 {
		t.Fatalf("status: taken back %d, lent %d; want 1, 0", st.TakenBack, st.Lent)
	}
}

// slowParts is a transport whose answers to part requests take delay to
// arrive, as on a slow link (the holder wrote them long before).
type slowParts struct{ delay time.Duration }

func (sl *slowParts) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != SessionsPartPath {
		return resp, err
	}
	select {
	case <-time.After(sl.delay):
		return resp, nil
	case <-r.Context().Done():
		resp.Body.Close()
		return nil, r.Context().Err()
	}
}

// On a link slower than claimWait per part (each part's answer takes 2.5
// s to arrive, below the 256 KiB/s a part of PartBytes is given time
// for), a session in several parts still moves whole: the taker waits
// for each part as long as one may take, and the holder counts its
// lend's wait from the answer's end. The taker gave up on each part after
// 2 s, the holder took the session back and lent it again, and it never
// moved.
func TestSessionExportOnSlowLink(t *testing.T) {
	a, b := sessPair(t, func(name string, o *SessionOptions) {
		o.PartEntries, o.PartBytes, o.LendWait = 7, 1<<20, 500*time.Millisecond // a part is given 2 s + 4 s
		if name == "b" {
			o.HTTP = &http.Client{Transport: &slowParts{delay: 2500 * time.Millisecond}, Timeout: 30 * time.Second}
		}
	})
	want := offlineWith(t, a, "x", 0, 20) // 3 parts: the export's, then 2 part requests
	_, got := resume(t, b, "x")
	gotExactly(t, got, want)
	if n := a.s.takenBack.Load(); n != 0 {
		t.Fatalf("a took the session back %d times, want 0", n)
	}
	if heldBy(a, "x") || a.s.exported.Load() != 1 {
		t.Fatalf("a holds %v, exported %d; want false, 1", heldBy(a, "x"), a.s.exported.Load())
	}
}
