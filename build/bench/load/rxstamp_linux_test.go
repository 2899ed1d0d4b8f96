//go:build linux && !386

package load

import (
	"net"
	"testing"
	"time"
)

// The timestamp of a read is when the data reached the socket, not when
// it was read: data left unread for 50 ms is read with a timestamp that
// old.
func TestStampReaderGivesArrivalTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := newStampReader(r)
	if s == nil {
		t.Fatal("no receive timestamps on a TCP socket")
	}
	buf := make([]byte, 16)
	// The kernel turns receive timestamps on for the first socket that
	// asks a moment later (a deferred work item): until then, reads come
	// without one.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(buf); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.received(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no read came with a receive timestamp")
		}
	}
	sent := time.Now()
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	const held = 50 * time.Millisecond
	time.Sleep(held) // the data waits in the socket: what is measured
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	readAt := time.Now()
	k, ok := s.received()
	if !ok {
		t.Fatal("read without a receive timestamp")
	}
	at := time.Unix(0, k)
	if at.Before(sent.Add(-time.Millisecond)) || readAt.Sub(at) < held-time.Millisecond {
		t.Fatalf("receive timestamp %v after the write and %v before the read; want the write's time (held %v)", at.Sub(sent), readAt.Sub(at), held)
	}
}
