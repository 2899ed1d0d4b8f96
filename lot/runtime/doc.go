// Package runtime runs deployed LoT on one node: it keeps the compiled
// actions, models and rules of the definitions store, triggers actions from
// messages, timers and client events through the broker's in-process API,
// feeds the topic cache, enforces the access rules, and serves the command
// topic $SYS/Coreflux/Command.
//
// # Deploying
//
// A definition is parsed (lot/syntax), checked against what is deployed
// (lot/check) and compiled (lot/interp) before it reaches the definitions
// store (lot/defs): one that fails changes nothing, and a project load is
// one all-or-nothing change. The store announces every applied change in
// order (defs.Store.Watch); the engine then rebuilds its deployment — an
// immutable snapshot of compiled programs and trigger tables swapped
// atomically — reschedules timers (keyed by action name, so a redeploy of
// the same schedule keeps its phase), runs ON START of new or changed
// actions, compiles the rule set, and publishes each definition's source
// retained on $SYS/Coreflux/{Actions,Models,Rules,Connectors}/<name>.
// Connectors are stored and published; running them is the drivers' part.
//
// # Triggers
//
// One in-process client subscribed to '#' sees every message once, in
// routing order, on its own goroutine. Each message updates the topic
// cache, then runs the ON TOPIC and ON CHANGE actions and the AS TRIGGER
// models that match it. A message from a peer node only updates the cache
// (DESIGN.md: a peer message never triggers LoT); a retained message
// replayed when the client subscribes only seeds the cache. Actions run
// one at a time on that goroutine, so a topic's messages are handled in
// order; a run is bounded by the interpreter's step and loop limits.
//
// A publish made by an action carries Hops one more than the message that
// triggered it; at Options.HopLimit the publish is refused and the loop
// reported on $SYS/Coreflux/Actions/<name>/Error. Runtime errors stop that
// run only, are counted, and are published retained on the same topic.
//
// Client events (ON CONNECT, ON DISCONNECT, ON SUBSCRIBE) arrive through
// the broker's Observer, which must not block: they are queued to the
// engine's event goroutine (a full queue drops and counts them).
//
// # Concurrency
//
// The deployment is read through an atomic pointer by the message, event
// and timer goroutines; only the store's watch callback writes it, under
// Engine.mu, which also guards the timer keys and the error topics. Apply
// on the store is serialised by the store itself. Timers run on the
// scheduler's goroutines; several actions may run concurrently, each with
// its own interpreter state.
package runtime
