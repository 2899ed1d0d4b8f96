package command

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary payloads to Parse and to a Dispatcher without
// handlers: nothing may panic, a parsed command must be coherent and every
// reply must be valid JSON. The committed corpus is under
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"-addAction " + hello, "-addAction " + multi + " -requestId x", "-removeAction A -requestId 1",
		`-runAction A {"a":1}`, "-setEnv A=b c", `-addUser "a b" 'c d'`, "--remove-all-routes", "-addActon",
	} {
		f.Add([]byte(s))
	}
	d := NewDispatcher(Handlers{}, nil)
	f.Fuzz(func(t *testing.T, payload []byte) {
		cmd, err := Parse(payload)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("Parse(%q) error %v is not a *ParseError with a message", payload, err)
			}
		} else {
			checkCommand(t, payload, cmd)
		}
		r, ok := d.Handle(context.Background(), Caller{}, payload)
		if !ok {
			if err != nil || cmd.Verb != UpdateData {
				t.Fatalf("no reply for %q", payload)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(r.Encode(), &m); err != nil {
			t.Fatalf("reply to %q is not JSON: %v", payload, err)
		}
		if r.Success {
			t.Fatalf("a dispatcher without handlers succeeded on %q", payload)
		}
	})
}

func checkCommand(t *testing.T, payload []byte, cmd Command) {
	t.Helper()
	if cmd.Verb < 1 || cmd.Verb >= numVerbs || !strings.HasPrefix(cmd.Name, "-") {
		t.Fatalf("Parse(%q) = verb %d, name %q", payload, cmd.Verb, cmd.Name)
	}
	switch verbs[cmd.Verb].args {
	case argsSource:
		if strings.TrimSpace(cmd.Source) == "" || !strings.Contains(string(payload), cmd.Source) {
			t.Fatalf("Parse(%q): source %q is not a non-blank part of the payload", payload, cmd.Source)
		}
	case argsName, argsRun, argsUserPass, argsAssign:
		if cmd.Target == "" && cmd.Verb != RunAction {
			t.Fatalf("Parse(%q): no target", payload)
		}
	}
	if cmd.Input != nil && !json.Valid(cmd.Input) {
		t.Fatalf("Parse(%q): input %q is not JSON", payload, cmd.Input)
	}
}
