// Package s7 is the Siemens S7 device of the connectors (SIEMENS_S7), on
// github.com/robinson/gos7.
//
// Each Open makes a new gos7 handler with no idle timeout: gos7 never
// redials a handler whose Connect failed, and after its idle timeout
// every call fails. gos7 never checks the PDU reference, so a timed-out
// request's late reply would be read as the next one's: any error but the
// PLC's own refusals ("CPU : ...", a missing DB, an offset out of range)
// closes the connection, and the engine redials.
//
// Read merges tags of one DB or area within MAX_GAP bytes into one
// request (AGReadDB, AGReadMB, AGReadEB, AGReadAB; gos7 splits those
// longer than a PDU). A request the PLC refuses is split into one per tag
// for the life of the connection. The multi-item calls are not used: gos7
// prints their telegrams to stdout.
//
// A Device is used by the connector's goroutine only; Close waits for a
// request in progress (gos7 holds its lock), at most READ_TIMEOUT.
package s7
