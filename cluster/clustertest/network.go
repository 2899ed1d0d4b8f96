package clustertest

import (
	"context"
	"net"
	"os"
	"sync"
	"time"
)

// Network is loopback TCP with faults: every node has its own address
// (127.x.y.z), and traffic between two addresses can be cut. A cut
// connection does not reset: reads and writes stall until the cut heals or
// their deadline passes, as with a peer that froze or a cable that was
// pulled.
type Network struct {
	mu      sync.Mutex
	cut     map[[2]string]bool // unordered pair of IPs → traffic between them stalls
	changed chan struct{}      // closed and replaced on every change
}

// NewNetwork returns a network without faults.
func NewNetwork() *Network {
	return &Network{cut: map[[2]string]bool{}, changed: make(chan struct{})}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut stops traffic between a and b (IPs) until Mend.
func (nw *Network) Cut(a, b string) { nw.set(pair(a, b), true) }

// Mend lets traffic between a and b flow again.
func (nw *Network) Mend(a, b string) { nw.set(pair(a, b), false) }

// MendAll removes every fault.
func (nw *Network) MendAll() {
	nw.mu.Lock()
	clear(nw.cut)
	close(nw.changed)
	nw.changed = make(chan struct{})
	nw.mu.Unlock()
}

func (nw *Network) set(p [2]string, cut bool) {
	nw.mu.Lock()
	if cut {
		nw.cut[p] = true
	} else {
		delete(nw.cut, p)
	}
	close(nw.changed)
	nw.changed = make(chan struct{})
	nw.mu.Unlock()
}

// blocked reports whether a and b are cut, and a channel closed at the
// next change.
func (nw *Network) blocked(a, b string) (bool, <-chan struct{}) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.cut[pair(a, b)], nw.changed
}

// wait blocks while a and b are cut, until deadline (zero: none) or done.
// It returns os.ErrDeadlineExceeded when the deadline passed first.
func (nw *Network) wait(a, b string, deadline time.Time, done <-chan struct{}) error {
	for {
		cut, changed := nw.blocked(a, b)
		if !cut {
			return nil
		}
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return os.ErrDeadlineExceeded
		case <-done:
			return net.ErrClosed
		}
	}
}

// Listen listens on addr ("ip:port"); accepted connections are subject to
// faults between ip and the dialer's address.
func (nw *Network) Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &faultListener{Listener: l, nw: nw}, nil
}

// Dialer returns a dial function for the node at ip: it dials from ip, so
// the other side knows who is calling.
func (nw *Network) Dialer(ip string) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return nw.DialContext(ctx, ip, addr)
	}
}

// DialContext dials addr from ip; a cut stalls it until ctx ends.
func (nw *Network) DialContext(ctx context.Context, ip, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	deadline, _ := ctx.Deadline()
	if err := nw.wait(ip, host, deadline, ctx.Done()); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newFaultConn(c, nw, ip, host), nil
}

type faultListener struct {
	net.Listener
	nw *Network
}

func (l *faultListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	local, _, _ := net.SplitHostPort(c.LocalAddr().String())
	remote, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return newFaultConn(c, l.nw, local, remote), nil
}

// faultConn stalls its reads and writes while its two ends are cut.
type faultConn struct {
	net.Conn
	nw          *Network
	local, peer string
	closed      chan struct{}
	closeOnce   sync.Once
	mu          sync.Mutex // guards rd, wd
	rd, wd      time.Time  // deadlines, as set by the user of the conn
}

func newFaultConn(c net.Conn, nw *Network, local, peer string) *faultConn {
	return &faultConn{Conn: c, nw: nw, local: local, peer: peer, closed: make(chan struct{})}
}

func (c *faultConn) deadlines() (time.Time, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rd, c.wd
}

func (c *faultConn) Read(p []byte) (int, error) {
	rd, _ := c.deadlines()
	if err := c.nw.wait(c.local, c.peer, rd, c.closed); err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: err}
	}
	return c.Conn.Read(p)
}

func (c *faultConn) Write(p []byte) (int, error) {
	_, wd := c.deadlines()
	if err := c.nw.wait(c.local, c.peer, wd, c.closed); err != nil {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: err}
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *faultConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd, c.wd = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}
