package cluster

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is the Raft TCP stream: it listens on the bind address and
// advertises a host:port that may be a name (AdvertisedHost defaults to
// NodeName), which raft.NewTCPTransport cannot do.
type streamLayer struct {
	net.Listener
	mu        sync.RWMutex // guards advertise
	advertise advertisedAddr
	dial      func(addr string, timeout time.Duration) (net.Conn, error)
}

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// newStreamLayer listens on bind through listen (nil: TCP). An advertised
// port 0 means the port bound.
func newStreamLayer(bind, advertise string, listen func(string) (net.Listener, error),
	dial func(string, time.Duration) (net.Conn, error)) (*streamLayer, error) {
	if listen == nil {
		listen = func(a string) (net.Listener, error) { return net.Listen("tcp", a) }
	}
	if dial == nil {
		dial = func(a string, timeout time.Duration) (net.Conn, error) { return net.DialTimeout("tcp", a, timeout) }
	}
	l, err := listen(bind)
	if err != nil {
		return nil, err
	}
	if host, port, err := net.SplitHostPort(advertise); err == nil && port == "0" {
		_, bound, _ := net.SplitHostPort(l.Addr().String())
		advertise = net.JoinHostPort(host, bound)
	}
	return &streamLayer{Listener: l, advertise: advertisedAddr(advertise), dial: dial}, nil
}

// Addr is the advertised address: raft writes it into the configuration
// entries that tell the other nodes how to reach this one.
func (s *streamLayer) Addr() net.Addr {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.advertise
}

func (s *streamLayer) setAdvertise(addr string) {
	s.mu.Lock()
	s.advertise = advertisedAddr(addr)
	s.mu.Unlock()
}

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(string(address), timeout)
}
