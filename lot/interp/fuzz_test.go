package interp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gantry/lot/syntax"
)

// fuzzOptions keep one fuzzed run short: every bound still applies, only
// smaller.
func fuzzOptions() *Options {
	return &Options{MaxLoopIterations: 200, MaxSteps: 5000, MaxValueBytes: 64 << 10,
		MaxExplodeTopics: 200, Clock: func() time.Time { return fixedClock }, Location: time.UTC,
		Random: &seqRandom{}}
}

// FuzzRun parses arbitrary LoT, compiles what parses and runs every action
// and model of it on an arbitrary message. Nothing may panic (a recovered
// panic, ErrPanic, fails too: the host here never panics, so it would be
// the interpreter's) and nothing may hang: every run is bounded.
func FuzzRun(f *testing.F) {
	files, _ := filepath.Glob("../testdata/programs/*.lot")
	for _, path := range files {
		if src, err := os.ReadFile(path); err == nil {
			f.Add(string(src), []byte(`{"data":{"temp":31.5},"x":10,"y":20}`), "sensors/s7/temperature")
		}
	}
	f.Fuzz(func(t *testing.T, src string, payload []byte, topic string) {
		file, err := syntax.Parse("fuzz.lot", src)
		if err != nil {
			return
		}
		d := &deployment{reg: &registry{programs: map[string]*Program{}, models: map[string]*Model{}}, rec: newRecorder()}
		d.host = &Host{Effects: d.rec, Topics: d.rec, Env: d.rec, Callables: d.reg, Models: d.reg}
		for _, def := range file.Defs {
			switch def := def.(type) {
			case *syntax.Action:
				if p, err := Compile(def, fuzzOptions()); err == nil {
					d.reg.programs[def.Name] = p
				}
			case *syntax.Model:
				if m, err := CompileModel(def, d.reg, fuzzOptions()); err == nil {
					d.reg.models[def.Name] = m
				}
			}
		}
		ev := &Event{Topic: topic, Payload: payload, Session: Session{ClientID: "c", User: "u"}}
		for _, p := range d.reg.programs {
			noPanic(t, p.Run(d.host, ev))
			_, err := p.Call(d.host, map[string]Value{"a": String(topic), "b": textValue(payload)})
			noPanic(t, err)
		}
		for _, m := range d.reg.models {
			if inst, ok := m.Instance(topic); ok {
				_, err := m.Evaluate(d.host, inst)
				noPanic(t, err)
			}
			_, err := m.Evaluate(d.host, Instance{Bindings: []string{topic}})
			noPanic(t, err)
			noPanic(t, m.Explode(topic, payload, func(string, []byte) error { return nil }))
		}
	})
}

func noPanic(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrPanic) {
		t.Fatalf("the interpreter panicked: %v", err)
	}
}

// FuzzJSON holds the JSON reader to encoding/json's verdict on what is
// valid, and checks that ParseJSON, GET JSON paths and explosion never
// panic on any input.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":{"b":[1,2,{"c":"d"}]}}`, `[1, 2.5e3, -0.1, true, false, null]`,
		`"\ud83d\ude00\u00e9\n"`, `{"a":1,"a":2}`, `{`, `01`, `1.`, `"\x"`, ` 7 `, `{"k":"\u0000"}`} {
		f.Add([]byte(s), "a.b.2.c")
	}
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		_, err := validJSON(string(doc))
		if err != nil && strings.Contains(err.Error(), "nesting too deep") {
			return // encoding/json allows deeper nesting than GET JSON
		}
		if (err == nil) != json.Valid(doc) {
			t.Fatalf("validJSON(%q) = %v, encoding/json disagrees", doc, err)
		}
		if err != nil {
			return
		}
		if _, err := ParseJSON(doc); err != nil && !errors.Is(err, ErrNumberRange) {
			t.Fatalf("ParseJSON(%q): %v", doc, err)
		}
		if raw, found, err := lookupJSON(string(doc), parsePath(path)); err != nil || (found && !json.Valid([]byte(raw))) {
			t.Fatalf("lookupJSON(%q, %q) = %q, %v, %v", doc, path, raw, found, err)
		}
		Members(Value{kind: KindJSON, s: strings.TrimSpace(string(doc))})
		var want string
		if raw := strings.Trim(string(doc), " \t\r\n"); json.Unmarshal(doc, &want) == nil {
			if got := decodeString(raw); got != want && utf8.ValidString(raw) {
				t.Fatalf("decodeString(%s) = %q, encoding/json says %q", raw, got, want)
			}
		}
		enc := appendJSONString(nil, string(doc))
		if err := json.Unmarshal(enc, &want); err != nil || want != string([]rune(string(doc))) {
			t.Fatalf("appendJSONString(%q) = %s, decodes to %q, %v", doc, enc, want, err)
		}
	})
}
