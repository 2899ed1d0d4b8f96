// Package command is the broker command interface of LOT.md §8: text
// commands published on $SYS/Coreflux/Command, replies published as JSON on
// $SYS/Coreflux/Command/Output.
//
// It owns the payload syntax (Parse), the typed Command, the reply envelope
// (Reply, ReplyError) and the Dispatcher that runs a command against small
// handler interfaces declared here (Entities, Runner, Users, Environment,
// Projects, Authorizer). It does not parse LoT: the -add* commands carry
// the source verbatim to Entities.Add, whose errors may point into it
// (Positioned, Suggester). Implementations are wired in by the appliance.
//
// # Payloads
//
//	-commandName <arguments> [-requestId <id>]
//
// The command name is matched ignoring case and dashes, so every command
// also has its --kebab-case spelling (--add-action). -addRoute,
// -removeRoute and -removeAllRoutes are aliases of the connector commands.
// Arguments are quote-aware tokens with the quotes stripped, except:
//
//   - -addAction, -addModel, -addRule, -addConnector take LoT source, one
//     definition, multi-line or in the flat one-line form, kept verbatim
//     (the first DEFINE line must match the command);
//   - -runAction NAME [json]: the JSON is the rest of the payload;
//   - -setEnv and -setSecret take NAME=value (or NAME value), the value
//     being the rest of the payload.
//
// -requestId <id> (also --request-id, -requestId=<id>) is accepted right
// after the command name or as the last two words of the payload, which is
// where clients append it, even after multi-line LoT source; at the end it
// is ignored when it sits inside a double-quoted LoT string.
//
// Commands of the reference that Gantry does not implement are recognised
// and refused with the reason (Python, panels and themes are not
// supported; others are not implemented yet). An unknown command gets
// "Unknown command: -x" with close matches.
//
// # Replies
//
// Every command but -updateData gets one Reply: success, command (the
// command name in PascalCase, "AddRoute"), requestId, message, entityType
// and entityName, data (always present) and, on failure, errors with line,
// column, sourceLines and suggestions for LoT errors. The messages keep the
// sentences of older brokers ("User op added successfully!", "Removed all
// models successfully", "... not found") for clients that match
// substrings. A command the Authorizer refuses gets "Permission denied: You
// are not allowed to execute -x". Passwords and secret values are never
// echoed, in replies or in Command.String.
//
// # Concurrency
//
// Parse is a pure function. A Dispatcher holds no mutable state and may be
// used from any number of goroutines; it calls the handlers on the calling
// goroutine, so handlers must be safe for concurrent use if Dispatch is
// called concurrently. A panicking handler is recovered, logged and
// reported as an internal error.
package command
