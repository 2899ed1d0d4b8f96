//go:build linux

package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// Sock must behave as net.Conn's Read and Write do for the broker's
// reader and writer: data both ways, EOF, deadlines reported as timeouts
// (with a partial write counted), and a closed socket.
func TestBehavesAsNetConn(t *testing.T) {
	a, b := tcpPair(t)
	rs := New(a)
	if rs == nil {
		t.Fatal("no raw socket for a TCP connection")
	}

	// Write and read both ways, reads waiting for data that comes later.
	msg := []byte("hello over a raw socket")
	if n, err := rs.Write(msg); n != len(msg) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("peer read %q, %v", got, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // the read below must wait for readiness
		b.Write([]byte("late"))
	}()
	buf := make([]byte, 16)
	if n, err := rs.Read(buf); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}

	// A read deadline ends a waiting read with a timeout.
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := rs.Read(buf); !isTimeout(err) {
		t.Fatalf("Read past the deadline: %v, want a timeout", err)
	}
	a.SetReadDeadline(time.Time{})

	// A write to a peer that does not read stops at the deadline with
	// what the socket took counted.
	a.SetWriteBuffer(16 << 10)
	b.SetReadBuffer(16 << 10)
	big := make([]byte, 8<<20)
	a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := rs.Write(big)
	if !isTimeout(err) || n <= 0 || n >= len(big) {
		t.Fatalf("Write to a stalled peer = %d, %v; want part of it and a timeout", n, err)
	}
	a.SetWriteDeadline(time.Time{})

	// The peer drains and closes: the rest of the stream, then EOF.
	go func() {
		io.CopyN(io.Discard, b, int64(n))
		b.Close()
	}()
	if _, err := rs.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed: %v, want EOF", err)
	}

	// A closed socket fails as net.Conn does.
	a.Close()
	if _, err := rs.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read on a closed socket: %v, want net.ErrClosed", err)
	}
	if _, err := rs.Write(msg); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed socket: %v, want net.ErrClosed", err)
	}
}

// A read or write through a Sock allocates nothing: the functions given
// to the RawConn are made once.
func TestReadWriteDoNotAllocate(t *testing.T) {
	a, b := tcpPair(t)
	rs := New(a)
	msg, buf := []byte("x"), make([]byte, 1)
	allocs := testing.AllocsPerRun(200, func() {
		rs.Write(msg)
		b.Read(buf)
		b.Write(msg)
		rs.Read(buf)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round trip, want 0", allocs)
	}
}

// TryWrite takes what the socket takes now and returns at once when it is
// full, without an error and without waiting for the peer.
func TestTryWriteDoesNotWait(t *testing.T) {
	a, b := tcpPair(t)
	a.SetWriteBuffer(16 << 10)
	b.SetReadBuffer(16 << 10)
	rs := New(a)
	big := make([]byte, 8<<20)
	start := time.Now()
	n, err := rs.TryWrite(big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite to a peer that does not read = %d, %v; want part of it, no error", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("TryWrite waited %v", d)
	}
	// Once the peer drains, the rest goes with Write.
	go io.Copy(io.Discard, b)
	a.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if m, err := rs.Write(big[n:]); err != nil || m != len(big)-n {
		t.Fatalf("Write of the rest = %d, %v", m, err)
	}
}
