package interp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gantry/lot/check"
	"gantry/lot/syntax"
)

// step is one thing a scenario does to a world, and what must be
// delivered (PUBLISH, not KEEP) as a result, in order, as "topic=payload".
// A payload written as JSON is compared as JSON.
type step struct {
	publish string // "topic=payload": a client publish
	tick    syntax.TriggerKind
	call    string           // run this callable with args
	args    map[string]Value // for call
	want    []string
	check   func(t *testing.T, w *world)
}

// referenceScenarios are the expectations of LOT.md §4.6, §5.9 and §8.4,
// by program file; each file's comment header says the same in words.
var referenceScenarios = map[string][]step{
	"4.6-a01-echo.lot": {
		{publish: "in/msg=hello", want: []string{"out/msg=hello"}, check: notRetained},
	},
	"4.6-a02-plus-one.lot": {
		{publish: "num/in=10", want: []string{"num/out=11"}},
		{publish: "num/in=2.5", want: []string{"num/out=3.5"}},
	},
	"4.6-a03-wildcard-topic-position.lot": {
		{publish: "sensors/s7/temperature=21.5", want: []string{"processed/s7=T=21.5"}},
		{publish: "sensors/s7/humidity=40", want: nil},
	},
	"4.6-a04-timer-counter.lot": {
		{tick: syntax.TriggerEvery, want: []string{"count=0"}},
		{tick: syntax.TriggerEvery, want: []string{"count=1"}},
		{tick: syntax.TriggerEvery, want: []string{"count=2"}},
	},
	"4.6-a05-replace.lot": {
		{publish: "selected/machine=12", want: []string{"announce=Machine 12 was selected"}},
	},
	"4.6-a06-get-json-threshold.lot": {
		{publish: `dev/a/json={"data":{"temp":31.5}}`, want: []string{"alerts/a=hot 31.5"}},
		{publish: `dev/a/json={"data":{"temp":20}}`, want: nil, check: topicIs("state/a", "20")},
		{publish: `dev/a/json={"x":1}`, want: nil, check: topicIs("state/a", "0")},
	},
	"4.6-a07-keep-topic.lot": {
		{publish: "mode/set=auto", want: nil, check: topicIs("state/mode", "auto")},
		{publish: "mode/get=?", want: []string{"mode/value=auto"}},
	},
	"4.6-a08-callable.lot": {
		{publish: `pair/in={"x":10,"y":20}`, want: []string{"pair/avg=15"}},
	},
	"4.6-a09-on-change.lot": {
		{publish: "meter/1/state=on", want: []string{"changes/1=on"}},
		{publish: "meter/1/state=on", want: nil},
		{publish: "meter/1/state=off", want: []string{"changes/1=off"}},
		{publish: "meter/1/state=off", want: nil},
		{publish: "meter/1/state=on", want: []string{"changes/1=on"}},
		{publish: "meter/2/state=on", want: []string{"changes/2=on"}},
	},
	"4.6-a10-on-start-audit.lot": {
		{tick: syntax.TriggerStart, want: []string{"system/status=online"}},
		{publish: "plant/a=x", want: []string{"audit/count=1"}},
		{publish: "plant/a/b/c=y", want: []string{"audit/count=2"}},
	},
	"4.6-a11-callable-description.lot": {
		{call: "LampOn", want: []string{"lamp=true"}, check: func(t *testing.T, w *world) {
			if d := w.reg.programs["LampOn"].Action().Description; d == nil || d.Value != "Turns the lamp on" {
				t.Errorf("description = %v", d)
			}
		}},
	},
	"4.6-a12-timer-reads-payload.lot": {
		{check: checkerRejects},
	},
	"5.9-m1-triggered-aggregation.lot": {
		{publish: "equip/id=P1", want: nil},
		{publish: "equip/hours=12", want: nil},
		{publish: "equip/status=RUN", want: []string{
			`equip/formatted={"id":"P1","status":"RUN","hours":12,"site":"A"}`,
			"equip/formatted/id=P1", "equip/formatted/status=RUN",
			"equip/formatted/hours=12", "equip/formatted/site=A",
		}},
	},
	"5.9-m2-json-explosion.lot": {
		{publish: `sensors/dev1/data={"temperature":23.5,"humidity":65,"status":"active"}`, want: []string{
			"sensors/dev1/data/temperature=23.5", "sensors/dev1/data/humidity=65", "sensors/dev1/data/status=active",
		}},
	},
	"5.9-m3-wildcard-explosion.lot": {
		{publish: `proc/m/33/material={"Name":"Peppers"}`, want: []string{"proc/m/33/material/Name=Peppers"}},
		{publish: `proc/m/34/material={"Name":"Salt"}`, want: []string{"proc/m/34/material/Name=Salt"}},
	},
	"5.9-m4-calculated-fields.lot": {
		{publish: "line/target=100", want: nil},
		{publish: "line/produced=95", want: []string{
			`line/eff={"produced":95,"target":100,"pct":95,"grade":"OK"}`,
			"line/eff/produced=95", "line/eff/target=100", "line/eff/pct=95", "line/eff/grade=OK",
		}},
	},
	"5.9-m5-template-publish-model.lot": {
		{publish: "t/k1/value=85", want: []string{`alerts/k1={"severity":"HIGH","source":"lot","value":85}`}},
		{publish: "t/k1/value=70", want: nil},
	},
	"5.9-m6-no-trigger.lot": {
		{publish: "idle/a=1", want: nil},
		{publish: "idle/b=2", want: nil},
		{publish: "idle/a=3", want: nil},
	},
	"8.4-c1-deploy-flat.lot": {
		{tick: syntax.TriggerEvery, want: []string{"test=hello"}},
	},
	"8.4-c3-replace.lot": {
		{tick: syntax.TriggerEvery, want: []string{"test=hello again"}},
	},
	"8.4-c8-run-callable.lot": {
		{call: "Average2", args: map[string]Value{"a": Int(1), "b": Int(3)}, want: nil},
	},
}

// TestReferencePrograms runs the example programs of the reference through
// the interpreter and checks what they publish. Programs of other parts
// (rules, connectors) are not the interpreter's and have no scenario.
func TestReferencePrograms(t *testing.T) {
	files, err := filepath.Glob("../testdata/programs/*.lot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no programs: %v", err)
	}
	seen := 0
	for _, path := range files {
		name := filepath.Base(path)
		steps, ok := referenceScenarios[name]
		if !ok {
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			runScenario(t, string(src), steps)
		})
	}
	if seen != len(referenceScenarios) {
		t.Errorf("ran %d of %d scenarios: a program file is missing", seen, len(referenceScenarios))
	}
}

func runScenario(t *testing.T, src string, steps []step) {
	t.Helper()
	w := newWorld(t, src)
	for i, s := range steps {
		n := len(w.rec.out)
		switch {
		case s.publish != "":
			topic, payload, _ := strings.Cut(s.publish, "=")
			w.publish(topic, payload)
		case s.tick != 0:
			w.tick(s.tick)
		case s.call != "":
			if _, err := w.reg.programs[s.call].Call(w.host(), s.args); err != nil {
				t.Fatalf("step %d: call %s: %v", i, s.call, err)
			}
		}
		if err := sameMessages(w.since(n), s.want); err != nil {
			t.Errorf("step %d (%s): %v", i, s.publish, err)
		}
		if s.check != nil {
			s.check(t, w)
		}
	}
}

// sameMessages compares "topic=payload" lists, payloads that are JSON
// objects as JSON.
func sameMessages(got, want []string) error {
	if len(got) == len(want) {
		same := true
		for i := range got {
			same = same && sameMessage(got[i], want[i])
		}
		if same {
			return nil
		}
	}
	return sameList(got, want)
}

func sameMessage(got, want string) bool {
	gt, gp, _ := strings.Cut(got, "=")
	wt, wp, _ := strings.Cut(want, "=")
	if gt != wt {
		return false
	}
	if strings.HasPrefix(wp, "{") {
		var a, b any
		return json.Unmarshal([]byte(gp), &a) == nil && json.Unmarshal([]byte(wp), &b) == nil && reflect.DeepEqual(a, b)
	}
	return gp == wp
}

func notRetained(t *testing.T, w *world) {
	for _, p := range w.rec.out {
		if p.Retain || p.QoS != 0 {
			t.Errorf("%v: want not retained, QoS 0", p)
		}
	}
}

func topicIs(topic, want string) func(t *testing.T, w *world) {
	return func(t *testing.T, w *world) {
		if got, _ := w.rec.Lookup(topic); string(got) != want {
			t.Errorf("GET TOPIC %q = %q, want %q", topic, got, want)
		}
	}
}

// checkerRejects: A12 parses and compiles, but deploying it is refused by
// gantry/lot/check before the interpreter sees it.
func checkerRejects(t *testing.T, w *world) {
	src, _ := os.ReadFile("../testdata/programs/4.6-a12-timer-reads-payload.lot")
	if _, diags := check.Source("a12.lot", string(src), nil); !check.HasErrors(diags) {
		t.Errorf("the checker accepts a timer that reads PAYLOAD")
	}
}

// TestCallableOutputs checks C8's outputs: Average2 of 1 and 3 is 2.
func TestCallableOutputs(t *testing.T) {
	w := newWorld(t, "DEFINE ACTION Average2\nINPUT a AS DOUBLE\nINPUT b AS DOUBLE\nDO\n    SET \"avg\" WITH ({a} + {b}) / 2\nRETURN\n    OUTPUT avg\n")
	out, err := w.reg.programs["Average2"].Call(w.host(), map[string]Value{"a": Int(1), "b": String("3")})
	if err != nil {
		t.Fatal(err)
	}
	if got := out["avg"]; got.Kind() != KindFloat || got.Text() != "2" {
		t.Errorf("avg = %v (%v), want 2 (double)", got, got.Kind())
	}
}
