//go:build !linux

package broker

import "net"

// rawSock is Linux only: elsewhere connections use net.Conn's Read and
// Write.
type rawSock struct{ net.Conn }

func newRawSock(net.Conn) *rawSock { return nil }
