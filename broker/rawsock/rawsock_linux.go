//go:build linux

package rawsock

import (
	"io"
	"net"
	"syscall"
)

// Sock reads and writes a TCP or Unix socket with raw system calls
// through its syscall.RawConn, waiting for readiness in the runtime's
// poller as net.Conn does, with the same deadlines.
//
// A read or write of a non-blocking socket never blocks, so it need not
// tell the scheduler that it enters a system call, which net.Conn's
// syscall.Syscall does. That notice costs more than the call here: when
// the process was idle, the runtime's monitor thread sleeps and the next
// system call wakes it, after which it polls every 20 µs; and a socket
// write that lasts longer than that (a loopback write runs the
// receiver's TCP processing inline) has its P taken away and handed to
// another thread. A broker that goes idle between messages, as every
// broker does below saturation, paid about a quarter of its CPU time at
// 20,000 messages/s in these wake-ups and hand-offs: with raw calls, its
// context switches fell from 14,000/s to 4,000/s and its CPU time by 27 %
// (perf stat, latency scenario of build/bench, QoS 1, 1 KB).
//
// A Sock may be read by one goroutine while another writes; concurrent
// reads (or writes) are not allowed, so each side's call state can live
// in the Sock.
type Sock struct {
	rc syscall.RawConn

	// The arguments and results of the read and write in progress: the
	// functions given to rc are method values made once, so that a call
	// does not allocate a closure.
	rp     []byte
	rn     int
	rerrno syscall.Errno
	readFn func(uintptr) bool

	wp      []byte
	wn      int
	werrno  syscall.Errno
	noWait  bool // TryWrite: return when the socket takes no more
	writeFn func(uintptr) bool
}

// New returns a Sock for nc, or nil when nc is not a TCP or Unix socket.
// The Sock reads and writes nc's descriptor: nc keeps its deadlines and
// closes it.
func New(nc net.Conn) *Sock {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &Sock{rc: rc}
	s.readFn, s.writeFn = s.read, s.write
	return s
}

func (s *Sock) read(fd uintptr) bool {
	for {
		n, e := sysRead(fd, s.rp)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until readable
		}
		s.rn, s.rerrno = int(n), e
		return true
	}
}

// Read reads into p as net.Conn's Read does.
func (s *Sock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rp, s.rn, s.rerrno = p, 0, 0
	err := s.rc.Read(s.readFn)
	s.rp = nil
	switch {
	case err != nil:
		return 0, err
	case s.rerrno != 0:
		return 0, s.rerrno
	case s.rn == 0:
		return 0, io.EOF
	}
	return s.rn, nil
}

func (s *Sock) write(fd uintptr) bool {
	for s.wn < len(s.wp) {
		p := s.wp[s.wn:]
		n, e := sysWrite(fd, p)
		switch e {
		case 0:
			s.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return s.noWait // or wait until writable
		default:
			s.werrno = e
			return true
		}
	}
	return true
}

// Write writes p whole as net.Conn's Write does, or up to an error or
// the write deadline.
func (s *Sock) Write(p []byte) (int, error) {
	return s.writeWait(p, false)
}

// TryWrite writes what the socket takes of p now, without waiting: n is
// less than len(p) without an error when its buffer is full.
func (s *Sock) TryWrite(p []byte) (n int, err error) {
	return s.writeWait(p, true)
}

func (s *Sock) writeWait(p []byte, noWait bool) (int, error) {
	s.wp, s.wn, s.werrno, s.noWait = p, 0, 0, noWait
	err := s.rc.Write(s.writeFn)
	s.wp = nil
	if err == nil && s.werrno != 0 {
		err = s.werrno
	}
	return s.wn, err
}
