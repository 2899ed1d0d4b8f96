// Package engine runs the deployed connectors of a node.
//
// # Lifecycle and the owner seam
//
// The LoT engine calls Manager.Check before a connector is stored (a
// connector whose settings do not build is refused, every problem named at
// its line and column) and Manager.Deploy with every stored connector
// after each change. Deploy starts new connectors, restarts those whose
// source changed, stops removed ones and clears their status. With
// Options.WaitForOwner (a cluster), a deployed connector runs only once
// Manager.Run says so; Manager.Stop stops it and removes its broker
// client, so that a write published on this node reaches only the owner.
// Until Run, and after Stop, an exclusive connector's status says Standby
// (another node runs it). Run and Stop are idempotent;
// Run returns at once, Stop returns when the device connection is closed,
// within about a second (a TCP request in progress is interrupted; a
// serial one ends within its READ_TIMEOUT).
//
// # A connector
//
// Each running connector has one goroutine that owns its device: it
// opens it, polls each mapping on its own grid (WITH EVERY; a poll that
// overruns skips the ticks it missed), performs queued writes between
// polls, and publishes values through the connector's in-process broker
// client. Any error that is not one tag's (a drivers.TagError) closes the
// device and redials after a backoff (MinBackoff doubling to MaxBackoff,
// with jitter); what a failed poll read is discarded, and values after a
// reconnect are published even when unchanged. A value is published every
// poll without DEADBAND, on change with DEADBAND 0, and on a change
// larger than the deadband otherwise.
//
// A publish to a writable tag's DESTINATION_TOPIC is parsed and checked
// on the broker client's goroutine (a bad value is refused there, never
// queued), queued (at most 64), written by the connector's goroutine, and
// answered on $SYS/Coreflux/Connectors/<name>/Writes/<tag> (retained JSON
// with ok and error); the tag's mapping is polled at once after a write.
// Retained messages replayed on subscribe are not writes.
//
// Status is published retained on $SYS/Coreflux/Connectors/<name>/status
// and $SYS/Coreflux/Routes/<name>/status on every change of connection
// state or tag errors and every StatusInterval: connection
// (Disconnected, Connecting, Connected, Reconnecting, Stopped, Invalid),
// health (Green, Yellow with failing tags, Red), counters, the last error
// and each failing tag's error. Snapshots serve /metrics. Repeating
// warnings are logged at most once per WarnEvery per connector.
//
// # Concurrency
//
// Manager.opMu serialises Deploy, Run, Stop and Close, so starts and
// stops happen in call order; Manager.mu guards the connector map and is
// never held while a connector stops. connector.mu guards its goroutine's
// cancel and done and its broker client; status.mu guards the status
// fields. Lock order: opMu, then Manager.mu or connector.mu, then
// status.mu. Counters are atomics.
package engine
