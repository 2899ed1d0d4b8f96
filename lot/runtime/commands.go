package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/interp"
	"gantry/lot/rules"
	"gantry/lot/syntax"
)

// maxProjectFiles bounds the .lot files of one -loadProject.
const maxProjectFiles = 1000

// onCommand handles a message on $SYS/Coreflux/Command (the broker lets
// only those the rules allow publish there) and publishes the reply.
func (e *Engine) onCommand(m *broker.Message) {
	if m.Retain || m.Origin == broker.OriginPeer {
		return
	}
	c := command.Caller{User: m.Username, ClientID: m.ClientID}
	r, ok := e.disp.Handle(e.ctx, c, m.Payload)
	if !ok {
		return
	}
	e.cmd.PublishMessage(&broker.Message{Topic: command.OutputTopic, Payload: r.Encode(), Origin: broker.OriginBroker,
		ClientID: commandClientID})
}

// parseSource parses the source of -add* into exactly one definition of
// kind.
func parseSource(kind defs.Kind, source string) (syntax.Def, error) {
	f, err := syntax.Parse("", source)
	if err != nil {
		return nil, positioned(err)
	}
	if len(f.Defs) != 1 {
		return nil, fmt.Errorf("the source holds %d definitions; send one %s at a time, or use -loadProject", len(f.Defs), kind)
	}
	d := f.Defs[0]
	if k, ok := kindOf(d.Header().Kind); !ok || k != kind {
		return nil, fmt.Errorf("the source defines a %s, not a %s", strings.ToLower(d.Header().Kind.String()), kind)
	}
	return d, nil
}

// positioned gives syntax errors the Position method of command replies.
func positioned(err error) error {
	var list syntax.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = diagErrorOf(e)
	}
	return errors.Join(errs...)
}

type syntaxError struct{ e *syntax.Error }

func diagErrorOf(e *syntax.Error) error            { return syntaxError{e} }
func (s syntaxError) Error() string                { return s.e.Error() }
func (s syntaxError) Position() (line, column int) { return s.e.Pos.Line, s.e.Pos.Col }
func (s syntaxError) Suggestions() []string {
	if s.e.Hint == "" {
		return nil
	}
	return []string{s.e.Hint}
}

// apply checks that the store's definitions with c applied still build,
// then applies c. A change that does not build changes nothing. Stored
// definitions that did not build before (see install) do not hold it up:
// only the problems of what c puts, and of what built before and would
// not after, refuse it.
func (e *Engine) apply(ctx context.Context, c defs.Change) (defs.Applied, error) {
	// Checked against the store and applied without another deploy in
	// between, so that two deploys cannot each pass and together break a
	// definition (the console and the cluster apply concurrently).
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	for attempt := 0; ; attempt++ {
		a, err := e.checkAndApply(ctx, c)
		// In a cluster, another node's change may commit between the
		// check and the commit: the store then holds it, and the change
		// is checked again on top of it.
		if errors.Is(err, defs.ErrConflict) && attempt < maxConflictRetries && ctx.Err() == nil {
			continue
		}
		return a, err
	}
}

// maxConflictRetries bounds how often one change is checked again after
// the definitions changed under it (defs.ErrConflict).
const maxConflictRetries = 5

func (e *Engine) checkAndApply(ctx context.Context, c defs.Change) (defs.Applied, error) {
	e.mu.Lock()
	wasBroken := e.broken
	e.mu.Unlock()
	_, dropped := buildLenient(withChange(e.o.Store.List(""), c), e.o.Interp)
	var errs []error
	for _, f := range dropped {
		switch {
		case f.key == (defKey{}) || puts(c, f.key):
			errs = append(errs, f.err)
		case wasBroken[f.key] == nil:
			errs = append(errs, brokenByChange{f})
		}
	}
	if len(errs) == 0 {
		errs = e.checkConnectors(c)
	}
	if len(errs) > 0 {
		return defs.Applied{}, errors.Join(errs...)
	}
	return e.o.Store.Apply(ctx, c)
}

// checkConnectors asks Options.Connectors about each connector c puts.
func (e *Engine) checkConnectors(c defs.Change) []error {
	if e.o.Connectors == nil {
		return nil
	}
	var errs []error
	for _, p := range c.Puts {
		if p.Kind != defs.Connector {
			continue
		}
		d, err := parseOne(defs.Definition{Kind: p.Kind, Name: p.Name, Source: p.Source})
		if k, ok := d.(*syntax.Connector); err == nil && ok {
			if err := e.o.Connectors.Check(k, e.env); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// puts reports whether c puts the definition k.
func puts(c defs.Change, k defKey) bool {
	return slices.ContainsFunc(c.Puts, func(p defs.Put) bool { return p.Kind == k.kind && p.Name == k.name })
}

// brokenByChange is the problem of a deployed definition that a change
// would break (a callable's INPUTs changed under its callers, a parent
// model removed). Its position is in that definition's source, not in the
// command's, so it is told in words only.
type brokenByChange struct{ f defError }

func (b brokenByChange) Error() string {
	return fmt.Sprintf("%s %s would no longer build: %v", b.f.key.kind, b.f.key.name, b.f.err)
}

// withChange returns list as it would be after c.
func withChange(list []defs.Definition, c defs.Change) []defs.Definition {
	out := slices.DeleteFunc(slices.Clone(list), func(d defs.Definition) bool {
		for _, del := range c.Deletes {
			if d.Kind == del.Kind && (del.Name == "" || del.Name == d.Name) {
				return true
			}
		}
		for _, p := range c.Puts {
			if d.Kind == p.Kind && d.Name == p.Name {
				return true
			}
		}
		return false
	})
	for _, p := range c.Puts {
		out = append(out, defs.Definition{Kind: p.Kind, Name: p.Name, Source: p.Source})
	}
	return out
}

// Add implements command.Entities.
func (e *Engine) Add(ctx context.Context, _ command.Caller, kind defs.Kind, source string) (string, error) {
	d, err := parseSource(kind, source)
	if err != nil {
		return "", err
	}
	// The source is stored as sent (comments included), so that positions
	// in errors are those of the command and $SYS shows what was sent.
	h := d.Header()
	_, err = e.apply(ctx, defs.Change{Puts: []defs.Put{{Kind: kind, Name: h.Name, Source: source}}})
	return h.Name, err
}

// Remove implements command.Entities.
func (e *Engine) Remove(ctx context.Context, _ command.Caller, kind defs.Kind, name string) error {
	if _, ok := e.o.Store.Get(kind, name); !ok {
		return fmt.Errorf("%w: %s %q", command.ErrNotFound, kind, name)
	}
	_, err := e.apply(ctx, defs.Change{Deletes: []defs.Delete{{Kind: kind, Name: name}}})
	return err
}

// RemoveAll implements command.Entities.
func (e *Engine) RemoveAll(ctx context.Context, _ command.Caller, kind defs.Kind) (int, error) {
	n := len(e.o.Store.List(kind))
	if n == 0 {
		return 0, nil
	}
	_, err := e.apply(ctx, defs.Change{Deletes: []defs.Delete{{Kind: kind}}})
	return n, err
}

// runResult is the data of a -runAction reply (LOT.md §8.4 C8).
type runResult struct {
	Status    string                     `json:"status"`
	TraceID   string                     `json:"traceId"`
	Outputs   map[string]json.RawMessage `json:"outputs,omitempty"`
	Published []publishedJSON            `json:"published"`
}

type publishedJSON struct {
	Topic   string `json:"topic"`
	Payload string `json:"payload"`
}

// RunAction implements command.Runner. A callable action gets the JSON
// object's members as INPUTs and answers its OUTPUTs; another action runs
// with the input as PAYLOAD, or, given {"topic": ..., "payload": ...}, as
// if that message had arrived (LOT.md §4.4). The reply lists what the run
// published.
func (e *Engine) RunAction(ctx context.Context, _ command.Caller, name string, input json.RawMessage) (any, error) {
	d := e.dep.Load()
	a := d.actions[name]
	if a == nil {
		return nil, fmt.Errorf("%w: action %q", command.ErrNotFound, name)
	}
	res := &runResult{Status: "success", TraceID: newTraceID(), Published: []publishedJSON{}}
	var inputs map[string]interp.Value
	if a.def.Trigger == nil {
		var err error
		if inputs, err = callInputs(name, input); err != nil {
			return nil, err
		}
	}
	e.stats.Runs.Add(1)
	fx := newEffects(e)
	host := &interp.Host{Effects: fx, Topics: fx, Env: e.env, Callables: d, Models: d}
	var err error
	if a.def.Trigger != nil {
		ev := simulatedEvent(input)
		if ev.Topic != "" {
			fx.frame.SetTrigger(ev.Topic, ev.Payload)
		}
		err = a.prog.Run(host, ev)
	} else {
		res.Outputs, err = callOutputs(a.prog.Call(host, inputs))
	}
	if ferr := e.flush(fx, 0); err == nil && ferr != nil {
		err = fmt.Errorf("action %s: %w", name, ferr)
	}
	e.reportRun(name, err)
	if err != nil {
		return nil, err
	}
	for _, w := range fx.frame.Writes() {
		if !w.Keep {
			res.Published = append(res.Published, publishedJSON{Topic: w.Topic, Payload: string(w.Payload)})
		}
	}
	return res, nil
}

// callOutputs encodes the OUTPUTs of a callable for the reply.
func callOutputs(out map[string]interp.Value, err error) (map[string]json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	res := make(map[string]json.RawMessage, len(out))
	for k, v := range out {
		res[k] = valueJSON(v)
	}
	return res, nil
}

// callInputs reads the INPUTs of a callable from a JSON object.
func callInputs(name string, input json.RawMessage) (map[string]interp.Value, error) {
	inputs := map[string]interp.Value{}
	if len(bytes.TrimSpace(input)) == 0 {
		return inputs, nil
	}
	v, err := interp.ParseJSON(input)
	if err != nil {
		return nil, fmt.Errorf("input of %s: %w", name, err)
	}
	keys, vals, ok := interp.Members(v)
	if !ok {
		return nil, fmt.Errorf("input of %s: want a JSON object of INPUT values", name)
	}
	for i, k := range keys {
		inputs[k] = vals[i]
	}
	return inputs, nil
}

// simulatedEvent is the message -runAction hands a triggered action:
// {"topic": "...", "payload": ...} stands for that message (a JSON string
// payload is its text, anything else its JSON), any other input is the
// payload.
func simulatedEvent(input json.RawMessage) *interp.Event {
	var msg struct {
		Topic   *string         `json:"topic"`
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(input, &msg) != nil || msg.Topic == nil || topic.ValidateName(*msg.Topic) != nil {
		return &interp.Event{Payload: input}
	}
	ev := &interp.Event{Topic: *msg.Topic, Payload: msg.Payload}
	var text string
	if json.Unmarshal(msg.Payload, &text) == nil {
		ev.Payload = []byte(text)
	}
	return ev
}

// valueJSON encodes an OUTPUT value: numbers and booleans as such, JSON as
// itself, EMPTY as null, anything else as a string.
func valueJSON(v interp.Value) json.RawMessage {
	switch v.Kind() {
	case interp.KindEmpty, interp.KindNull:
		return json.RawMessage("null")
	case interp.KindInt, interp.KindFloat, interp.KindBool, interp.KindJSON:
		if t := v.Text(); json.Valid([]byte(t)) {
			return json.RawMessage(t)
		}
	}
	b, _ := json.Marshal(v.Text())
	return b
}

// newTraceID identifies one -runAction in its reply and in the logs.
func newTraceID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SetEnv implements command.Environment.
func (e *Engine) SetEnv(_ context.Context, _ command.Caller, name, value string) error {
	return e.env.SetEnv(name, value, false)
}

// SetSecret implements command.Environment.
func (e *Engine) SetSecret(_ context.Context, _ command.Caller, name, value string) error {
	return e.env.SetEnv(name, value, true)
}

// LoadProject implements command.Projects: every .lot file under dir,
// as one change.
func (e *Engine) LoadProject(ctx context.Context, _ command.Caller, name string) (any, error) {
	if e.o.ProjectsDir == "" {
		return nil, errors.New("this node has no projects folder")
	}
	if name == "" || filepath.IsAbs(name) || !filepath.IsLocal(name) {
		return nil, fmt.Errorf("project %q: give a folder name below the projects folder %s", name, e.o.ProjectsDir)
	}
	root, err := os.OpenRoot(e.o.ProjectsDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var puts []defs.Put
	var files int
	err = fs.WalkDir(root.FS(), filepath.ToSlash(name), func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !de.Type().IsRegular() || !strings.EqualFold(filepath.Ext(path), ".lot") {
			return nil // folders are walked; links and other files are not read
		}
		if files++; files > maxProjectFiles {
			return fmt.Errorf("more than %d .lot files", maxProjectFiles)
		}
		src, err := fs.ReadFile(root.FS(), path)
		if err != nil {
			return err
		}
		f, err := syntax.Parse(path, string(src))
		if err != nil {
			return positioned(err)
		}
		for _, d := range f.Defs {
			k, ok := kindOf(d.Header().Kind)
			if !ok {
				return fmt.Errorf("%s: DEFINE %s is not supported", path, d.Header().Kind)
			}
			puts = append(puts, defs.Put{Kind: k, Name: d.Header().Name, Source: d.Header().Text})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(puts) == 0 {
		return nil, fmt.Errorf("no definitions in the .lot files of %s", name)
	}
	applied, err := e.apply(ctx, defs.Change{Puts: puts})
	if err != nil {
		return nil, err
	}
	return map[string]any{"files": files, "definitions": len(puts), "version": applied.Version}, nil
}

// ListEntities implements command.Projects: the stored definitions by
// kind, and those that do not run because they do not build (see install),
// with why.
func (e *Engine) ListEntities(context.Context, command.Caller) (any, error) {
	out := map[string]any{}
	names := map[defs.Kind][]string{defs.Action: {}, defs.Model: {}, defs.Rule: {}, defs.Connector: {}}
	for _, d := range e.o.Store.List("") {
		names[d.Kind] = append(names[d.Kind], d.Name)
	}
	for k, v := range names {
		out[string(k)+"s"] = v
	}
	type notRunning struct {
		Kind  defs.Kind `json:"kind"`
		Name  string    `json:"name"`
		Error string    `json:"error"`
	}
	var broken []notRunning
	e.mu.Lock()
	for k, err := range e.broken {
		broken = append(broken, notRunning{k.kind, k.name, err.Error()})
	}
	e.mu.Unlock()
	if len(broken) > 0 {
		slices.SortFunc(broken, func(a, b notRunning) int {
			return strings.Compare(string(a.Kind)+"/"+a.Name, string(b.Kind)+"/"+b.Name)
		})
		out["notRunning"] = broken
	}
	return out, nil
}

// seedRules stores the rules a new broker starts with.
func (e *Engine) seedRules() error {
	var puts []defs.Put
	for _, r := range rules.Seeds() {
		puts = append(puts, defs.Put{Kind: defs.Rule, Name: r.Name, Source: r.Source})
	}
	_, err := e.apply(e.ctx, defs.Change{Puts: puts})
	return err
}
