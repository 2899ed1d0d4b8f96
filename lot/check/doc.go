// Package check is the semantic checker of LoT: it finds what parses but
// cannot run, before a definition is deployed. It is pure (no broker, no
// I/O) and safe for concurrent use; what is deployed comes in through Env,
// which the caller implements (the definitions store) and which check
// calls only during Check.
//
// # API
//
//	Source(name, src, env) (*syntax.File, []Diagnostic)  parse and check
//	Check(file, env) []Diagnostic                        check a parsed file
//	Env{Callable(name), Model(name)}                     what is deployed
//	Lister{CallableNames(), ModelNames()}                optional, for suggestions
//	CallableOf(action), ModelOf(model, parent)           Env entries from parsed definitions
//	Deployed{Callables, Models}                          a map-backed Env
//	HasErrors(diags), Format(diags)
//	Scopes, Flags, SupportedTypes                        what rules and connectors accept
//
// Source runs the semantic checks only on a source without syntax errors;
// with syntax errors it returns those alone, so one mistake does not cause
// a cascade of follow-on diagnostics.
//
// A Diagnostic has a position (line, column), a Severity (Error refuses the
// source, Warning does not), a message, a hint ("did you mean Average2?")
// and the offending source line; Format shows the line with a caret.
//
// # What is checked
//
// Actions: the topic filter of ON TOPIC, ON CHANGE and ON SUBSCRIBE
// (gantry/broker/topic.ValidateFilter), the interval of ON EVERY, the times
// of ON EVERY <day> AT and ON TIMESTAMP; PAYLOAD and TOPIC POSITION in an
// action no message starts; TOPIC POSITION below 1 or past the filter's
// levels; topic names of PUBLISH, KEEP and GET TOPIC (ValidateName, no
// wildcards in literal parts); CALL ACTION against the callee (unknown
// callable, argument names that are not its INPUTs, missing INPUTs, RETURN
// count against OUTPUT count, self-calls); PUBLISH MODEL against the
// model's fields; variables read but never set; bare words that are not
// values (most often misspelt keywords); regular expressions; unsupported
// statements (CALL PYTHON, CALL LLM/MCP/AGENT).
//
// Models: topic filters, FROM parents and cycles, duplicate fields, AS
// TRIGGER without a topic, field expressions naming unknown fields, a
// model that can never publish (warning), database STORE/FETCH.
//
// Rules: the scope, TO TOPIC only on topic scopes, the topic filter,
// permission flags (warning), regular expressions, values a rule cannot
// see (PAYLOAD, variables).
//
// Connectors: the type (MQTT_BRIDGE, MODBUS_TCP, MODBUS_SERIAL,
// SIEMENS_S7 alias S7, OPCUA; anything else is "not supported"), the
// config block the type needs, blocks that do not belong, CONNECTOR_CONFIG
// (alias ROUTE_CONFIG) strictly (CLUSTER_NODE, OVERLOAD_*), keys set
// twice, *_TOPIC filters and WITH EVERY intervals. Driver-specific keys
// are left to the drivers.
//
// Panels, themes, things and agents are refused as not supported.
package check
