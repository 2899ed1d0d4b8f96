package broker

import (
	"net"
	"time"
)

// A connection the broker ends with a DISCONNECT may still have packets of
// the client unread in the kernel's receive queue. Closing such a socket
// makes Linux answer with a TCP reset instead of an orderly close, and a
// client that is still writing (answering PUBRECs, say) fails with
// "connection reset" or "broken pipe" before it reads the DISCONNECT, so it
// never learns why. So after the DISCONNECT the broker shuts its write side
// down (the client reads the packet, then end of stream), and reads and
// discards for at most lingerTime, or until the client closes, before it
// closes the socket.
//
// A lingering connection costs one goroutine and a 2 KiB stack buffer; at
// most lingerLimit linger at once, the others are closed at once, so a
// flood of misbehaving clients cannot pin more.

const (
	lingerTime  = time.Second
	lingerLimit = 256
)

// halfCloser is a connection whose write side can be shut down alone
// (*net.TCPConn, *tls.Conn).
type halfCloser interface {
	CloseWrite() error
}

// closeLingering closes nc after a DISCONNECT was written to it: at once
// when it cannot half-close or when lingerLimit connections linger
// already, otherwise on a tracked goroutine once the client has closed or
// lingerTime has passed.
func (s *Server) closeLingering(nc net.Conn) {
	hc, ok := nc.(halfCloser)
	if !ok {
		nc.Close()
		return
	}
	select {
	case s.lingering <- struct{}{}:
	default:
		nc.Close()
		return
	}
	if hc.CloseWrite() != nil {
		<-s.lingering
		nc.Close()
		return
	}
	s.goTracked(func() {
		defer func() { <-s.lingering }()
		drain(nc, time.Now().Add(lingerTime))
		nc.Close()
	})
}

// drain reads and discards until the peer closes, an error, or deadline.
func drain(nc net.Conn, deadline time.Time) {
	var buf [2048]byte
	nc.SetReadDeadline(deadline)
	for {
		if _, err := nc.Read(buf[:]); err != nil {
			return
		}
	}
}
