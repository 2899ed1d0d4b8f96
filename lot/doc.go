// Package lot is the root of Gantry's LoT ("Language of Things") tree. It
// holds no code; each concern is its own package:
//
//   - lot/syntax: lexer, parser and AST of LoT source (DEFINE ACTION, MODEL,
//     RULE, CONNECTOR/ROUTE), both the indented and the flat one-line form.
//   - lot/check: semantic checks on the AST before a definition is deployed
//     (names, callable arity, model parents, connector config blocks).
//   - lot/command: the broker command interface on $SYS/Coreflux/Command:
//     parsing a payload into a typed command, dispatching it to handlers
//     and building the JSON reply published on $SYS/Coreflux/Command/Output.
//   - lot/defs: the definitions store. Changes (puts and deletes) are applied
//     all or nothing, versioned and announced in order; the local store
//     persists them under DataDir/lot, the cluster will commit them through
//     the Raft leader behind the same interface.
//   - lot/schedule: the timer scheduler behind ON EVERY and ON TIMESTAMP,
//     keyed by action name, with an injectable clock.
//   - lot/rules: the access-rule decision engine of DEFINE RULE, evaluated on
//     every connect, publish and subscribe.
//   - lot/topiccache: the last-value cache that GET TOPIC reads, fed by every
//     publish and by KEEP TOPIC.
//   - lot/interp: the interpreter: compiles actions and models from the AST
//     and runs them against a small Host (effects, topic state, environment,
//     callables, models), bounded in steps, loops, call depth and sizes.
//   - lot/runtime: the engine that wires the packages above to the broker:
//     deploys through check and compile into the store, triggers actions
//     from messages, timers and client events, enforces the rules, and
//     serves the command topic.
//
// Dependencies point one way: command, defs, schedule, rules and topiccache
// import neither syntax nor check; command uses defs' kinds, rules and
// topiccache use broker/topic for MQTT topic rules, and nothing else of the
// tree. The runtime and the appliance connect them.
package lot
