package dataplane

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/wire"
)

var pids uint16

func nextPID() uint16 { pids++; return pids }

// takeAll takes every record due for ps and returns their sequence
// numbers (0 for best effort) and payloads.
func takeAll(o *outbox, ps *peerStream) (seqs []uint64, msgs []string) {
	for {
		_, n := o.take(ps, 1<<20, noHead, func(string) bool { return true }, func(seq uint64, msg []byte, _ []string, _ *wire.Rep) int {
			seqs, msgs = append(seqs, seq), append(msgs, string(msg))
			return len(msg)
		}, nextPID)
		if n == 0 {
			return seqs, msgs
		}
	}
}

func TestOutboxConfirmResendAndBound(t *testing.T) {
	o := newOutbox(3, nil)
	a, _ := o.addPeer("a")
	o.setUp(a, true)
	for i := range 2 {
		o.addReliable([]byte(fmt.Sprint("r", i)), "t", false, nil, nil, nil)
	}
	o.addBestEffort([]byte("be"), "t", nil, func(string, string) bool { return true })
	seqs, msgs := takeAll(o, a)
	if fmt.Sprint(seqs, msgs) != "[1 2 0] [r0 r1 be]" { // in the order they were queued
		t.Fatalf("first frame: %v %v", seqs, msgs)
	}
	// The link drops before the confirmation: both reliable records are
	// due again, the best effort one is gone.
	o.setUp(a, false)
	o.setUp(a, true)
	if seqs, _ := takeAll(o, a); fmt.Sprint(seqs) != "[1 2]" {
		t.Fatalf("after a reconnect: %v, want the unconfirmed records again", seqs)
	}
	if !o.confirm("a", a, a.frames[0].pid, false) || o.stats(a).Backlog != 0 || o.entries.len() != 0 {
		t.Fatalf("after the confirmation: %+v, %d kept", o.stats(a), o.entries.len())
	}
	// Beyond max the oldest goes, counted for the peer that missed it
	// while its link was down (TestOutboxHoldsBackForPeerBehind: up).
	o.setUp(a, false)
	for i := range 5 {
		o.addReliable([]byte(fmt.Sprint("s", i)), "t", false, nil, nil, nil)
	}
	if st := o.stats(a); st.Backlog != 3 || st.Dropped != 2 || st.Holds != 0 {
		t.Fatalf("over the bound: %+v, want backlog 3 and 2 dropped", st)
	}
	o.setUp(a, true)
	if _, msgs := takeAll(o, a); fmt.Sprint(msgs) != "[s2 s3 s4]" {
		t.Fatalf("kept %v, want the newest three", msgs)
	}
}

// TestOutboxHoldsBackForPeerBehind: at its bound the stream keeps what a
// peer that is up and confirming still needs and holds the publishers
// back (they wait for room) instead of dropping it: a subscriber on a node
// that is merely slow lost acknowledged messages (crossnode -quorum: 5131
// lost at the other node, 0 with a bound of 1,000,000). The publishers go
// on once the peer confirmed enough, or after holdSlice; a peer that
// confirmed nothing for stallAfter, or is down, loses the oldest records
// as before, and beyond hardMax the oldest go whatever the peers.
func TestOutboxHoldsBackForPeerBehind(t *testing.T) {
	o := newOutbox(8, nil)
	a, _ := o.addPeer("a")
	o.setUp(a, true)
	add := func(i int) <-chan struct{} {
		_, _, room := o.addNumbered([]byte(fmt.Sprint("m", i)), "t", false, nil, nil, nil)
		return room
	}
	for i := range 8 {
		if room := add(i); room != nil {
			t.Fatalf("record %d of 8 holds the publisher back", i)
		}
	}
	room := add(8)
	if room == nil {
		t.Fatal("the ninth record of a bound of 8 did not hold the publisher back")
	}
	if st := o.stats(a); st.Dropped != 0 || st.Backlog != 9 || st.Holds != 1 {
		t.Fatalf("held: %+v, want nothing dropped, backlog 9, one hold", st)
	}
	// The peer confirms the first two: 7 of 8 left, room again.
	seqs, _ := takeAll(o, a)
	if len(seqs) != 9 {
		t.Fatalf("took %v", seqs)
	}
	o.mu.Lock()
	o.advanceLocked(a, 2)
	o.mu.Unlock()
	select {
	case <-room:
	default:
		t.Fatal("room not signalled once the peer confirmed down to 7/8 of the bound")
	}
	if add(9) != nil { // 8 records
		t.Fatal("held back with room")
	}
	room = add(10)
	if room == nil {
		t.Fatal("not held back at the bound")
	}
	// Nobody confirms: the hold ends after holdSlice all the same.
	select {
	case <-room:
	case <-time.After(5 * holdSlice):
		t.Fatalf("the hold lasted over %v", 5*holdSlice)
	}
	// Up to hardMax the publishers are held, beyond it the oldest go.
	for i := 11; o.stats(a).Backlog < o.hardMax(); i++ {
		add(i)
	}
	add(100)
	if st := o.stats(a); st.Dropped == 0 || st.Backlog != o.hardMax() {
		t.Fatalf("beyond hardMax: %+v, want the oldest dropped, %d kept", st, o.hardMax())
	}
	// A peer that confirmed nothing for stallAfter does not hold anyone
	// back: the stream drops down to its bound.
	o.mu.Lock()
	a.moved = time.Now().Add(-2 * stallAfter)
	o.mu.Unlock()
	add(101)
	if st := o.stats(a); st.Backlog != 8 {
		t.Fatalf("stalled peer: %+v, want the stream back at its bound of 8", st)
	}
	// A peer that is down neither.
	b, _ := o.addPeer("b")
	o.setUp(b, true)
	o.setUp(b, false)
	o.mu.Lock()
	a.moved = time.Now()
	o.mu.Unlock()
	o.setUp(a, false)
	o.mu.Lock()
	o.releaseLocked(o.room) // what the stalled peer left (a publisher waits at most holdSlice)
	o.mu.Unlock()
	if add(102) != nil || add(103) != nil {
		t.Fatal("a peer that is down held the publishers back")
	}
}

// TestOutboxStoreResumes: records and cursors on disk survive a reopen; a
// peer that never confirmed anything resumes where it was added, and one
// confirmed record is not sent again.
func TestOutboxStoreResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	boot := st.boot
	o := newOutbox(100, st)
	a, fresh := o.addPeer("a")
	b, _ := o.addPeer("b")
	if !fresh {
		t.Fatal("a peer never seen before does not ask for a catch-up")
	}
	done := make(chan error, 3)
	for i := range 3 {
		if !o.addReliable(wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(fmt.Sprint("m", i))}), "t", false, nil, nil, func(err error) { done <- err }) {
			t.Fatal("a stored outbox did not wait for the store")
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// a confirms a frame with the first record only.
	pid, _ := o.take(a, 10, noHead, func(string) bool { return true }, func(uint64, []byte, []string, *wire.Rep) int { return 2 }, nextPID)
	o.confirm("a", a, pid, false)
	_ = b
	st.close()

	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if st.boot != boot {
		t.Fatalf("stream identity changed across a reopen: %d, then %d", boot, st.boot)
	}
	o = newOutbox(100, st)
	a, fresh = o.addPeer("a")
	b, _ = o.addPeer("b")
	if fresh {
		t.Fatal("a peer with a stored cursor and nothing dropped asks for a catch-up")
	}
	// Only t is wanted: the records read back know their topic.
	var payloads []string
	for {
		_, n := o.take(a, 1<<20, noHead, func(tp string) bool { return tp == "t" }, func(_ uint64, msg []byte, _ []string, _ *wire.Rep) int {
			d, err := wire.DecodeMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, string(d.Msg.Payload))
			return len(msg)
		}, nextPID)
		if n == 0 {
			break
		}
	}
	if fmt.Sprint(payloads) != "[m1 m2]" {
		t.Fatalf("a resumed with %v, want m1 m2", payloads)
	}
	if seqs, _ := takeAll(o, b); fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("b resumed with %v, want every record", seqs)
	}
	// Numbers go on above every one that may have been sent before (the
	// lease), not from the last written one: a peer may hold those.
	if o.head() < 3+leaseLow {
		t.Fatalf("head %d after a reopen, want above the lease: numbers must go on past what peers may hold", o.head())
	}
	o.addReliable(wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("after")}), "t", false, nil, nil, func(error) {})
	eventually(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.durable == o.head()
	})
	if seqs, _ := takeAll(o, b); len(seqs) != 1 || seqs[0] <= 3+leaseLow {
		t.Fatalf("b got %v after the reopen's first record, want one number above the lease", seqs)
	}
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOutboxPassesOverUnwanted: records a peer does not want are passed
// over and confirmed with the next frame, or at once when nothing is in
// flight; retained ones go anyway.
func TestOutboxPassesOverUnwanted(t *testing.T) {
	o := newOutbox(100, nil)
	a, _ := o.addPeer("a")
	o.setUp(a, true)
	o.addReliable([]byte("x1"), "x/1", false, nil, nil, nil)
	o.addReliable([]byte("y1"), "y/1", false, nil, nil, nil)
	o.addReliable([]byte("x2"), "x/2", true, nil, nil, nil)
	onlyY := func(tp string) bool { return tp[0] == 'y' }
	var got []string
	pid, n := o.take(a, 1<<20, noHead, onlyY, func(_ uint64, msg []byte, _ []string, _ *wire.Rep) int {
		got = append(got, string(msg))
		return len(msg)
	}, nextPID)
	if fmt.Sprint(got) != "[y1 x2]" || pid == 0 || n != 2 || a.frames[0].lastSeq != 3 {
		t.Fatalf("took %v (pid %d, n %d, frames %+v), want y1 and the retained x2, covering up to 3", got, pid, n, a.frames)
	}
	o.confirm("a", a, pid, false)
	if st := o.stats(a); st.Backlog != 0 {
		t.Fatalf("backlog %d after the confirmation", st.Backlog)
	}
	o.addReliable([]byte("x3"), "x/3", false, nil, nil, nil)
	if _, n := o.take(a, 1<<20, noHead, onlyY, func(uint64, []byte, []string, *wire.Rep) int { return 0 }, nextPID); n != 0 {
		t.Fatalf("took %d unwanted records", n)
	}
	if st := o.stats(a); st.Backlog != 0 || o.entries.len() != 0 {
		t.Fatalf("an unwanted record with nothing in flight still waits: %+v", st)
	}
}

// noHead is take's header callback for tests that do not look at it.
func noHead(uint64, []uint64) {}
