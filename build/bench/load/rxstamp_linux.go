//go:build linux && !386

package load

import (
	"io"
	"net"
	"syscall"
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
