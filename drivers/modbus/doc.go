// Package modbus is the Modbus TCP and RTU (serial) device of the
// connectors: MODBUS_TCP and MODBUS_SERIAL.
//
// Requests are framed and checked by github.com/goburrow/modbus (its
// packagers: transaction id, unit id, CRC, exception codes) but carried by
// transports of this package, because goburrow's own keep a dead socket
// after a server restart, read a timed-out request's late reply as the
// answer to the next one, cannot be interrupted, and (RTU) mis-read an
// exception frame split across reads. The TCP transport reads a reply by
// its MBAP length and is closed by the request's context; the RTU
// transport reads a reply by its function code. Every error other than a
// Modbus exception is a connection error: the engine closes and redials,
// so no stale reply is ever decoded. A reply whose byte count does not
// match the request is a connection error too (goburrow does not check).
//
// Read merges tags of the same table whose registers are adjacent (or at
// most MAX_GAP apart) into one request of at most MAX_REGISTERS (125)
// registers or 2000 bits. A request the device refuses with an exception
// (a wrong address among its tags) is split into one request per tag for
// the life of the connection, so that only the wrong tag fails.
//
// Serial parameters are all explicit (goburrow/serial takes an empty
// parity for Even): PORT, BAUD_RATE (19200), DATA_BITS (8), PARITY (NONE),
// STOP_BITS (1).
//
// Server (MODBUS_SERVER) is the other direction: a Modbus TCP server, on
// github.com/simonvetter/modbus's, that answers reads from the current
// value of each tag (set by the engine from the tag's topic) and hands a
// client's write of a whole writable tag back as a value. Its handler runs
// on the library's goroutines; Server.mu guards the values.
//
// A Device is used by one goroutine at a time; Close may be called from
// the same goroutine only. A request in progress ends when its context
// does (TCP) or within READ_TIMEOUT (serial).
package modbus
