package dataplane

import (
	"fmt"
	"path/filepath"
	"testing"
)

// takeAll takes every record due for ps and returns their sequence
// numbers (0 for best effort) and payloads.
func takeAll(o *outbox, ps *peerStream) (seqs []uint64, msgs []string) {
	for {
		_, n := o.take(ps, 1<<20, func(seq uint64, msg []byte) int {
			seqs, msgs = append(seqs, seq), append(msgs, string(msg))
			return len(msg)
		})
		if n == 0 {
			return seqs, msgs
		}
	}
}

func TestOutboxConfirmResendAndBound(t *testing.T) {
	o := newOutbox(3, nil)
	a := o.addPeer("a")
	o.setUp(a, true)
	for i := range 2 {
		o.addReliable([]byte(fmt.Sprint("r", i)), nil)
	}
	o.addBestEffort([]byte("be"))
	seqs, msgs := takeAll(o, a)
	if fmt.Sprint(seqs, msgs) != "[0 1 2] [be r0 r1]" {
		t.Fatalf("first frame: %v %v", seqs, msgs)
	}
	o.sent(a, 7, 2)
	// The link drops before the confirmation: both reliable records are
	// due again, the best effort one is gone.
	o.setUp(a, false)
	o.setUp(a, true)
	if seqs, _ := takeAll(o, a); fmt.Sprint(seqs) != "[1 2]" {
		t.Fatalf("after a reconnect: %v, want the unconfirmed records again", seqs)
	}
	o.sent(a, 8, 2)
	if !o.confirm("a", a, 8) || o.stats(a).Backlog != 0 || len(o.entries) != 0 {
		t.Fatalf("after the confirmation: %+v, %d kept", o.stats(a), len(o.entries))
	}
	// Beyond max the oldest goes, counted for the peer that missed it.
	for i := range 5 {
		o.addReliable([]byte(fmt.Sprint("s", i)), nil)
	}
	if st := o.stats(a); st.Backlog != 3 || st.Dropped != 2 {
		t.Fatalf("over the bound: %+v, want backlog 3 and 2 dropped", st)
	}
	if _, msgs := takeAll(o, a); fmt.Sprint(msgs) != "[s2 s3 s4]" {
		t.Fatalf("kept %v, want the newest three", msgs)
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
	a, b := o.addPeer("a"), o.addPeer("b")
	done := make(chan error, 3)
	for i := range 3 {
		if !o.addReliable([]byte(fmt.Sprint("m", i)), func(err error) { done <- err }) {
			t.Fatal("a stored outbox did not wait for the store")
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	takeAll(o, a)
	o.sent(a, 1, 1) // a confirms the first record only
	o.confirm("a", a, 1)
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
	a, b = o.addPeer("a"), o.addPeer("b")
	if _, msgs := takeAll(o, a); fmt.Sprint(msgs) != "[m1 m2]" {
		t.Fatalf("a resumed with %v, want m1 m2", msgs)
	}
	if seqs, _ := takeAll(o, b); fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("b resumed with %v, want every record", seqs)
	}
	if o.head() != 3 {
		t.Fatalf("head %d after a reopen, want 3: numbers must go on, not restart", o.head())
	}
}
