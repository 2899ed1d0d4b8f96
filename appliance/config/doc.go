// Package config owns the configuration of a Gantry node: the JSON file,
// the COREFLUX_* environment variables, the built-in defaults, their
// validation, and the operator's reference docs/configuration.md.
//
// # One description per field
//
// Every setting is a field of Config or of one of its sections (Mqtt, Ops,
// Logging, Durability, Cluster), and is described once, by its struct tags:
// the JSON key (always the Go field name), the environment variable, the
// default or the field it is derived from, the range or allowed values and
// the description (see schema.go for the list of tags). Default, Load,
// Validate and Markdown all read those tags, so a default is written in one
// place and the documentation cannot drift from the code. The Cluster and
// Durability sections follow the Coreflux configuration reference field by
// field, names, defaults, ranges and variables included.
//
// # Loading
//
// Load applies, in order: the defaults, the file, the environment, the
// derived defaults (host name, "same as" fields), then Validate. Decoding is
// strict: keys are matched exactly (case-sensitively, unlike encoding/json),
// unknown and repeated keys are errors, values must have the field's JSON
// type, and every problem is collected and returned together as an *Error,
// one line per problem, naming the field (or variable), the value and what
// was wanted. Checks that involve several fields are the rules listed in
// rules.go; settings that are valid but worth a log line are Warnings.
//
// The environment is injected as a lookup function, so that tests need no
// process-wide state; production passes os.LookupEnv.
//
// # Invariants and concurrency
//
// A Config returned by Default, Dev, LoadDev or Load without error is valid
// and has every derived field filled in, except that problems in the Cluster
// section do not make Load fail: they are kept in ClusterProblems, and the
// node runs without clustering. Config is a plain value: copy it,
// compare it, read it from any goroutine; the package keeps no mutable
// state. The schema read from the tags is built once, at package
// initialisation, and panics on a malformed tag, which any test catches.
//
// The package owns no listener, file or goroutine: it does not check that
// files exist or ports are free; the parts that open them report that.
package config
