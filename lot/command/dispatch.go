package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"gantry/lot/defs"
)

// ErrNotFound is wrapped by handler errors about a missing entity or user
// (defs.ErrNotFound is recognised too); the reply then says "not found".
var ErrNotFound = errors.New("command: not found")

// Caller is who sent a command: the MQTT session's identity.
type Caller struct {
	User     string
	ClientID string
}

// Entities deploys and removes LoT definitions.
type Entities interface {
	// Add parses, checks and deploys source, a definition of kind, and
	// returns its name. Errors pointing into the source implement
	// Positioned; several may be joined with errors.Join.
	Add(ctx context.Context, c Caller, kind defs.Kind, source string) (name string, err error)
	Remove(ctx context.Context, c Caller, kind defs.Kind, name string) error
	RemoveAll(ctx context.Context, c Caller, kind defs.Kind) (removed int, err error)
}

// Runner runs an action on demand (-runAction); input is nil or JSON. The
// returned data goes into the reply's data.
type Runner interface {
	RunAction(ctx context.Context, c Caller, name string, input json.RawMessage) (data any, err error)
}

// Users manages broker users.
type Users interface {
	AddUser(ctx context.Context, c Caller, name, password string) error
	RemoveUser(ctx context.Context, c Caller, name string) error
	ChangePassword(ctx context.Context, c Caller, name, password string) error
}

// UserSettings is an optional capability of Users: permission flags and
// groups (-changeUserSettings, -addUserToGroup, -removeUserFromGroup,
// -listUserGroups).
type UserSettings interface {
	SetUserFlag(ctx context.Context, c Caller, name, flag string, on bool) error
	AddUserToGroup(ctx context.Context, c Caller, name, group string) error
	RemoveUserFromGroup(ctx context.Context, c Caller, name, group string) error
	UserGroups(ctx context.Context, c Caller, name string) ([]string, error)
}

// Environment sets the values LoT reads with GET ENV and GET SECRET.
type Environment interface {
	SetEnv(ctx context.Context, c Caller, name, value string) error
	SetSecret(ctx context.Context, c Caller, name, value string) error
}

// EnvironmentEditor is an optional capability of Environment: -listEnv,
// -removeEnv, -listSecrets (names only) and -removeSecret.
type EnvironmentEditor interface {
	ListEnv(ctx context.Context, c Caller) (map[string]string, error)
	RemoveEnv(ctx context.Context, c Caller, name string) error
	ListSecrets(ctx context.Context, c Caller) ([]string, error)
	RemoveSecret(ctx context.Context, c Caller, name string) error
}

// RuleRestorer is an optional capability of Entities: -restoreRules puts
// the seed rules back as a new broker has them and returns their names.
type RuleRestorer interface {
	RestoreRules(ctx context.Context, c Caller) ([]string, error)
}

// Diagnostician is an optional capability of Entities: -lotDiagnostic
// KIND NAME checks a stored definition against the others and returns
// what the checker says of it (errors and warnings) as the reply's data.
type Diagnostician interface {
	Diagnose(ctx context.Context, c Caller, kind defs.Kind, name string) (data any, err error)
}

// Tracer is an optional capability of Runner: -actionTrace streams what
// each run of an action (or of every action) does to
// $SYS/Coreflux/Actions/<name>/Trace for a while; the returned data goes
// into the reply.
type Tracer interface {
	TraceActions(ctx context.Context, c Caller, op TraceOp, name string) (data any, err error)
}

// Projects loads projects and lists what is deployed.
type Projects interface {
	LoadProject(ctx context.Context, c Caller, name string) (data any, err error)
	ListEntities(ctx context.Context, c Caller) (data any, err error)
}

// Authorizer decides whether a caller may run a command of an access-rule
// scope (Verb.Scope, e.g. "ActionManagementCreation").
type Authorizer interface {
	Allowed(ctx context.Context, c Caller, scope string) bool
}

// Handlers are the implementations a Dispatcher calls. A nil family makes
// its commands fail with "not available on this node"; a nil Authorizer
// allows everything (the broker has already checked CommandCall).
type Handlers struct {
	Entities    Entities
	Runner      Runner
	Users       Users
	Environment Environment
	Projects    Projects
	Authorizer  Authorizer
}

// Dispatcher turns commands into handler calls and replies.
type Dispatcher struct {
	h   Handlers
	log *slog.Logger
}

// NewDispatcher returns a dispatcher over h; log may be nil.
func NewDispatcher(h Handlers, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{h: h, log: log.With("component", "lot/command")}
}

// Handle parses a payload and dispatches it. ok is false when the command
// gets no reply (-updateData).
func (d *Dispatcher) Handle(ctx context.Context, c Caller, payload []byte) (r Reply, ok bool) {
	cmd, err := Parse(payload)
	if err != nil {
		r := failure(cmd, err.Error())
		var pe *ParseError
		if errors.As(err, &pe) {
			r.Message = pe.Msg
			r.Errors = []ReplyError{{Message: pe.Msg, Suggestions: pe.Suggestions}}
			if len(pe.Suggestions) > 0 {
				r.Message += ". Did you mean " + strings.Join(pe.Suggestions, " or ") + "?"
			}
		}
		return r, true
	}
	if cmd.Verb == UpdateData {
		return Reply{}, false
	}
	return d.Dispatch(ctx, c, cmd), true
}

// Dispatch runs a parsed command. It checks the caller's permission for
// the verb's scope, calls the handler (recovering from a panic) and builds
// the reply.
func (d *Dispatcher) Dispatch(ctx context.Context, c Caller, cmd Command) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("command handler panicked", "command", cmd.String(), "user", c.User, "panic", p)
			r = failure(cmd, fmt.Sprintf("Internal error while executing %s", cmd.Name))
		}
	}()
	if a := d.h.Authorizer; a != nil && cmd.Verb.Scope() != "" && !a.Allowed(ctx, c, cmd.Verb.Scope()) {
		return failure(cmd, "Permission denied: You are not allowed to execute "+cmd.Name)
	}
	r = d.dispatch(ctx, c, cmd)
	if !r.Success {
		d.log.Info("command failed", "command", cmd.String(), "user", c.User, "message", r.Message)
	}
	return r
}

func (d *Dispatcher) dispatch(ctx context.Context, c Caller, cmd Command) Reply {
	switch cmd.Verb {
	case AddAction, AddModel, AddRule, AddConnector, RemoveAction, RemoveModel, RemoveRule, RemoveConnector,
		RemoveAllActions, RemoveAllModels, RemoveAllConnectors:
		if d.h.Entities == nil {
			return unavailable(cmd)
		}
		return d.entities(ctx, c, cmd)
	case RunAction:
		if d.h.Runner == nil {
			return unavailable(cmd)
		}
		return d.run(ctx, c, cmd)
	case AddUser, RemoveUser, ChangeUserPassword:
		if d.h.Users == nil {
			return unavailable(cmd)
		}
		return d.users(ctx, c, cmd)
	case ChangeUserSettings, AddUserToGroup, RemoveUserFromGroup, ListUserGroups:
		us, ok := d.h.Users.(UserSettings)
		if !ok {
			return unavailable(cmd)
		}
		return d.userSettings(ctx, c, cmd, us)
	case SetEnv, SetSecret:
		if d.h.Environment == nil {
			return unavailable(cmd)
		}
		return d.environment(ctx, c, cmd)
	case ListEnv, RemoveEnv, ListSecrets, RemoveSecret:
		ed, ok := d.h.Environment.(EnvironmentEditor)
		if !ok {
			return unavailable(cmd)
		}
		return d.editEnvironment(ctx, c, cmd, ed)
	case ActionTrace:
		tr, ok := d.h.Runner.(Tracer)
		if !ok {
			return unavailable(cmd)
		}
		data, err := tr.TraceActions(ctx, c, cmd.Trace, cmd.Target)
		if err != nil {
			return entityFailure(cmd, "Action", cmd.Target, "trace", err)
		}
		return success(cmd, "Action", cmd.Target, traceMessage(cmd), data)
	case LotDiagnostic:
		dg, ok := d.h.Entities.(Diagnostician)
		if !ok {
			return unavailable(cmd)
		}
		label := entityLabel(cmd)
		data, err := dg.Diagnose(ctx, c, cmd.Kind, cmd.Target)
		if err != nil {
			return entityFailure(cmd, label, cmd.Target, "diagnose", err)
		}
		return success(cmd, label, cmd.Target, fmt.Sprintf("Diagnostic of %s '%s'", strings.ToLower(label), cmd.Target), data)
	case RestoreRules:
		rr, ok := d.h.Entities.(RuleRestorer)
		if !ok {
			return unavailable(cmd)
		}
		names, err := rr.RestoreRules(ctx, c)
		if err != nil {
			return withErr(failure(cmd, fmt.Sprintf("Error restoring the rules: %v", err)), err, "")
		}
		return success(cmd, "Rule", "", "Rules restored successfully: "+strings.Join(names, ", "), map[string]any{"restored": names})
	case LoadProject, ListEntities:
		if d.h.Projects == nil {
			return unavailable(cmd)
		}
		return d.projects(ctx, c, cmd)
	}
	return failure(cmd, fmt.Sprintf("Command %s cannot be dispatched", cmd.Name))
}

func (d *Dispatcher) entities(ctx context.Context, c Caller, cmd Command) Reply {
	label := entityLabel(cmd)
	switch cmd.Verb {
	case AddAction, AddModel, AddRule, AddConnector:
		name, err := d.h.Entities.Add(ctx, c, cmd.Kind, cmd.Source)
		if name == "" {
			name = cmd.Target
		}
		if err != nil {
			return sourceFailure(cmd, label, name, err)
		}
		return success(cmd, label, name, fmt.Sprintf("%s '%s' added successfully!", label, name), nil)
	case RemoveAction, RemoveModel, RemoveRule, RemoveConnector:
		if err := d.h.Entities.Remove(ctx, c, cmd.Kind, cmd.Target); err != nil {
			return entityFailure(cmd, label, cmd.Target, "remove", err)
		}
		return success(cmd, label, cmd.Target, fmt.Sprintf("%s '%s' removed successfully!", label, cmd.Target), nil)
	}
	n, err := d.h.Entities.RemoveAll(ctx, c, cmd.Kind)
	plural := strings.ToLower(label) + "s"
	if err != nil {
		return withErr(failure(cmd, fmt.Sprintf("Error removing all %s: %v", plural, err)), err, "")
	}
	return success(cmd, label, "", fmt.Sprintf("Removed all %s successfully", plural), map[string]int{"removed": n})
}

func (d *Dispatcher) run(ctx context.Context, c Caller, cmd Command) Reply {
	data, err := d.h.Runner.RunAction(ctx, c, cmd.Target, cmd.Input)
	if err != nil {
		return entityFailure(cmd, "Action", cmd.Target, "run", err)
	}
	return success(cmd, "Action", cmd.Target, fmt.Sprintf("Action '%s' executed successfully", cmd.Target), data)
}

func (d *Dispatcher) users(ctx context.Context, c Caller, cmd Command) Reply {
	var err error
	var done, verb string
	switch cmd.Verb {
	case AddUser:
		err, done, verb = d.h.Users.AddUser(ctx, c, cmd.Target, cmd.Value), "User %s added successfully!", "add"
	case RemoveUser:
		err, done, verb = d.h.Users.RemoveUser(ctx, c, cmd.Target), "User %s removed successfully!", "remove"
	default:
		err, done, verb = d.h.Users.ChangePassword(ctx, c, cmd.Target, cmd.Value),
			"Password of user %s changed successfully!", "change the password of"
	}
	if err != nil {
		return entityFailure(cmd, "User", cmd.Target, verb, err)
	}
	return success(cmd, "User", cmd.Target, fmt.Sprintf(done, cmd.Target), nil)
}

func (d *Dispatcher) userSettings(ctx context.Context, c Caller, cmd Command, us UserSettings) Reply {
	var err error
	var done, verb string
	var data any
	switch cmd.Verb {
	case ChangeUserSettings:
		err = us.SetUserFlag(ctx, c, cmd.Target, cmd.Value, cmd.On)
		done, verb = fmt.Sprintf("Setting %s of user %s set to %v successfully!", cmd.Value, cmd.Target, cmd.On), "change the settings of"
	case AddUserToGroup:
		err = us.AddUserToGroup(ctx, c, cmd.Target, cmd.Value)
		done, verb = fmt.Sprintf("User %s added to group %s successfully!", cmd.Target, cmd.Value), "add to a group"
	case RemoveUserFromGroup:
		err = us.RemoveUserFromGroup(ctx, c, cmd.Target, cmd.Value)
		done, verb = fmt.Sprintf("User %s removed from group %s successfully!", cmd.Target, cmd.Value), "remove from a group"
	default:
		var groups []string
		groups, err = us.UserGroups(ctx, c, cmd.Target)
		if groups == nil {
			groups = []string{}
		}
		data = map[string]any{"user": cmd.Target, "groups": groups}
		done, verb = fmt.Sprintf("User %s is in %d groups: %s", cmd.Target, len(groups), strings.Join(groups, ", ")), "list the groups of"
	}
	if err != nil {
		return entityFailure(cmd, "User", cmd.Target, verb, err)
	}
	return success(cmd, "User", cmd.Target, done, data)
}

func (d *Dispatcher) editEnvironment(ctx context.Context, c Caller, cmd Command, ed EnvironmentEditor) Reply {
	switch cmd.Verb {
	case ListEnv:
		vals, err := ed.ListEnv(ctx, c)
		if err != nil {
			return withErr(failure(cmd, fmt.Sprintf("Error listing environment variables: %v", err)), err, "")
		}
		if vals == nil {
			vals = map[string]string{}
		}
		return success(cmd, "Environment variable", "", fmt.Sprintf("%d environment variables", len(vals)), map[string]any{"env": vals})
	case ListSecrets:
		names, err := ed.ListSecrets(ctx, c)
		if err != nil {
			return withErr(failure(cmd, fmt.Sprintf("Error listing secrets: %v", err)), err, "")
		}
		if names == nil {
			names = []string{}
		}
		return success(cmd, "Secret", "", fmt.Sprintf("%d secrets", len(names)), map[string]any{"secrets": names})
	}
	label, err := "Environment variable", error(nil)
	if cmd.Verb == RemoveSecret {
		label, err = "Secret", ed.RemoveSecret(ctx, c, cmd.Target)
	} else {
		err = ed.RemoveEnv(ctx, c, cmd.Target)
	}
	if err != nil {
		return entityFailure(cmd, label, cmd.Target, "remove", err)
	}
	return success(cmd, label, cmd.Target, fmt.Sprintf("%s %s removed successfully!", label, cmd.Target), nil)
}

func (d *Dispatcher) environment(ctx context.Context, c Caller, cmd Command) Reply {
	label, err := "Environment variable", error(nil)
	if cmd.Verb == SetSecret {
		label, err = "Secret", d.h.Environment.SetSecret(ctx, c, cmd.Target, cmd.Value)
	} else {
		err = d.h.Environment.SetEnv(ctx, c, cmd.Target, cmd.Value)
	}
	if err != nil {
		return withErr(failure(cmd, fmt.Sprintf("Error setting %s %s: %v", strings.ToLower(label), cmd.Target, err)), err, "")
	}
	return success(cmd, label, cmd.Target, fmt.Sprintf("%s %s set successfully!", label, cmd.Target), nil)
}

func (d *Dispatcher) projects(ctx context.Context, c Caller, cmd Command) Reply {
	if cmd.Verb == ListEntities {
		data, err := d.h.Projects.ListEntities(ctx, c)
		if err != nil {
			return withErr(failure(cmd, fmt.Sprintf("Error listing entities: %v", err)), err, "")
		}
		return success(cmd, "", "", "Entities listed successfully", data)
	}
	data, err := d.h.Projects.LoadProject(ctx, c, cmd.Target)
	if err != nil {
		return entityFailure(cmd, "Project", cmd.Target, "load", err)
	}
	return success(cmd, "Project", cmd.Target, fmt.Sprintf("Project '%s' loaded successfully!", cmd.Target), data)
}

// entityLabel is the entity type of a reply: "Action", "Model", "Rule",
// and "Route" or "Connector" after the spelling the client used.
func entityLabel(cmd Command) string {
	if cmd.Kind == defs.Connector && strings.Contains(strings.ToLower(cmd.Name), "route") {
		return "Route"
	}
	k := string(cmd.Kind)
	if k == "" {
		return ""
	}
	return strings.ToUpper(k[:1]) + k[1:]
}

func replyBase(cmd Command) Reply {
	return Reply{Command: pascal(strings.TrimLeft(cmd.Name, "-")), RequestID: cmd.RequestID}
}

func success(cmd Command, entityType, entityName, msg string, data any) Reply {
	r := replyBase(cmd)
	r.Success, r.Message, r.EntityType, r.EntityName = true, msg, entityType, entityName
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return failure(cmd, fmt.Sprintf("%s succeeded but its result could not be encoded: %v", cmd.Name, err))
		}
		r.Data = b
	}
	return r
}

func failure(cmd Command, msg string) Reply {
	r := replyBase(cmd)
	r.Message = msg
	r.Errors = []ReplyError{{Message: msg}}
	return r
}

func withErr(r Reply, err error, source string) Reply {
	if es := replyErrors(err, source); len(es) > 0 {
		r.Errors = es
	}
	return r
}

func traceMessage(cmd Command) string {
	switch {
	case cmd.Trace == TraceOn && cmd.Target == "":
		return "Tracing every action"
	case cmd.Trace == TraceOn:
		return fmt.Sprintf("Tracing action '%s'", cmd.Target)
	case cmd.Trace == TraceOff:
		return "Action traces stopped"
	case cmd.Trace == TraceRemove:
		return fmt.Sprintf("Trace of action '%s' stopped", cmd.Target)
	}
	return "Action traces"
}

func unavailable(cmd Command) Reply {
	return failure(cmd, fmt.Sprintf("Command %s is not available on this node", cmd.Name))
}

// entityFailure reports a failed operation on a named thing, saying
// "not found" when the handler said so.
func entityFailure(cmd Command, label, name, verb string, err error) Reply {
	var r Reply
	if errors.Is(err, ErrNotFound) || errors.Is(err, defs.ErrNotFound) {
		r = failure(cmd, fmt.Sprintf("%s '%s' not found", label, name))
	} else {
		r = failure(cmd, fmt.Sprintf("Error: could not %s %s '%s': %v", verb, strings.ToLower(label), name, err))
	}
	r.EntityType, r.EntityName = label, name
	return withErr(r, err, "")
}

// sourceFailure reports a failed deploy; positioned errors become a
// "Parsing error" with line and column.
func sourceFailure(cmd Command, label, name string, err error) Reply {
	r := failure(cmd, fmt.Sprintf("Error: %s '%s' was not added: %v", label, name, err))
	var p Positioned
	if errors.As(err, &p) {
		line, col := p.Position()
		r.Message = fmt.Sprintf("Parsing error: %s '%s' at (%d,%d): %v", label, name, line, col, p)
	}
	r.EntityType, r.EntityName = label, name
	return withErr(r, err, cmd.Source)
}

// String describes the command for logs, never showing passwords or
// secret values, and only the size of LoT source.
func (c Command) String() string {
	var b strings.Builder
	b.WriteString(c.Name)
	switch {
	case c.Source != "":
		fmt.Fprintf(&b, " %s (%d bytes of source)", c.Target, len(c.Source))
	case c.Verb == SetEnv:
		fmt.Fprintf(&b, " %s=%s", c.Target, c.Value)
	case c.Verb == SetSecret:
		fmt.Fprintf(&b, " %s=***", c.Target)
	case c.Verb == AddUser || c.Verb == ChangeUserPassword:
		fmt.Fprintf(&b, " %s ***", c.Target)
	case c.Verb == ChangeUserSettings:
		fmt.Fprintf(&b, " %s %s %v", c.Target, c.Value, c.On)
	case c.Verb == AddUserToGroup || c.Verb == RemoveUserFromGroup:
		fmt.Fprintf(&b, " %s %s", c.Target, c.Value)
	case c.Target != "":
		b.WriteString(" " + c.Target)
	}
	if len(c.Input) > 0 {
		fmt.Fprintf(&b, " (%d bytes of input)", len(c.Input))
	}
	if c.RequestID != "" {
		b.WriteString(" -requestId " + c.RequestID)
	}
	return b.String()
}
