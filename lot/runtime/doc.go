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
// one all-or-nothing change. A change is refused for the problems of what
// it puts, and for deployed definitions it would break (a callable whose
// INPUTs change under its callers); errors carry the line and column of
// the source as sent, which -add* stores verbatim.
//
// The store announces every applied change in order (defs.Store.Watch);
// the engine then rebuilds its deployment — an immutable snapshot of
// compiled programs and trigger tables swapped atomically — reschedules
// timers (keyed by action name, so a redeploy of the same schedule keeps
// its phase), runs ON START of new or changed actions (and of every action
// when the engine starts: ON START runs when the definition starts),
// compiles the rule set, and publishes each definition's source retained on
// $SYS/Coreflux/{Actions,Models,Rules,Connectors}/<name> (connectors also
// on $SYS/Coreflux/Routes/<name>) and each action's DESCRIPTION on
// $SYS/Coreflux/Actions/<name>/Description. Removal clears them.
// Connectors are stored and published, and handed to Options.Connectors
// (the drivers), which checks each before it is stored and runs them.
//
// A stored definition that does not build (stored by a version with other
// checks, or committed by a peer) is left out with what depends on it,
// logged and listed by -listEntities; the rest runs, the access rules
// first. It comes back when a change makes it build again.
//
// # Triggers
//
// One in-process client sees, once each, in routing order, on its own
// goroutine, the messages deployed LoT reacts to or reads: it subscribes
// to the trigger filters, the models' topics and every topic a GET TOPIC,
// TOPIC EXISTS or GET TOPIC ... IS names (watch.go), to '#' only when a
// GET TOPIC computes its topic, plus Options.Watch. A node without LoT
// subscribes to nothing, so its messages pay nothing for LoT. Each message
// updates the topic cache, then runs the ON TOPIC and ON CHANGE actions whose filter matches
// (found in a topic tree, run in deployment order), explodes JSON arriving
// on a model's topic into <topic>/<key>, and publishes the AS TRIGGER
// models it triggers. ON CHANGE compares with the previous payload of the
// same topic in a memory of its own (the cache also holds KEEP TOPIC
// values). A message from a peer node only updates the cache (DESIGN.md: a
// peer message never triggers LoT); a retained message replayed when the
// client subscribes only seeds the cache. Actions run one at a time on
// that goroutine, so a topic's messages are handled in order; a run is
// bounded by the interpreter's step and loop limits.
//
// What a run publishes is buffered (topiccache.Frame, so GET TOPIC sees
// the run's own writes) and flushed when it ends: each message is written
// to the cache before it is routed, so the next run reads it even before
// the trigger goroutine sees it come back. It carries Hops one more than
// the message that triggered it; at Options.HopLimit the publish is
// refused and the loop reported on $SYS/Coreflux/Actions/<name>/Error.
// Runtime errors stop that run only, are counted, and are published
// retained on the same topic until the action's next good run.
//
// Client events (ON CONNECT, ON DISCONNECT, ON SUBSCRIBE) arrive through
// the broker's Observer, which must not block: they are queued to the
// engine's event goroutine (a full queue drops and counts them); events of
// the node's own in-process clients, and all events while no session
// action is deployed, are not queued.
//
// A run buffers at most 1,000 messages and 4 MiB (ErrRunWrites). ON
// CHANGE remembers a 16-byte hash per topic, for at most 100,000 topics.
// Deploys are serialised (check and apply as one step); -loadProject reads
// only below Options.ProjectsDir.
//
// # In a cluster
//
// Options.Placement says where the work that runs in one place runs: a
// timer fires only where RunsHere says so (asked at every tick), and ON
// START actions are not run at deploy but by the placement, on their
// owner, through RunStart (with the code version Work reports, so that a
// run claimed for one version never runs another). Options.KeptOut is
// told every value KEEP TOPIC kept here; MergeKept takes another node's
// into the cache (later write wins), where it reaches no subscriber and
// triggers nothing. A definitions store that commits elsewhere may refuse
// a change with defs.ErrConflict: the engine checks it again on the newer
// definitions (at most maxConflictRetries times).
//
// # Access
//
// The engine is the broker's Authorizer: publish, subscribe and, as a
// broker.ConnectAuthorizer, connect (after the credentials, anonymous
// clients included); the command dispatcher asks it about the management
// scopes. Decisions use the deployed rules with the built-in ones
// (lot/rules). The users' administrator bit comes from Options.Users,
// which must answer without I/O: it runs on every publish.
//
// # Cost
//
// A message through the trigger path allocates only what it publishes: the
// run's event, host and effects are recycled (Engine.scratch), the
// matching actions are found in one walk of a topic tree. An access check
// does not allocate. See BenchmarkTriggerPath and BenchmarkAuthorizePublish.
//
// # Concurrency
//
// The deployment is read through an atomic pointer by the message, event,
// command and timer goroutines; only the store's watch callback writes
// it. Engine.mu guards the timer keys, the error and description records
// and the set of definitions that do not build; it is never held while
// calling the store, the broker or an action (only the scheduler's Set and
// Remove, which never wait for a run, are called under it). The watch
// callback runs with
// the store's apply lock held and takes Engine.mu briefly: lock order is
// store, then Engine.mu. The ON CHANGE memory and the matching buffer
// belong to the trigger goroutine. Timers run on the scheduler's
// goroutines; several actions may run concurrently, each with its own
// interpreter state. The environment store writes its file under its own
// write lock, taken before the lock GET ENV reads under.
package runtime
