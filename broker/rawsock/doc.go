// Package rawsock reads and writes TCP and Unix sockets with raw system
// calls on Linux, for the broker's connections and the benchmark's load
// generator: see Sock for why. Elsewhere New returns nil and callers keep
// net.Conn's Read and Write.
package rawsock
