package interp

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want string // the error text
	}{
		{"call python", onMsg + "    CALL PYTHON \"S.f\" WITH (1) RETURN AS {v}\n",
			"action T at 3:5: CALL PYTHON is not supported by Gantry"},
		{"bare word", onMsg + "    PUBLISH TOPIC \"o\" WITH value\n",
			`action T at 3:28: value is not a value: write {value} for a variable or "value" for text`},
		{"topic position zero", onMsg + "    PUBLISH TOPIC \"o\" WITH TOPIC POSITION 0\n",
			"action T at 3:43: TOPIC POSITION 0: positions are whole numbers from 1"},
		{"bad regex", onMsg + "    PUBLISH TOPIC \"o\" WITH FILTER PAYLOAD USING REGEX \"(\"\n",
			"action T at 3:55: bad regular expression \"(\""},
		{"long regex", onMsg + "    PUBLISH TOPIC \"o\" WITH FILTER PAYLOAD USING REGEX \"" + strings.Repeat("a", 2000) + "\"\n",
			"over the limit of 1024"},
		{"wildcard topic", onMsg + "    PUBLISH TOPIC \"a/+\" WITH 1\n",
			"action T at 3:19: topic \"a/+\" has a wildcard"},
		{"two errors", onMsg + "    PUBLISH TOPIC \"#\" WITH 1\n    CALL MCP \"a.b\" WITH (x = 1) RETURN AS {v}\n",
			"has a wildcard; publish to a concrete topic\naction T at 4:5: CALL MCP is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(actionOf(t, c.src), nil)
			if !errors.Is(err, ErrCompile) && !errors.Is(err, ErrTopic) {
				t.Fatalf("error %v, want a compile error", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestRuntimeErrorNamesThePlace(t *testing.T) {
	src := onMsg + "    SET \"t\" WITH GET JSON \"a\" IN PAYLOAD\n    PUBLISH TOPIC \"o\" WITH {t} / 0\n"
	d := deploy(t, src, nil)
	err := d.run("T", "in/a", `{"a":2}`)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrDivisionByZero) {
		t.Fatalf("error %v, want an *Error with ErrDivisionByZero", err)
	}
	if e.Kind != "action" || e.Def != "T" || e.Pos.Line != 4 || e.Pos.Col != 32 {
		t.Errorf("error at %s %s %s, want action T 4:32", e.Kind, e.Def, e.Pos)
	}
	if want := "action T at 4:32: division by zero"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	err = d.run("T", "in/a", `{"a":`)
	if want := "action T at 3:18: GET JSON: bad JSON: missing value at the end of \"{\\\"a\\\":\""; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestEffectErrors(t *testing.T) {
	d := deploy(t, onMsg+"    KEEP TOPIC \"state\" WITH 1\n", nil)
	full := errors.New("topiccache: full of kept values")
	d.rec.fail = full
	err := d.run("T", "in/a", "")
	if !errors.Is(err, ErrEffect) || !errors.Is(err, full) {
		t.Fatalf("error %v, want ErrEffect wrapping the cache's error", err)
	}
	if want := `action T at 3:5: KEEP TOPIC "state": topiccache: full of kept values`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}

	d.host.Effects = nil
	if err := d.run("T", "in/a", ""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no Effects: error %v, want ErrUnavailable", err)
	}
	d.host.Callables, d.host.Models = nil, nil
	for _, src := range []string{onMsg + "    CALL ACTION X\n", onMsg + "    PUBLISH MODEL M TO \"t\" WITH a = 1\n"} {
		p, err := Compile(actionOf(t, src), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(d.host, nil); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%q without a registry: error %v, want ErrUnavailable", src, err)
		}
	}
}

// panicky is a Host whose every method panics.
type panicky struct{}

func (panicky) Publish(string, []byte, bool, byte) error { panic("publish exploded") }
func (panicky) Keep(string, []byte) error                { panic("keep exploded") }
func (panicky) Lookup(string) ([]byte, bool)             { panic("lookup exploded") }
func (panicky) Env(string) (string, bool)                { panic("env exploded") }
func (panicky) Secret(string) (string, bool)             { panic("secret exploded") }
func (panicky) Callable(string) (*Program, bool)         { panic("callable exploded") }
func (panicky) Model(string) (*Model, bool)              { panic("model exploded") }

func TestPanicsBecomeErrors(t *testing.T) {
	host := &Host{Effects: panicky{}, Topics: panicky{}, Env: panicky{}, Callables: panicky{}, Models: panicky{}}
	cases := []struct {
		name string
		stmt string
		want string
	}{
		{"publish", `PUBLISH TOPIC "o" WITH 1`, "action T at 3:5: internal error: publish exploded"},
		{"keep", `KEEP TOPIC "o" WITH 1`, "keep exploded"},
		{"get topic", `SET "x" WITH GET TOPIC "a"`, "lookup exploded"},
		{"get env", `SET "x" WITH GET ENV "a"`, "env exploded"},
		{"call", `CALL ACTION X`, "callable exploded"},
		{"publish model", `PUBLISH MODEL M TO "t" WITH a = 1`, "model exploded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(actionOf(t, onMsg+"    "+c.stmt+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Run(host, &Event{Topic: "in/a"})
			if !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrPanic saying %q", err, c.want)
			}
			// The pooled run state is reusable after a panic.
			if err := p.Run(&Host{Effects: newRecorder()}, nil); err != nil && !errors.Is(err, ErrUnavailable) {
				t.Errorf("run after a panic: %v", err)
			}
		})
	}

	d := deploy(t, "DEFINE MODEL M WITH TOPIC \"m\"\n    ADD STRING \"a\" WITH TOPIC \"a\" AS TRIGGER\n", nil)
	m := d.reg.models["M"]
	inst, _ := m.Instance("a")
	if _, err := m.Evaluate(&Host{Topics: panicky{}}, inst); !errors.Is(err, ErrPanic) {
		t.Errorf("Evaluate with a panicking reader: %v, want ErrPanic", err)
	}
}

func TestOptions(t *testing.T) {
	if err := (&Options{MaxLoopIterations: -1}).Validate(); err == nil ||
		err.Error() != "interp: Options.MaxLoopIterations = -1, want 1..1073741824" {
		t.Errorf("Validate: %v", err)
	}
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := Compile(actionOf(t, onMsg+"    SET \"a\" WITH 1\n"), &Options{MaxCallDepth: 5000}); err == nil {
		t.Error("Compile accepted MaxCallDepth 5000")
	}
}
