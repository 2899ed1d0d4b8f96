// Package syntax is the front end of LoT, the Language of Things: it
// turns LoT source text into a syntax tree. It is pure: no broker, no I/O,
// no goroutines, no package state that changes; every function may be
// called from any goroutine.
//
// # API
//
//	Parse(name, src) (*File, error)     parse a source of one or more definitions
//	Lex(name, src) ([]Token, ErrorList) the tokens, for editors and tests
//	Inspect(node, func(Node) bool)      walk a tree
//	NewError(file, src, pos, hint, ...) an *Error with its source line (for the checker)
//	Closest(word, candidates)           the likely intended word, for "did you mean"
//	ParseTimeUnit, ParseTypeName        keyword helpers shared with the checker and drivers
//	Trigger.Interval, ConfigPair.Interval, TimeUnit.Duration  periods as time.Duration
//
// Parse returns a *File whose Defs are *Action, *Model, *Rule, *Connector
// (DEFINE CONNECTOR and its older name DEFINE ROUTE) and *UnsupportedDef
// (DEFINE PANEL, VISU, THEME, THING, AGENT: recognised so that the checker
// can refuse them by name). Every node has a Pos (line and column from 1,
// column in runes, and the byte offset). Every definition has a DefHeader
// with its kind, its name and its exact source text (Span, Text), so that
// a runtime can store and republish each definition separately.
//
// The error of Parse is an ErrorList of *Error{Pos, Msg, Hint, Line}.
// Error() is one line ("file:3:5: msg; hint"); Format() shows the source
// line with a caret under the column and the hint ("did you mean
// PUBLISH?", "end the trigger with DO: ON EVERY 10 SECONDS DO").
//
// Semantic checks (unknown callables and models, topic filters, intervals,
// unsupported features) are not here but in gantry/lot/check.
//
// # Lexical rules
//
// Keywords are recognised in any case and are contextual: a word is a
// keyword only where the grammar expects that keyword, so model fields and
// variables may be called "value" or "status". Comments are // and -- to
// the end of the line and /* ... */. Strings are "..." or '...' on one
// line; \" \' \\ \n \t are decoded and any other backslash is kept, so
// regular expressions need no doubling. Numbers are 42, 2.5 or 1e3;
// {name} is a variable.
//
// Indentation is significant, as in Python: a line indented deeper than
// the one before opens a block (INDENT), a shallower one closes blocks
// (DEDENT) and must line up with an outer level. Four spaces make a level;
// a tab counts as four columns, so one tab is one level. Inside ( ), [ ]
// and { }, and after a comma that ends a line, line breaks are ignored.
//
// The flat form of the command topic puts a whole definition on one line:
// statements follow DO, THEN, ELSE and LOOP on the same line, one after the
// other, and an inline block ends at the end of the line or at ELSE, CASE,
// DEFAULT, UNTIL or RETURN. For example
//
//	DEFINE ACTION X ON EVERY 10 SECONDS DO PUBLISH TOPIC "t" WITH "hi"
//	DEFINE ACTION Y ON TOPIC "a" DO IF PAYLOAD > 1 THEN PUBLISH TOPIC "b" WITH 1 ELSE PUBLISH TOPIC "c" WITH 0
//	DEFINE RULE B WITH PRIORITY 200 FOR Publish TO TOPIC "x/#" IF USER IS "bob" THEN DENY
//
// # Grammar choices
//
// Where the reference leaves room, the parser decides:
//
//   - GET TOPIC takes one operand, so GET TOPIC "count" + 1 adds 1 to the
//     value. A concatenated topic continues only across a '/'
//     (GET TOPIC "a/" + {x} + "/b"); parenthesise other computed topics.
//   - GET JSON <path> IN <source> AS T casts the result, not the source.
//   - IF ... THEN ... ELSE as a value needs its ELSE.
//   - ENDIF after an IF block is accepted and ignored; ELSE IF may be
//     written on one line or as ELSE with an indented IF.
//   - Connector blocks are read generically (ConfigBlock, ConfigPair,
//     ConfigValue) with ROUTE_CONFIG read as CONNECTOR_CONFIG and type S7
//     as SIEMENS_S7; drivers interpret the keys.
//
// # Robustness
//
// Parse never panics and never loops: every loop consumes a token, the
// number of token reads is bounded by a multiple of the input length,
// nesting is bounded (maxDepth), and it stops after maxErrors errors.
// After an error it skips the rest of the statement (its line and the
// block under it) or, in a header, the rest of the definition, so one
// mistake gives one error. FuzzLex and FuzzParse hold it to this.
package syntax
