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

// addressBook answers hashicorp/raft's question "where is server ID?" with
// the newest address this node has seen for that name, so a node that
// moved is reached at its new address even before the configuration
// records the move: identity is the NodeName, never the address.
type addressBook struct {
	mu    sync.RWMutex                         // guards addrs
	addrs map[raft.ServerID]raft.ServerAddress // newest address seen per name
}

func newAddressBook() *addressBook {
	return &addressBook{addrs: map[raft.ServerID]raft.ServerAddress{}}
}

// ServerAddr implements raft.ServerAddressProvider. An unknown ID returns
// an error, and raft falls back to the address in its configuration.
func (b *addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if a, ok := b.addrs[id]; ok {
		return a, nil
	}
	return "", errUnknownServer
}

// learn records addr as the address of id, and forgets it for any other
// name that held it before (a node restarted on another node's old address).
func (b *addressBook) learn(id raft.ServerID, addr raft.ServerAddress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for other, a := range b.addrs {
		if a == addr && other != id {
			delete(b.addrs, other)
		}
	}
	b.addrs[id] = addr
}
