//go:build linux && !386

package load

import (
	"context"
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// stampReader reads a TCP socket with recvmsg and keeps the kernel's
// receive timestamp (SO_TIMESTAMPNS) of the data it read: when the
// broker's write put it into the subscriber's socket. A subscriber
// measures latency to that moment, not to when its goroutine got to run:
// the generator is one Go process on one core, whose scheduler runs the
// goroutines a poll made ready last first, and that read lag was up to
// half of both brokers' p99.
type stampReader struct {
	rc     syscall.RawConn
	p      []byte
	n      int
	errno  syscall.Errno
	wallNs int64 // receive timestamp of the last skb read, Unix ns (0: none)
	fn     func(uintptr) bool
	oob    [64]byte
}

// newStampReader returns a reader of nc's socket with receive timestamps
// on, or nil when nc is no TCP connection or the option cannot be set.
func newStampReader(nc net.Conn) *stampReader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return nil
	}
	s := &stampReader{rc: rc}
	s.fn = s.read
	return s
}

func (s *stampReader) read(fd uintptr) bool {
	iov := syscall.Iovec{Base: &s.p[0]}
	iov.SetLen(len(s.p))
	msg := syscall.Msghdr{Iov: &iov, Iovlen: 1, Control: &s.oob[0]}
	msg.SetControllen(len(s.oob))
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), 0)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until readable
		}
		s.n, s.errno = int(n), e
		s.wallNs = 0
		if e == 0 && int(msg.Controllen) >= syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))) {
			h := (*syscall.Cmsghdr)(unsafe.Pointer(&s.oob[0]))
			if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS {
				s.wallNs = (*syscall.Timespec)(unsafe.Pointer(&s.oob[syscall.CmsgLen(0)])).Nano()
			}
		}
		return true
	}
}

// Read reads into p as net.Conn's Read does.
func (s *stampReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.p, s.n, s.errno = p, 0, 0
	err := s.rc.Read(s.fn)
	s.p = nil
	switch {
	case err != nil:
		return 0, err
	case s.errno != 0:
		return 0, s.errno
	case s.n == 0:
		return 0, io.EOF
	}
	return s.n, nil
}

// received returns the kernel's receive timestamp of the last read, in
// Unix ns, and whether there was one.
func (s *stampReader) received() (int64, bool) { return s.wallNs, s.wallNs != 0 }

// stampsTimeout bounds awaitStamps: a kernel that has not timestamped a
// loopback byte by then is taken not to timestamp at all.
const stampsTimeout = 5 * time.Second

// awaitStamps returns once the kernel timestamps the data sockets
// receive, after stampsTimeout, or when ctx ends, and reports whether it
// saw a timestamp. Setting SO_TIMESTAMPNS does not make the next data
// stamped: when no socket on the machine had asked for receive
// timestamps, the first that asks turns them on for all of them from a
// deferred work item, which a loaded machine ran up to 440 ms late, and
// until then data arrives without one. A paced run calls it after its
// subscribers set the option (they keep timestamps on) and before it
// measures; else a short window's reads all came unstamped, timed when
// read, read lag included. It sends a byte to itself over loopback,
// since the switch is one for every interface.
func awaitStamps(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, stampsTimeout)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false // no loopback here: nothing to tell by
	}
	defer l.Close()
	var d net.Dialer
	w, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		return false
	}
	defer w.Close()
	r, err := l.Accept()
	if err != nil {
		return false
	}
	defer r.Close()
	deadline, _ := ctx.Deadline()
	r.SetReadDeadline(deadline)
	s := newStampReader(r)
	if s == nil {
		return false
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b := []byte{0}
	for {
		if _, err := w.Write(b); err != nil {
			return false
		}
		if _, err := s.Read(b); err != nil {
			return false
		}
		if _, ok := s.received(); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C: // the work item has not run yet
		}
	}
}
