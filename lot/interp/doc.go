// Package interp executes LoT actions and evaluates LoT models over the
// syntax tree of gantry/lot/syntax (LOT.md §2–§5). It is pure Go: it
// imports no broker package, starts no goroutine and does no I/O; what a
// run reads and does goes through small interfaces of the Host that the
// runtime (gantry/lot/runtime) implements.
//
// # API
//
//	Compile(action, opts) (*Program, error)        compile an action once
//	(*Program).Run(host, event) error               one execution
//	(*Program).Call(host, inputs) (outputs, error)  a callable, by INPUT name (-runAction)
//	CompileModel(model, models, opts) (*Model, error)
//	(*Model).Triggers(), Sources()                  topic filters the runtime follows
//	(*Model).Instance(topic) (Instance, bool)       which instance a trigger message publishes
//	(*Model).Evaluate(host, instance) ([]byte, error)  the JSON to publish on Instance.Topic
//	(*Model).Explode(topic, payload, emit) error    JSON on a model topic, key by key
//	Host{Effects, Topics, Env, Callables, Models}   what a run may use
//	Event{Topic, Payload, Session}                  what started a run
//	Value, Cast, Equal, Truthy, ParseJSON, Members  the dynamic values of LoT
//	Options, DefaultOptions()                       limits, clock, time zone, random source
//
// # Execution
//
// Compile resolves every variable to a slot, prepares literal topics,
// JSON paths, TIMESTAMP formats and regular expressions (a FILTER with a
// computed pattern caches its last compilation per node), and turns the
// AST into closures, so a run walks no AST and allocates only for the
// values it builds (a concatenated topic, a payload handed to Effects).
// Runs are pooled. PUBLISH and KEEP call Host.Effects in statement order;
// to make GET TOPIC see this run's own writes first (LOT.md §4.5) the
// runtime backs Host.Effects and Host.Topics with the execution's
// topiccache.Frame and flushes it when Run returns.
//
// # Errors
//
// A runtime error (bad JSON, a failed cast, a division by zero, a LOOP
// over Options.MaxLoopIterations, more than Options.MaxSteps statements,
// CALL ACTION deeper than Options.MaxCallDepth, TOPIC POSITION without a
// message, a refused effect) stops that run only and is returned as an
// *Error naming the action or model, the line and column and what went
// wrong; errors.Is finds the sentinel (ErrDivisionByZero, ...). A run
// never panics: a panic in the interpreter or in a Host implementation is
// recovered and returned as ErrPanic. Every run is bounded in time
// (MaxSteps, MaxLoopIterations, MaxCallDepth, RE2 regular expressions) and
// in memory (MaxValueBytes), whatever the program and the payload.
//
// # Values
//
// A Value is EMPTY, a string, an int, a double, a bool, null or JSON
// (objects and arrays as JSON text), or PAYLOAD AS BYTES. Payloads and
// topic values are strings; a string that reads as a number behaves as a
// number in arithmetic and comparison, so PAYLOAD + 1 on "10" is 11 and
// "T=" + PAYLOAD concatenates. EMPTY and null are 0 next to a number
// (GET TOPIC "count" + 1 on a fresh broker is 1) but equal only to EMPTY,
// null and "". / always divides exactly; ints overflow into doubles.
// Numbers are published in their shortest form (42, 21.5, 95). See Cast
// for the casts and Truthy for what IF considers true.
//
// # Decisions where LOT.md leaves room
//
//   - TOPIC POSITION n is 1-based over all levels; past the last level it
//     is EMPTY (§3.6); without a message, or with n not a whole number
//     from 1, it is a runtime error (a literal n below 1 a compile error).
//   - GET JSON on a missing key or JSON null is null, which AS
//     BOOL/INT/DOUBLE read as false/0/0.0 and AS STRING as "null"; GET
//     JSON on EMPTY is null; on text that is not JSON it is an error.
//     Paths are dotted; "items.0.name" and "items[0].name" index arrays.
//   - FILTER gives the first match of the whole pattern; with no match
//     the PUBLISH or KEEP whose value it computes is skipped, also when a
//     transform after it (AND_THEN TRIM) made empty text of it. A FILTER
//     without source reads PAYLOAD.
//   - PUBLISH TOPIC is never retained and QoS 0 (the grammar has no
//     variant); PUBLISH MODEL uses the model's RETAIN (KEEP counts as
//     RETAIN) and QoS; a zero-length payload reads as EMPTY.
//   - Models: a field without value, or whose topic was never written,
//     is null; typed fields are cast (a failed cast is an error of the
//     model); untyped fields turn numeric and boolean text into numbers
//     and booleans; ADD ARRAY is a JSON array of its item fields' values;
//     ADD COLLECTION is [] unless PUBLISH MODEL assigns it. Wildcard
//     values bind by order of appearance.
//   - CALL ACTION runs the callee without the caller's message; its
//     errors are wrapped by the caller's ("CALL ACTION X: action X at
//     ...").
//   - Custom TIMESTAMP patterns use Options.Location (default local
//     time); the built-in formats are UTC.
//
// # Concurrency
//
// A Program and a Model are immutable after compilation and safe for
// concurrent use: any number of goroutines may run the same program at
// once, each run with its own variables; the only shared mutable state is
// the per-node regular expression cache of FILTER with a computed
// pattern, an atomic pointer. A run calls its Host's interfaces only from
// the goroutine that called Run, Call or Evaluate, and only during that
// call. Options.Random must be safe for concurrent use.
//
// Payloads in an Event and values returned by Host.Topics are read without
// copying, and strings computed from them (a TOPIC POSITION, a FILTER
// match, a topic handed to Effects) may share their memory after the run:
// they must never be modified, which the broker's messages and the topic
// cache already guarantee for their whole life. Payloads handed to Effects
// are new slices.
package interp
