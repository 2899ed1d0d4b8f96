// Package defs is the LoT definitions store: the actions, models,
// connectors (alias routes) and rules deployed on the broker, as source
// text, with a version per applied change.
//
// # The interface
//
// Store is what the runtime and the command handlers use. A Change is a set
// of Deletes (one definition, or every definition of a kind) and Puts
// (kind, name, source) applied all or nothing: a project load is one
// Change. Apply returns an Applied: the version of the change and one Event
// per definition it touched (Added, Replaced, Unchanged for a redeploy of
// the same source, Removed), removals first, then puts in load order of
// their kinds. Watch delivers every Applied in version order, with a
// snapshot to start from, so a runtime that watches misses nothing.
//
// Local is the single-node implementation. In a cluster the store commits
// through the Raft leader behind the same interface, and the version is
// the Raft index; Local.ApplyAt lets such an implementation persist a
// committed change with its index.
//
// Names are validated (ValidateName, LOT.md §1.2): letters, digits and
// '_', plus '-' and '.' after the first character, at most 128 bytes; the
// errors name the value. Sources are kept verbatim, must be valid UTF-8,
// not blank, and at most Options.MaxSourceBytes.
//
// # Files
//
// Local keeps its directory (DataDir/lot) as generations:
//
//	CURRENT                      names the live generation
//	gen-<version>/MANIFEST       version, and size and SHA-256 of each file
//	gen-<version>/<kind>/<name>.lot
//
// A change writes a complete new generation (files it does not change are
// hard links to the previous generation's), fsyncs it, renames it from
// gen-<version>.tmp, then replaces CURRENT by an fsynced rename and removes
// the previous generation. A crash at any point leaves CURRENT naming a
// complete generation, old or new: never a mix. OpenLocal loads the
// generation CURRENT names (the latest complete one if CURRENT is missing
// or damaged) and deletes the others. A file that is unreadable, blank, not
// valid UTF-8, absent from the manifest or different from it is skipped,
// never fatal; Problems lists each with its path, and they are logged.
//
// # Concurrency
//
// Local is safe for concurrent use. Lock order: applyMu, then mu or
// watchMu (never both). applyMu serialises Apply, ApplyAt and Watch and is
// held while watchers run, which gives watchers the changes one at a time
// and in order; mu (an RWMutex) guards the in-memory definitions and
// version, so Get, List and Version never wait for disk I/O; watchMu
// guards the watcher list, so a watcher may cancel itself. A watcher runs
// on the goroutine that called Apply, after the change is durable and
// visible to Get, and before Apply returns; it must not call Apply or
// Watch.
package defs
