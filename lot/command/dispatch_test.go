package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gantry/lot/defs"
)

// fakeHandlers implements every handler family over maps.
type fakeHandlers struct {
	entities map[string]string // "kind/name" -> source
	users    map[string]string
	env      map[string]string
	denied   map[string]bool // scopes refused
	calls    []string
}

func newFake() *fakeHandlers {
	return &fakeHandlers{entities: map[string]string{}, users: map[string]string{}, env: map[string]string{}, denied: map[string]bool{}}
}

// posErr is a parser-like error.
type posErr struct {
	line, col int
	msg       string
}

func (e posErr) Error() string         { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }
func (e posErr) Position() (int, int)  { return e.line, e.col }
func (e posErr) Suggestions() []string { return []string{"add DO after the trigger"} }
func (f *fakeHandlers) Allowed(_ context.Context, _ Caller, scope string) bool {
	return !f.denied[scope]
}

func (f *fakeHandlers) Add(_ context.Context, _ Caller, k defs.Kind, src string) (string, error) {
	fields := strings.Fields(src)
	if strings.Contains(src, "PUBLISH") && !strings.Contains(src, " DO ") {
		return "", errors.Join(posErr{1, 35, "expected DO"}, posErr{1, 40, "second problem"})
	}
	if strings.Contains(src, "PANIC") {
		panic("handler bug")
	}
	f.entities[string(k)+"/"+fields[2]] = src
	return fields[2], nil
}

func (f *fakeHandlers) Remove(_ context.Context, _ Caller, k defs.Kind, name string) error {
	if _, ok := f.entities[string(k)+"/"+name]; !ok {
		return fmt.Errorf("%w: %s %q", defs.ErrNotFound, k, name)
	}
	delete(f.entities, string(k)+"/"+name)
	return nil
}

func (f *fakeHandlers) RemoveAll(_ context.Context, _ Caller, k defs.Kind) (int, error) {
	n := 0
	for key := range f.entities {
		if strings.HasPrefix(key, string(k)+"/") {
			delete(f.entities, key)
			n++
		}
	}
	return n, nil
}

func (f *fakeHandlers) RunAction(_ context.Context, _ Caller, name string, in json.RawMessage) (any, error) {
	if _, ok := f.entities["action/"+name]; !ok {
		return nil, ErrNotFound
	}
	return map[string]any{"status": "ok", "published": []string{}, "input": in}, nil
}

func (f *fakeHandlers) AddUser(_ context.Context, _ Caller, name, pw string) error {
	if _, ok := f.users[name]; ok {
		return errors.New("user exists")
	}
	f.users[name] = pw
	return nil
}

func (f *fakeHandlers) RemoveUser(_ context.Context, _ Caller, name string) error {
	if _, ok := f.users[name]; !ok {
		return ErrNotFound
	}
	delete(f.users, name)
	return nil
}

func (f *fakeHandlers) ChangePassword(_ context.Context, _ Caller, name, pw string) error {
	f.users[name] = pw
	return nil
}

func (f *fakeHandlers) SetEnv(_ context.Context, _ Caller, n, v string) error {
	f.env[n] = v
	return nil
}

func (f *fakeHandlers) SetSecret(_ context.Context, _ Caller, n, v string) error {
	f.env["secret."+n] = v
	return nil
}

func (f *fakeHandlers) LoadProject(_ context.Context, _ Caller, name string) (any, error) {
	return map[string]int{"actions": 2}, nil
}

func (f *fakeHandlers) ListEntities(context.Context, Caller) (any, error) {
	return []map[string]string{{"type": "action", "name": "Hello", "origin": "adhoc"}}, nil
}

func dispatcher(f *fakeHandlers) *Dispatcher {
	return NewDispatcher(Handlers{Entities: f, Runner: f, Users: f, Environment: f, Projects: f, Authorizer: f}, nil)
}

// envelope returns the reply as a generic JSON map.
func envelope(t *testing.T, r Reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Encode(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDispatchConformance(t *testing.T) {
	f := newFake()
	d := dispatcher(f)
	root := Caller{User: "root"}
	steps := []struct {
		name    string
		payload string
		want    map[string]any // fields of the envelope
		msg     string         // substring of message
	}{
		{"C1 deploy", "-addAction " + hello + " -requestId r1",
			map[string]any{"success": true, "command": "AddAction", "requestId": "r1", "entityType": "Action", "entityName": "Hello"},
			"Action 'Hello' added successfully!"},
		{"C4 parse error", `-addAction DEFINE ACTION X ON EVERY 10 SECONDS PUBLISH TOPIC "t" WITH 1`,
			map[string]any{"success": false, "command": "AddAction", "entityName": "X"}, "Parsing error: Action 'X' at (1,35)"},
		{"C8 run", `-runAction Hello {"a":1,"b":3}`,
			map[string]any{"success": true, "command": "RunAction"}, "executed successfully"},
		{"run missing", `-runAction Nope`, map[string]any{"success": false}, "Action 'Nope' not found"},
		{"C2 remove", "-removeAction Hello", map[string]any{"success": true, "command": "RemoveAction"}, "Action 'Hello' removed successfully!"},
		{"remove missing", "-removeAction Hello", map[string]any{"success": false, "entityName": "Hello"}, "Action 'Hello' not found"},
		{"route alias", "-addRoute DEFINE ROUTE P WITH TYPE MODBUS_TCP", map[string]any{"success": true, "command": "AddRoute", "entityType": "Route"},
			"Route 'P' added successfully!"},
		{"connector", "-removeConnector P", map[string]any{"success": true, "command": "RemoveConnector", "entityType": "Connector"}, "removed"},
		{"C7 remove all models", "-removeAllModels", map[string]any{"success": true, "command": "RemoveAllModels"}, "Removed all models successfully"},
		{"C5 add user", "-addUser op Pass123!", map[string]any{"success": true, "command": "AddUser"}, "User op added successfully!"},
		{"add user twice", "-addUser op x", map[string]any{"success": false}, "Error: could not add user 'op': user exists"},
		{"remove user", "-removeUser op", map[string]any{"success": true}, "User op removed successfully!"},
		{"secret not echoed", "-setSecret TOKEN=s3cret", map[string]any{"success": true, "entityType": "Secret"}, "Secret TOKEN set successfully!"},
		{"env", "-setEnv A=1", map[string]any{"success": true}, "Environment variable A set successfully!"},
		{"project", `-loadProject "My Project"`, map[string]any{"success": true, "entityName": "My Project"}, "Project 'My Project' loaded successfully!"},
		{"list", "-listEntities", map[string]any{"success": true, "command": "ListEntities"}, "Entities listed successfully"},
		{"unknown", "-addActon x -requestId q", map[string]any{"success": false, "command": "AddActon", "requestId": "q"},
			"Unknown command: -addActon. Did you mean -addAction?"},
		{"panicking handler", "-addAction DEFINE ACTION PANIC ON START DO SET \"a\" WITH 1",
			map[string]any{"success": false}, "Internal error while executing -addAction"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r, ok := d.Handle(context.Background(), root, []byte(s.payload))
			if !ok {
				t.Fatal("no reply")
			}
			m := envelope(t, r)
			for k, v := range s.want {
				if m[k] != v {
					t.Fatalf("%s = %v, want %v; envelope %s", k, m[k], v, r.Encode())
				}
			}
			if !strings.Contains(r.Message, s.msg) {
				t.Fatalf("message %q, want %q", r.Message, s.msg)
			}
			if _, ok := m["data"]; !ok {
				t.Fatalf("envelope without data: %s", r.Encode())
			}
			if strings.Contains(string(r.Encode()), "s3cret") || strings.Contains(string(r.Encode()), "Pass123!") {
				t.Fatalf("reply echoes a secret: %s", r.Encode())
			}
		})
	}
}

func TestDispatchPositionedErrors(t *testing.T) {
	d := dispatcher(newFake())
	r, _ := d.Handle(context.Background(), Caller{}, []byte("-addAction DEFINE ACTION X ON EVERY 10 SECONDS\n    PUBLISH TOPIC \"t\" WITH 1"))
	if len(r.Errors) != 2 {
		t.Fatalf("errors %+v, want the two joined errors", r.Errors)
	}
	e := r.Errors[0]
	if e.Line != 1 || e.Column != 35 || len(e.Suggestions) != 1 {
		t.Fatalf("first error %+v", e)
	}
	want := []string{"1 | DEFINE ACTION X ON EVERY 10 SECONDS", "  | " + strings.Repeat(" ", 34) + "^"}
	if strings.Join(e.SourceLines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("source lines\n%s\nwant\n%s", strings.Join(e.SourceLines, "\n"), strings.Join(want, "\n"))
	}
}

func TestDispatchPermissionAndAvailability(t *testing.T) {
	f := newFake()
	f.denied["ActionManagementCreation"] = true
	d := dispatcher(f)
	r, _ := d.Handle(context.Background(), Caller{User: "guest"}, []byte("-addAction "+hello))
	if r.Success || r.Message != "Permission denied: You are not allowed to execute -addAction" || len(f.entities) != 0 {
		t.Fatalf("denied command: %+v, entities %v", r, f.entities)
	}
	bare := NewDispatcher(Handlers{}, nil)
	r, _ = bare.Handle(context.Background(), Caller{}, []byte("-addUser a b"))
	if r.Success || r.Message != "Command -addUser is not available on this node" {
		t.Fatalf("unavailable: %+v", r)
	}
	if _, ok := bare.Handle(context.Background(), Caller{}, []byte("-updateData")); ok {
		t.Fatal("-updateData got a reply")
	}
}

func TestReplyEncoding(t *testing.T) {
	r := Reply{Success: true, Command: "AddRoute", RequestID: "1", Message: "Route 'X' added successfully!", EntityType: "Route", EntityName: "X"}
	want := `{"success":true,"command":"AddRoute","requestId":"1","message":"Route 'X' added successfully!","entityType":"Route","entityName":"X","data":{}}`
	if got := string(r.Encode()); got != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}
	bad := Reply{Data: json.RawMessage("{nope")}
	var m map[string]any
	if err := json.Unmarshal(bad.Encode(), &m); err != nil {
		t.Fatalf("invalid data produced invalid JSON: %v", err)
	}
}
