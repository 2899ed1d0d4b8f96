package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"gantry/lot/check"
	"gantry/lot/command"
	"gantry/lot/syntax"
)

var errTooManyDrafts = errors.New("too many drafts: deploy or discard some first")

// kinds of LoT definitions, as the command interface names them.
var kinds = []string{"action", "model", "rule", "connector"}

// sysTopic is where the runtime publishes a definition's source.
func sysTopic(kind, name string) string {
	return "$SYS/Coreflux/" + strings.ToUpper(kind[:1]) + kind[1:] + "s/" + name
}

// defineLine finds the kind and name of a definition's DEFINE line.
var defineLine = regexp.MustCompile(`(?im)^\s*DEFINE\s+(ACTION|MODEL|RULE|CONNECTOR|ROUTE)\s+([A-Za-z0-9_.\-]+)`)

func kindAndName(src string) (kind, name string, ok bool) {
	m := defineLine.FindStringSubmatch(src)
	if m == nil {
		return "", "", false
	}
	kind = strings.ToLower(m[1])
	if kind == "route" {
		kind = "connector"
	}
	return kind, m[2], true
}

func validKind(k string) bool { return slices.Contains(kinds, k) }

// entity is one row of the LoT page.
type entity struct {
	Kind, Name string
	State      string // running, failed (does not build)
	Problem    string // why it does not run
	LastError  string // the last runtime error, from $SYS/Coreflux/Actions/<name>/Error
	Detail     string // a connector's device and connection
	RunsOn     string // "this node", or the node a connector is pinned to
}

type lotList struct {
	Entities []entity
	Error    string // the -listEntities reply, when it failed
}

func (c *Console) listEntities(ctx context.Context, user string) ([]entity, error) {
	r, err := c.o.Commands.Command(ctx, user, "-listEntities")
	if err != nil {
		return nil, err
	}
	if !r.Success {
		return nil, errors.New(r.Message)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &data); err != nil {
		return nil, fmt.Errorf("-listEntities answered %s: %w", r.Data, err)
	}
	var broken []struct{ Kind, Name, Error string }
	json.Unmarshal(data["notRunning"], &broken)
	var out []entity
	for _, k := range kinds {
		var names []string
		json.Unmarshal(data[k+"s"], &names)
		slices.Sort(names)
		for _, n := range names {
			e := entity{Kind: k, Name: n, State: "running", RunsOn: "this node"}
			for _, b := range broken {
				if strings.EqualFold(b.Kind, k) && b.Name == n {
					e.State, e.Problem = "failed", b.Error
				}
			}
			if k == "action" {
				if p, ok := c.o.Retained(sysTopic(k, n) + "/Error"); ok && len(p) > 0 {
					var ae struct {
						Error        string
						Line, Column int
						Time         time.Time
						Errors       uint64
					}
					if json.Unmarshal(p, &ae) == nil {
						e.LastError = fmt.Sprintf("%s (%d failed runs, last at %s)", ae.Error, ae.Errors, ae.Time.Local().Format(time.TimeOnly))
					}
				}
			}
			if k == "connector" && e.State == "running" {
				c.connectorState(&e)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// connectorStatus is the retained $SYS/Coreflux/Connectors/<name>/status
// the drivers publish (docs/connectors.md).
type connectorStatus struct {
	Type       string            `json:"type"`
	Device     string            `json:"device"`
	Connection string            `json:"connection"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	TagErrors  map[string]string `json:"tagErrors"`
}

var clusterNodeLine = regexp.MustCompile(`(?i)\bCLUSTER_NODE\s+["']?([A-Za-z0-9_.\-]+)`)

// connectorState fills a connector's state from its status: running
// (connected, all tags good), degraded (tags failing), failed (no
// connection), standby (stopped here); and the node it is pinned to.
func (c *Console) connectorState(e *entity) {
	if src, ok := c.o.Retained(sysTopic("connector", e.Name)); ok {
		if m := clusterNodeLine.FindSubmatch(src); m != nil {
			e.RunsOn = "pinned to " + string(m[1])
		}
	}
	p, ok := c.o.Retained(sysTopic("connector", e.Name) + "/status")
	var st connectorStatus
	if !ok || json.Unmarshal(p, &st) != nil {
		e.State, e.Detail = "standby", "no status published by this node"
		return
	}
	e.Detail = strings.TrimSpace(st.Type + " " + st.Device + ": " + st.Connection + ", " + st.Health)
	switch {
	case st.Connection == "Stopped":
		e.State = "standby"
	case st.Health == "Red" || st.Connection != "Connected":
		e.State = "failed"
	case st.Health == "Yellow":
		e.State = "degraded"
	}
	e.LastError = st.LastError
	tags := make([]string, 0, len(st.TagErrors))
	for tag, msg := range st.TagErrors {
		tags = append(tags, tag+": "+msg)
	}
	slices.Sort(tags)
	if len(tags) > 0 {
		e.LastError = strings.TrimSpace(e.LastError + " " + strings.Join(tags, "; "))
	}
}

func (c *Console) serveLoT(w http.ResponseWriter, r *http.Request, rq *req) {
	var l lotList
	var err error
	if l.Entities, err = c.listEntities(r.Context(), rq.user.Name); err != nil {
		l.Error = err.Error()
	}
	f := c.frame(rq, "LoT", "lot")
	f.Back = prefix + "lot"
	c.render(w, r, http.StatusOK, LoTPage(f, l))
}

// serveLoTRows is the list's body alone, for its periodic refresh. Without
// a session it answers 204, which htmx does not swap.
func (c *Console) serveLoTRows(w http.ResponseWriter, r *http.Request) {
	ss, u := c.current(r)
	if ss == nil || c.setupPending() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rq := &req{sess: ss, user: u, theme: themeOf(r)}
	var l lotList
	var err error
	if l.Entities, err = c.listEntities(r.Context(), u.Name); err != nil {
		w.WriteHeader(http.StatusNoContent) // keep what the page shows
		return
	}
	c.render(w, r, http.StatusOK, LoTRows(c.frame(rq, "", "lot"), l))
}

// editor is the state of the editor page.
type editor struct {
	Kind, Name string // of the definition edited; "" name: a new one
	Source     string
	Deployed   string // the deployed source, "" for a new definition
	Draft      bool   // Source is a draft that differs from Deployed
	DraftSaved time.Time
	Flash      string // what the last deploy did
	Errors     []command.ReplyError
	Message    string // the failed deploy's message
	Diff       []diffLine
}

const newActionTemplate = `DEFINE ACTION NewAction
ON TOPIC "sensors/+/temperature" DO
    PUBLISH TOPIC "alerts/" + TOPIC POSITION 2 WITH PAYLOAD
`

func (c *Console) serveEditor(w http.ResponseWriter, r *http.Request, rq *req) {
	q := r.URL.Query()
	kind, name := q.Get("kind"), q.Get("name")
	if !validKind(kind) {
		kind = "action"
	}
	ed := c.editorFor(rq.user.Name, kind, name)
	if q.Get("deployed") == "1" {
		ed.Flash = fmt.Sprintf("Deployed %s %s.", kind, name)
	}
	f := c.frame(rq, "Edit LoT", "lot")
	f.Back = r.URL.RequestURI()
	c.render(w, r, http.StatusOK, EditorPage(f, ed))
}

func (c *Console) editorFor(user, kind, name string) editor {
	ed := editor{Kind: kind, Name: name}
	if name != "" {
		if p, ok := c.o.Retained(sysTopic(kind, name)); ok {
			ed.Deployed = string(p)
		}
	}
	ed.Source = ed.Deployed
	if dr, ok := c.drafts.get(user, draftKey(kind, name)); ok && dr.Source != ed.Deployed {
		ed.Source, ed.Draft, ed.DraftSaved = dr.Source, true, dr.Saved
	}
	if ed.Source == "" && name == "" {
		ed.Source = newActionTemplate
	}
	if ed.Draft && ed.Deployed != "" {
		ed.Diff = lineDiff(ed.Deployed, ed.Source)
	}
	return ed
}

// diagnostic is one finding of the parser and checker, as the editor
// shows it.
type diagnostic struct {
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// postCheck parses and checks source with Gantry's own parser and checker
// (lot/check), against the callables and models deployed.
func (c *Console) postCheck(w http.ResponseWriter, r *http.Request, rq *req) {
	src := r.PostFormValue("src")
	_, diags := check.Source("", src, c.deployedEnv(r.Context(), rq.user.Name))
	out := make([]diagnostic, 0, len(diags))
	for _, d := range diags {
		msg := d.Msg
		if d.Hint != "" {
			msg += "; " + d.Hint
		}
		out = append(out, diagnostic{Line: d.Pos.Line, Column: d.Pos.Col, Severity: d.Severity.String(), Message: msg})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// deployedEnv describes the deployed callables and models for the checker,
// from their published sources.
func (c *Console) deployedEnv(ctx context.Context, user string) check.Env {
	env := check.Deployed{Callables: map[string]check.Callable{}, Models: map[string]check.Model{}}
	list, err := c.listEntities(ctx, user)
	if err != nil {
		return env
	}
	for _, e := range list {
		if e.Kind != "action" && e.Kind != "model" {
			continue
		}
		p, ok := c.o.Retained(sysTopic(e.Kind, e.Name))
		if !ok {
			continue
		}
		f, err := syntax.Parse("", string(p))
		if err != nil {
			continue
		}
		for _, d := range f.Defs {
			switch d := d.(type) {
			case *syntax.Action:
				if cl, ok := check.CallableOf(d); ok {
					env.Callables[e.Name] = cl
				}
			case *syntax.Model:
				env.Models[e.Name] = check.ModelOf(d, check.Model{})
			}
		}
	}
	return env
}

func (c *Console) postDraft(w http.ResponseWriter, r *http.Request, rq *req) {
	kind, name := r.PostFormValue("kind"), r.PostFormValue("name")
	if !validKind(kind) {
		http.Error(w, fmt.Sprintf("kind %q: want action, model, rule or connector", kind), http.StatusBadRequest)
		return
	}
	if err := c.drafts.put(rq.user.Name, draftKey(kind, name), r.PostFormValue("src")); err != nil {
		http.Error(w, "The draft was not saved: "+err.Error(), http.StatusInsufficientStorage)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) postDiscard(w http.ResponseWriter, r *http.Request, rq *req) {
	kind, name := r.PostFormValue("kind"), r.PostFormValue("name")
	c.drafts.drop(rq.user.Name, draftKey(kind, name))
	http.Redirect(w, r, editURL(kind, name), http.StatusSeeOther)
}

func editURL(kind, name string) string {
	return prefix + "lot/edit?kind=" + url.QueryEscape(kind) + "&name=" + url.QueryEscape(name)
}

// postDeploy sends the source as -addAction (-addModel, ...) through the
// command interface, as a client on $SYS/Coreflux/Command would.
func (c *Console) postDeploy(w http.ResponseWriter, r *http.Request, rq *req) {
	formKind, formName := r.PostFormValue("kind"), r.PostFormValue("name")
	src := strings.ReplaceAll(r.PostFormValue("src"), "\r\n", "\n")
	ed := editor{Kind: formKind, Name: formName, Source: src}
	if p, ok := c.o.Retained(sysTopic(ed.Kind, ed.Name)); ok && validKind(ed.Kind) && ed.Name != "" {
		ed.Deployed = string(p)
	}
	fail := func(msg string, errs []command.ReplyError) {
		c.drafts.put(rq.user.Name, draftKey(formKind, formName), src)
		ed.Message, ed.Errors, ed.Draft = msg, errs, true
		f := c.frame(rq, "Edit LoT", "lot")
		f.Back = editURL(formKind, formName)
		c.render(w, r, http.StatusUnprocessableEntity, EditorPage(f, ed))
	}
	kind, name, ok := kindAndName(src)
	if !ok {
		fail("The source has no DEFINE ACTION, MODEL, RULE or CONNECTOR line: start it with one, e.g. DEFINE ACTION Echo.", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	reply, err := c.o.Commands.Command(ctx, rq.user.Name, "-add"+strings.ToUpper(kind[:1])+kind[1:]+" "+src)
	if err != nil {
		fail("The node did not answer the deploy: "+err.Error(), nil)
		return
	}
	if !reply.Success {
		fail(reply.Message, reply.Errors)
		return
	}
	c.drafts.drop(rq.user.Name, draftKey(formKind, formName), draftKey(kind, name))
	c.log.Info("LoT deployed from the console", "kind", kind, "name", name, "user", rq.user.Name)
	http.Redirect(w, r, editURL(kind, name)+"&deployed=1", http.StatusSeeOther)
}

func (c *Console) postRemove(w http.ResponseWriter, r *http.Request, rq *req) {
	kind, name := r.PostFormValue("kind"), r.PostFormValue("name")
	if !validKind(kind) || name == "" {
		http.Error(w, "kind and name are required", http.StatusBadRequest)
		return
	}
	reply, err := c.o.Commands.Command(r.Context(), rq.user.Name, "-remove"+strings.ToUpper(kind[:1])+kind[1:]+" "+name)
	if err == nil && !reply.Success {
		err = errors.New(reply.Message)
	}
	if err != nil {
		http.Error(w, "Not removed: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	http.Redirect(w, r, prefix+"lot", http.StatusSeeOther)
}

// diffLine is one line of a line diff: op is ' ', '+' or '-'.
type diffLine struct {
	Op   byte
	Text string
}

// lineDiff is a longest-common-subsequence diff of two sources' lines
// (bounded: beyond 2,000 lines each it shows both whole).
func lineDiff(a, b string) []diffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(x) > 2000 || len(y) > 2000 {
		var out []diffLine
		for _, l := range x {
			out = append(out, diffLine{'-', l})
		}
		for _, l := range y {
			out = append(out, diffLine{'+', l})
		}
		return out
	}
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{' ', x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{'-', x[i]})
			i++
		default:
			out = append(out, diffLine{'+', y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, diffLine{'-', x[i]})
	}
	for ; j < len(y); j++ {
		out = append(out, diffLine{'+', y[j]})
	}
	return out
}

func diffClass(op byte) string {
	switch op {
	case '+':
		return "add"
	case '-':
		return "del"
	}
	return ""
}

func diffText(d diffLine) string { return string(d.Op) + " " + d.Text }

func errorWhere(e command.ReplyError) string {
	if e.Line == 0 {
		return ""
	}
	return fmt.Sprintf("Line %d, column %d: ", e.Line, e.Column)
}

func removeURL(kind, name string) string {
	return prefix + "lot/remove?kind=" + url.QueryEscape(kind) + "&name=" + url.QueryEscape(name)
}

// serveRemoveLoT asks before a definition is removed.
func (c *Console) serveRemoveLoT(w http.ResponseWriter, r *http.Request, rq *req) {
	kind, name := r.URL.Query().Get("kind"), r.URL.Query().Get("name")
	if !validKind(kind) || name == "" {
		http.Error(w, "kind and name are required", http.StatusBadRequest)
		return
	}
	q := fmt.Sprintf("Remove %s %s? It stops at once on this node; there is no undo.", kind, name)
	if kind == "rule" {
		q += " Removing an access rule can lock clients, and you, out."
	}
	f := c.frame(rq, "Remove "+name, "lot")
	c.render(w, r, http.StatusOK, ConfirmPage(f, confirm{Title: "Remove " + kind + " " + name, Question: q,
		Action: prefix + "lot/remove", Fields: map[string]string{"kind": kind, "name": name}, Yes: "Remove " + name, Back: prefix + "lot"}))
}
