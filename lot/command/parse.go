package command

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"gantry/lot/defs"
)

// Command is a parsed command payload.
type Command struct {
	Verb Verb
	// Name is the command as the client named it: "-addRoute" for
	// -addRoute and --add-route alike (camelCase, one dash); for a command
	// that failed to parse, the first word of the payload as sent.
	Name      string
	RequestID string
	// Kind is the entity kind of entity verbs (add, remove, removeAll,
	// runAction); -addRoute and -addConnector are both defs.Connector.
	Kind defs.Kind
	// Source is the LoT text of -add* commands, verbatim but for the
	// surrounding blank space.
	Source string
	// Target is the entity, user, variable or secret name, or the project
	// of -loadProject. For -add* it is the name read from the DEFINE line,
	// a hint for replies (the handler's parser has the last word).
	Target string
	// Value is the password of -addUser and -changeUserPassword, the
	// value of -setEnv and -setSecret, the flag of -changeUserSettings or
	// the group of -addUserToGroup and -removeUserFromGroup. String never
	// shows passwords and secrets.
	Value string
	// On is the true|false of -changeUserSettings.
	On bool
	// Input is the JSON after the name of -runAction; nil when absent.
	Input json.RawMessage
	// Trace is what -actionTrace does: TraceOn (Target, or every action
	// when Target is ""), TraceOff (all), TraceStatus or TraceRemove
	// (Target).
	Trace TraceOp
}

// TraceOp is the operation of -actionTrace.
type TraceOp uint8

// -actionTrace operations.
const (
	TraceOn     TraceOp = iota + 1 // -actionTrace NAME | all
	TraceOff                       // -actionTrace off
	TraceStatus                    // -actionTrace status
	TraceRemove                    // -actionTrace remove NAME
)

// parseTrace reads -actionTrace's NAME | all | off | status | remove NAME.
func parseTrace(cmd *Command, toks []string) error {
	switch {
	case len(toks) == 2 && strings.EqualFold(toks[0], "remove"):
		cmd.Trace, cmd.Target = TraceRemove, toks[1]
	case len(toks) != 1:
		return parseErr("%s takes an action name, all, off, status, or remove and an action name, got %s", cmd.Name, countArgs(toks))
	case strings.EqualFold(toks[0], "all"):
		cmd.Trace = TraceOn
	case strings.EqualFold(toks[0], "off"):
		cmd.Trace = TraceOff
	case strings.EqualFold(toks[0], "status"):
		cmd.Trace = TraceStatus
	default:
		cmd.Trace, cmd.Target = TraceOn, toks[0]
	}
	return nil
}

// ParseError is the error Parse returns.
type ParseError struct {
	Msg string
	// Unknown: the command word is not a command Gantry knows;
	// Suggestions then lists close ones.
	Unknown bool
	// Unsupported: a command of the reference that Gantry does not
	// implement; Msg says why.
	Unsupported bool
	Suggestions []string
}

func (e *ParseError) Error() string { return "command: " + e.Msg }

func parseErr(format string, args ...any) *ParseError {
	return &ParseError{Msg: fmt.Sprintf(format, args...)}
}

const spaces = " \t\r\n\v\f"

// Parse decodes a payload published on $SYS/Coreflux/Command:
//
//	-commandName <arguments> [-requestId <id>]
//
// The command name is matched ignoring case and dashes (--add-action is
// -addAction). -requestId (also --request-id, -requestId=<id>) may come
// right after the command name or at the very end; at the end it is taken
// only when it is not inside a double-quoted string. Arguments are
// quote-aware tokens (quotes stripped), except LoT source, which is kept
// as sent, and -runAction's JSON. On error the returned Command still has
// Name and RequestID when they could be read, for the reply.
func Parse(payload []byte) (Command, error) {
	if !utf8.Valid(payload) {
		return Command{}, parseErr("the payload is not valid UTF-8")
	}
	s := strings.TrimLeft(strings.TrimPrefix(string(payload), "\uFEFF"), spaces)
	if s == "" {
		return Command{}, parseErr("empty command; send -<command> [arguments], for example -listEntities")
	}
	word, rest := cutWord(s)
	cmd := Command{Name: clip(word)}
	rest, id, err := extractRequestID(rest)
	cmd.RequestID = id
	if err != nil {
		return cmd, err
	}
	if !strings.HasPrefix(word, "-") {
		return cmd, &ParseError{Msg: fmt.Sprintf("Unknown command: %s (a command starts with '-')", clip(word)),
			Unknown: true, Suggestions: suggest(word)}
	}
	entry, ok := lookup[fold(word)]
	if !ok {
		if u, ok := unsupported[fold(word)]; ok {
			cmd.Name = "-" + u.name
			return cmd, &ParseError{Msg: fmt.Sprintf("Command -%s is not supported: %s", u.name, u.why), Unsupported: true}
		}
		return cmd, &ParseError{Msg: "Unknown command: " + clip(word), Unknown: true, Suggestions: suggest(word)}
	}
	cmd.Verb, cmd.Name, cmd.Kind = entry.verb, "-"+entry.name, entry.verb.Kind()
	return cmd, parseArgs(&cmd, rest)
}

func parseArgs(cmd *Command, rest string) error {
	switch verbs[cmd.Verb].args {
	case argsSource:
		return parseSource(cmd, rest)
	case argsRun:
		return parseRun(cmd, rest)
	case argsAssign:
		return parseAssign(cmd, rest)
	}
	toks, err := tokens(rest)
	if err != nil {
		return parseErr("%s: %v", cmd.Name, err)
	}
	switch verbs[cmd.Verb].args {
	case argsNone:
		if len(toks) > 0 {
			return parseErr("%s takes no arguments, got %s", cmd.Name, quoteList(toks))
		}
	case argsName:
		if len(toks) != 1 {
			return parseErr("%s takes one %s, got %s", cmd.Name, argName(cmd.Verb), countArgs(toks))
		}
		cmd.Target = toks[0]
	case argsUserPass:
		if len(toks) != 2 {
			return parseErr("%s takes a user name and a password, got %s", cmd.Name, countArgs(toks))
		}
		cmd.Target, cmd.Value = toks[0], toks[1]
	case argsUserGroup:
		if len(toks) != 2 {
			return parseErr("%s takes a user name and a group, got %s", cmd.Name, countArgs(toks))
		}
		cmd.Target, cmd.Value = toks[0], toks[1]
	case argsTrace:
		return parseTrace(cmd, toks)
	case argsKindName:
		if len(toks) != 2 {
			return parseErr("%s takes a kind (action, model, rule, connector or route) and a name, got %s", cmd.Name, countArgs(toks))
		}
		k, err := defs.ParseKind(strings.ToUpper(toks[0]))
		if err != nil {
			return parseErr("%s %s: the kind is action, model, rule, connector or route", cmd.Name, clip(toks[0]))
		}
		cmd.Kind, cmd.Target = k, toks[1]
	case argsUserFlag:
		if len(toks) != 3 {
			return parseErr("%s takes a user name, a permission flag and true or false, got %s", cmd.Name, countArgs(toks))
		}
		on, ok := map[string]bool{"true": true, "false": false}[strings.ToLower(toks[2])]
		if !ok {
			return parseErr("%s %s %s: %q, want true or false", cmd.Name, toks[0], toks[1], clip(toks[2]))
		}
		cmd.Target, cmd.Value, cmd.On = toks[0], toks[1], on
	}
	return nil
}

func argName(v Verb) string {
	switch v {
	case RemoveUser, ListUserGroups:
		return "user name"
	case LoadProject:
		return "project name (quote it if it has spaces)"
	}
	return "name"
}

func countArgs(toks []string) string {
	if len(toks) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d arguments: %s", len(toks), quoteList(toks))
}

// quoteList quotes the first few tokens for an error message.
func quoteList(toks []string) string {
	var q []string
	for i, t := range toks {
		if i == 5 {
			q = append(q, "...")
			break
		}
		q = append(q, fmt.Sprintf("%q", clip(t)))
	}
	return strings.Join(q, ", ")
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// parseSource keeps the LoT text and reads its DEFINE line.
func parseSource(cmd *Command, rest string) error {
	src := strings.Trim(rest, spaces)
	want := strings.ToUpper(string(cmd.Kind))
	if src == "" {
		return parseErr("%s needs LoT source: %s DEFINE %s <Name> ...", cmd.Name, cmd.Name, want)
	}
	kindWord, name, found := sniffHeader(src)
	if !found {
		return parseErr("%s needs LoT source starting with DEFINE %s <Name>, got %q", cmd.Name, want, firstLine(src))
	}
	k, err := defs.ParseKind(kindWord)
	if err != nil || k != cmd.Kind {
		return parseErr("%s got DEFINE %s; it deploys DEFINE %s definitions", cmd.Name, kindWord, want)
	}
	cmd.Source, cmd.Target = src, name
	return nil
}

// sniffHeader finds the first DEFINE line of src, skipping blank lines and
// comments (//, --, /* */), and returns its kind word and name.
func sniffHeader(src string) (kindWord, name string, found bool) {
	inBlock := false
	for line := range strings.Lines(src) {
		l := strings.Trim(line, spaces)
		if inBlock {
			if _, after, ok := strings.Cut(l, "*/"); ok {
				inBlock, l = false, strings.Trim(after, spaces)
			} else {
				continue
			}
		}
		if strings.HasPrefix(l, "/*") {
			if _, after, ok := strings.Cut(l[2:], "*/"); ok {
				l = strings.Trim(after, spaces)
			} else {
				inBlock = true
				continue
			}
		}
		if l == "" || strings.HasPrefix(l, "//") || strings.HasPrefix(l, "--") {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 2 || !strings.EqualFold(f[0], "DEFINE") {
			return "", "", false
		}
		if len(f) > 2 {
			name = f[2]
		}
		return f[1], name, true
	}
	return "", "", false
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 60 {
		l = l[:60] + "..."
	}
	return l
}

// parseRun reads -runAction NAME [json].
func parseRun(cmd *Command, rest string) error {
	name, after, found, err := nextToken(rest)
	if err != nil {
		return parseErr("%s: %v", cmd.Name, err)
	}
	if !found {
		return parseErr("%s needs an action name: %s <name> [json]", cmd.Name, cmd.Name)
	}
	cmd.Target = name
	if in := strings.Trim(after, spaces); in != "" {
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			return parseErr("%s %s: the input is not valid JSON (%v): %s", cmd.Name, name, err, firstLine(in))
		}
		cmd.Input = json.RawMessage(in)
	}
	return nil
}

// parseAssign reads NAME=value or NAME value; the value is the rest of the
// payload (quotes around it stripped).
func parseAssign(cmd *Command, rest string) error {
	s := strings.Trim(rest, spaces)
	eq, sp := strings.IndexByte(s, '='), strings.IndexAny(s, spaces)
	var name, value string
	switch {
	case eq >= 0 && (sp < 0 || eq < sp):
		name, value = s[:eq], s[eq+1:]
	case sp >= 0:
		name, value = s[:sp], s[sp:]
	default:
		return parseErr("%s needs NAME=value, got %q", cmd.Name, s)
	}
	value = strings.Trim(value, spaces)
	if err := validateVarName(name); err != nil {
		return parseErr("%s: %v", cmd.Name, err)
	}
	if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
		value = value[1 : len(value)-1]
	}
	cmd.Target, cmd.Value = name, value
	return nil
}

// validateVarName checks an environment variable or secret name: a letter
// or '_', then letters, digits and '_', at most 128 bytes.
func validateVarName(name string) error {
	if name == "" {
		return fmt.Errorf("the name is empty")
	}
	if len(name) > 128 {
		return fmt.Errorf("name %q is %d bytes, more than 128", name, len(name))
	}
	for i, r := range name {
		ok := r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9'
		if !ok {
			return fmt.Errorf("name %q has %q at byte %d; use letters, digits and '_', not starting with a digit", name, r, i)
		}
	}
	return nil
}
