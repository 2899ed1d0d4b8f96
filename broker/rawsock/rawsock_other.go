//go:build !linux

package rawsock

import "net"

// Sock is Linux only: elsewhere callers use net.Conn's Read and Write.
type Sock struct{ net.Conn }

// TryWrite is never called: New returns no Sock.
func (s *Sock) TryWrite(p []byte) (int, error) { return s.Write(p) }

// New returns nil: raw sockets are Linux only.
func New(net.Conn) *Sock { return nil }
