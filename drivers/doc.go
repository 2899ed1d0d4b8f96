// Package drivers holds what every device connector shares: the Device
// interface each protocol implements (open, read a batch of tags, write a
// tag, close), the parse of a deployed DEFINE CONNECTOR's common settings
// (mappings, tags, data types, byte and word order, scaling, deadband;
// LOT.md §7.5), and the pure codec between a tag's device bytes and its
// engineering value.
//
// The tree:
//
//	drivers          this package: Spec, Tag, Value, Device, Settings
//	drivers/modbus   Modbus TCP and RTU (goburrow/modbus framing over transports of its own)
//	drivers/engine   the poller, the status topics, and the Manager that runs deployed connectors
//
// # Settings
//
// Settings reads a block strictly: a key no one reads is an error, and
// every problem names the block, the key, the value and its line and
// column, so that a deploy is refused with all of them at once. GET ENV
// and GET SECRET values are resolved through Env.
//
// # Values
//
// A tag's bytes come as the device holds them: Modbus registers in wire
// order (big-endian each), an S7 area's bytes. BYTE_ORDER LITTLE swaps the
// bytes of each 16-bit word, WORD_ORDER LITTLE puts the low word first
// (ABCD, CDAB, BADC, DCBA are accepted too). A number read is published as
// raw*SCALING+OFFSET in its shortest form; a write is reverse-scaled,
// rounded for integers, and refused outside MIN_VALUE..MAX_VALUE or the
// type's range.
//
// Nothing here does I/O or keeps state: Spec and Tag are immutable once
// parsed and safe to share between goroutines.
package drivers
