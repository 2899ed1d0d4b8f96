package broker_test

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gantry/broker"
	"gantry/broker/packet"
)

// TestDeliveriesOfOneRoundLeaveInArrivalOrder: on one P, the publishes of
// ten publishers that became readable together reach their ten
// subscribers in the order they arrived. Go's poller makes their readers
// ready newest first, and readers that wrote their deliveries at once
// delivered them in reverse (see conn.sendDeferred). The test goroutine
// writes to the ten publishers' sockets without letting the scheduler
// poll in between, so that the broker finds them readable in one poll,
// and the order of the deliveries is read from the kernel's receive
// timestamps of the subscribers' sockets.
func TestDeliveriesOfOneRoundLeaveInArrivalOrder(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows the writes enough for the scheduler to poll between them; make test runs this test without -race")
	}
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps (SO_TIMESTAMPNS) are read the Linux way")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := startServer(t, broker.Options{})
	const n = 10
	pubs := make([]*rawClient, n)
	subs := make([]*stampedConn, n)
	pkts := make([][]byte, n)
	for i := range n {
		c, _ := connectRaw(t, s.addr, v5Connect(fmt.Sprintf("order-sub-%d", i)))
		c.subscribe(1, 0, sub(fmt.Sprintf("order/%d", i), 0))
		subs[i] = newStampedConn(t, c.nc)
		pubs[i], _ = connectRaw(t, s.addr, v5Connect(fmt.Sprintf("order-pub-%d", i)))
		pkts[i] = pubs[i].encode(nil, &packet.Publish{Topic: []byte(fmt.Sprintf("order/%d", i)), Payload: []byte{byte(i)}})
	}
	round := func() (stamps []int64) {
		for i := range pubs {
			if _, err := pubs[i].nc.Write(pkts[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range subs {
			stamps = append(stamps, c.readStamp(t))
		}
		return stamps
	}
	// The kernel turns receive timestamps on a moment after the first
	// socket asks (a deferred work item).
	for deadline := time.Now().Add(5 * time.Second); ; {
		stamps := round()
		if !slices.Contains(stamps, 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no receive timestamps")
		}
	}
	const rounds = 20
	inOrder := 0
	for range rounds {
		stamps := round()
		ordered := true
		for i := 1; i < n; i++ {
			ordered = ordered && stamps[i] > stamps[i-1]
		}
		if ordered {
			inOrder++
		}
	}
	t.Logf("%d of %d rounds delivered in arrival order", inOrder, rounds)
	if inOrder < rounds/2 {
		t.Fatalf("only %d of %d rounds delivered in arrival order", inOrder, rounds)
	}
}

// stampedConn reads a subscriber's socket with the kernel's receive
// timestamps.
type stampedConn struct {
	rc  syscall.RawConn
	buf [512]byte
	oob [64]byte
}

func newStampedConn(t *testing.T, nc net.Conn) *stampedConn {
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_TIMESTAMPNS: %v %v", err, serr)
	}
	return &stampedConn{rc: rc}
}

// readStamp reads what is there (one small PUBLISH) and returns its
// receive timestamp in Unix ns, 0 when the read came without one.
func (c *stampedConn) readStamp(t *testing.T) int64 {
	var stamp int64
	var rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err := syscall.Recvmsg(int(fd), c.buf[:], c.oob[:], 0)
		if err == syscall.EAGAIN {
			return false
		}
		if err != nil || n == 0 {
			rerr = fmt.Errorf("read: %d bytes, %v", n, err)
			return true
		}
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&c.oob[0]))
		if oobn >= syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))) && h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS {
			stamp = (*syscall.Timespec)(unsafe.Pointer(&c.oob[syscall.CmsgLen(0)])).Nano()
		}
		return true
	})
	if err != nil || rerr != nil {
		t.Fatalf("subscriber: %v %v", err, rerr)
	}
	return stamp
}
