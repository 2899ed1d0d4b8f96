package interp

import (
	"errors"
	"strings"
	"testing"

	"gantry/lot/syntax"
)

// deployment is a compiled source with a recorder as its Host.
type deployment struct {
	reg  *registry
	rec  *recorder
	host *Host
}

// deploy compiles every action and model of src with opts (testOptions
// when nil).
func deploy(t testing.TB, src string, opts *Options) *deployment {
	t.Helper()
	if opts == nil {
		opts = testOptions()
	}
	d := &deployment{reg: &registry{programs: map[string]*Program{}, models: map[string]*Model{}}, rec: newRecorder()}
	d.host = &Host{Effects: d.rec, Topics: d.rec, Env: d.rec, Callables: d.reg, Models: d.reg}
	for _, def := range parseOne(t, src).Defs {
		switch def := def.(type) {
		case *syntax.Action:
			p, err := Compile(def, opts)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			d.reg.programs[def.Name] = p
		case *syntax.Model:
			m, err := CompileModel(def, d.reg, opts)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			d.reg.models[def.Name] = m
		}
	}
	return d
}

// run runs action name on a message.
func (d *deployment) run(name, topic, payload string) error {
	return d.reg.programs[name].Run(d.host, &Event{Topic: topic, Payload: []byte(payload)})
}

// stmtCase runs action T of src on a message to topic "in/x/y" and
// compares what it published (and kept) with want.
type stmtCase struct {
	name    string
	src     string // the definitions; the action run is T
	payload string
	want    []string // published.String() of every effect
	wantErr error
	errText string // a substring of the error message
}

func runStmtCases(t *testing.T, cases []stmtCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := deploy(t, c.src, nil)
			err := d.run("T", "in/x/y", c.payload)
			switch {
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("error %v, want %v", err, c.wantErr)
			case c.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case c.errText != "" && (err == nil || !strings.Contains(err.Error(), c.errText)):
				t.Fatalf("error %v, want it to say %q", err, c.errText)
			}
			var got []string
			for _, p := range d.rec.out {
				got = append(got, p.String())
			}
			if err := sameList(got, c.want); err != nil {
				t.Error(err)
			}
		})
	}
}

const onMsg = "DEFINE ACTION T\nON TOPIC \"in/#\" DO\n"

func TestStatements(t *testing.T) {
	runStmtCases(t, []stmtCase{
		{name: "set and publish", src: onMsg + "    SET \"v\" WITH PAYLOAD * 2\n    PUBLISH TOPIC \"out\" WITH {v}\n",
			payload: "21", want: []string{"out=42"}},
		{name: "set separators", src: onMsg + "    SET \"a\" TO 1\n    SET \"b\" = 2\n    SET \"c\" AS 3\n    PUBLISH TOPIC \"out\" WITH {a} + {b} + {c}\n",
			want: []string{"out=6"}},
		{name: "computed topic", src: onMsg + "    PUBLISH TOPIC \"out/\" + TOPIC POSITION 2 + \"/v\" WITH PAYLOAD\n",
			payload: "p", want: []string{"out/x/v=p"}},
		{name: "replace in topic", src: onMsg + "    PUBLISH TOPIC REPLACE \"id\" WITH TOPIC POSITION 3 IN \"sensor/id/status\" WITH \"active\"\n",
			want: []string{"sensor/y/status=active"}},
		{name: "keep", src: onMsg + "    KEEP TOPIC \"state\" WITH PAYLOAD\n    PUBLISH TOPIC \"out\" WITH GET TOPIC \"state\"\n",
			payload: "k", want: []string{"keep state=k", "out=k"}},
		{name: "publish a number", src: onMsg + "    PUBLISH TOPIC \"out\" WITH 0.1 + 0.2\n", want: []string{"out=0.30000000000000004"}},
		{name: "publish a bool", src: onMsg + "    PUBLISH TOPIC \"out\" WITH PAYLOAD > 1\n", payload: "2", want: []string{"out=true"}},
		{name: "publish EMPTY", src: onMsg + "    PUBLISH TOPIC \"out\" WITH GET TOPIC \"never\"\n", want: []string{"out="}},
		{name: "filter miss skips publish", src: onMsg + "    PUBLISH TOPIC \"out\" WITH FILTER PAYLOAD USING REGEX \"[0-9]+\"\n    PUBLISH TOPIC \"after\" WITH 1\n",
			payload: "none", want: []string{"after=1"}},
		{name: "filter miss then TRIM skips publish", src: onMsg + "    PUBLISH TOPIC \"out\" WITH PAYLOAD AND_THEN FILTER USING REGEX \"[0-9]+\" AND_THEN TRIM\n    PUBLISH TOPIC \"after\" WITH 1\n",
			payload: "none", want: []string{"after=1"}},
		{name: "filter hit publishes", src: onMsg + "    PUBLISH TOPIC \"out\" WITH FILTER PAYLOAD USING REGEX \"[0-9]+\"\n",
			payload: "id 42", want: []string{"out=42"}},
		{name: "bytes forwarded", src: onMsg + "    PUBLISH TOPIC \"out\" WITH PAYLOAD AS BYTES\n", payload: "\x00\x01\xfe", want: []string{"out=\x00\x01\xfe"}},
		{name: "empty bytes skipped", src: onMsg + "    PUBLISH TOPIC \"out\" WITH PAYLOAD AS BYTES\n", want: nil},
		{name: "computed wildcard topic", src: onMsg + "    PUBLISH TOPIC \"out/\" + PAYLOAD WITH 1\n", payload: "+", wantErr: ErrTopic},
		{name: "computed empty topic", src: onMsg + "    PUBLISH TOPIC PAYLOAD WITH 1\n", wantErr: ErrTopic},
	})
}

func TestControlFlow(t *testing.T) {
	chain := onMsg + `    IF PAYLOAD > 10 THEN
        PUBLISH TOPIC "out" WITH "big"
    ELSE IF PAYLOAD > 5 THEN
        PUBLISH TOPIC "out" WITH "medium"
    ELSE
        PUBLISH TOPIC "out" WITH "small"
`
	nested := onMsg + `    IF PAYLOAD > 5 THEN
        PUBLISH TOPIC "out" WITH "high"
    ELSE
        IF PAYLOAD > 2 THEN
            PUBLISH TOPIC "out" WITH "mid"
        ENDIF
`
	sw := onMsg + `    SWITCH PAYLOAD
        CASE "a" THEN
            PUBLISH TOPIC "out" WITH 1
        CASE "b", "c" THEN
            PUBLISH TOPIC "out" WITH 2
        CASE 3 THEN
            PUBLISH TOPIC "out" WITH 3
        DEFAULT THEN
            PUBLISH TOPIC "out" WITH 0
`
	loop := onMsg + `    SET "i" WITH 0
    LOOP
        SET "i" WITH {i} + 1
        PUBLISH TOPIC "out" WITH {i}
    UNTIL {i} >= PAYLOAD
`
	runStmtCases(t, []stmtCase{
		{name: "if", src: onMsg + "    IF PAYLOAD == \"on\" THEN\n        PUBLISH TOPIC \"out\" WITH 1\n", payload: "on", want: []string{"out=1"}},
		{name: "if false", src: onMsg + "    IF PAYLOAD == \"on\" THEN\n        PUBLISH TOPIC \"out\" WITH 1\n", payload: "off"},
		{name: "else if first", src: chain, payload: "11", want: []string{"out=big"}},
		{name: "else if second", src: chain, payload: "6", want: []string{"out=medium"}},
		{name: "else", src: chain, payload: "1", want: []string{"out=small"}},
		{name: "nested if", src: nested, payload: "3", want: []string{"out=mid"}},
		{name: "nested if none", src: nested, payload: "1"},
		{name: "flat if", src: "DEFINE ACTION T ON TOPIC \"in/#\" DO IF PAYLOAD > 1 THEN PUBLISH TOPIC \"b\" WITH 1 ELSE PUBLISH TOPIC \"c\" WITH 0\n",
			payload: "0", want: []string{"c=0"}},
		{name: "switch case", src: sw, payload: "a", want: []string{"out=1"}},
		{name: "switch second value", src: sw, payload: "c", want: []string{"out=2"}},
		{name: "switch numeric", src: sw, payload: "3.0", want: []string{"out=3"}},
		{name: "switch default", src: sw, payload: "z", want: []string{"out=0"}},
		{name: "loop", src: loop, payload: "3", want: []string{"out=1", "out=2", "out=3"}},
		{name: "loop runs once", src: loop, payload: "0", want: []string{"out=1"}},
	})
}

func TestLoopLimits(t *testing.T) {
	forever := onMsg + "    LOOP\n        SET \"i\" WITH {i} + 1\n    UNTIL FALSE\n"
	d := deploy(t, forever, &Options{MaxLoopIterations: 50})
	err := d.run("T", "in/a", "")
	if !errors.Is(err, ErrLoopLimit) {
		t.Fatalf("error %v, want ErrLoopLimit", err)
	}
	if want := "action T at 3:5: LOOP ran 50 times"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}

	nested := onMsg + `    LOOP
        LOOP
            LOOP
                SET "i" WITH {i} + 1
            UNTIL FALSE
        UNTIL FALSE
    UNTIL FALSE
`
	d = deploy(t, nested, &Options{MaxSteps: 10_000})
	if err := d.run("T", "in/a", ""); !errors.Is(err, ErrStepLimit) {
		t.Fatalf("nested loops: error %v, want ErrStepLimit", err)
	}
}

func TestCallAction(t *testing.T) {
	lib := `DEFINE ACTION Avg
INPUT a AS DOUBLE
INPUT b AS DOUBLE
DO
    SET "avg" WITH ({a} + {b}) / 2
    SET "sum" WITH {a} + {b}
RETURN
    OUTPUT avg
    OUTPUT sum
DEFINE ACTION Div
INPUT x AS INT
DO
    SET "q" WITH 10 / {x}
RETURN
    OUTPUT q
DEFINE ACTION Publisher
DO
    PUBLISH TOPIC "from/callee" WITH "hi"
DEFINE ACTION Loop
DO
    CALL ACTION Loop
DEFINE ACTION Triggered
ON TOPIC "x" DO
    PUBLISH TOPIC "y" WITH 1
`
	runStmtCases(t, []stmtCase{
		{name: "inputs and outputs", src: lib + onMsg + "    CALL ACTION Avg WITH a = 1, b = PAYLOAD RETURN m, s\n    PUBLISH TOPIC \"out\" WITH {m} + \"/\" + {s}\n",
			payload: "4", want: []string{"out=2.5/5"}},
		{name: "indented clauses", src: lib + onMsg + "    CALL ACTION Avg\n        WITH a = 2,\n            b = 4\n        RETURN m\n    PUBLISH TOPIC \"out\" WITH {m}\n",
			want: []string{"out=3"}},
		{name: "missing input is EMPTY", src: lib + onMsg + "    CALL ACTION Avg WITH a = 4 RETURN m\n    PUBLISH TOPIC \"out\" WITH {m}\n",
			want: []string{"out=2"}},
		{name: "extra return is EMPTY", src: lib + onMsg + "    SET \"z\" WITH 9\n    CALL ACTION Div WITH x = 5 RETURN q, z\n    PUBLISH TOPIC \"out\" WITH {q} + {z}\n",
			want: []string{"out=2"}},
		{name: "callee publishes", src: lib + onMsg + "    CALL ACTION Publisher\n    PUBLISH TOPIC \"after\" WITH 1\n",
			want: []string{"from/callee=hi", "after=1"}},
		{name: "callee sees no message", src: "DEFINE ACTION P\nDO\n    SET \"p\" WITH PAYLOAD\nRETURN\n    OUTPUT p\n" + onMsg + "    CALL ACTION P RETURN p\n    PUBLISH TOPIC \"out\" WITH {p} == EMPTY\n",
			payload: "x", want: []string{"out=true"}},
		{name: "callee error names both", src: lib + onMsg + "    CALL ACTION Div WITH x = 0 RETURN q\n",
			wantErr: ErrDivisionByZero, errText: "action T at 27:5: CALL ACTION Div: action Div at 13:21: division by zero"},
		{name: "bad input", src: lib + onMsg + "    CALL ACTION Div WITH x = \"abc\" RETURN q\n",
			wantErr: ErrCast, errText: "INPUT x of Div: cannot cast \"abc\" to INT"},
		{name: "unknown input", src: lib + onMsg + "    CALL ACTION Div WITH y = 1 RETURN q\n", wantErr: ErrUnknown},
		{name: "unknown callable", src: onMsg + "    CALL ACTION Nope\n", wantErr: ErrUnknown, errText: "no callable action Nope"},
		{name: "triggered action", src: lib + onMsg + "    CALL ACTION Triggered\n", wantErr: ErrUnknown, errText: "has a trigger"},
		{name: "recursion", src: lib + onMsg + "    CALL ACTION Loop\n", wantErr: ErrCallDepth},
	})
}

func TestPublishModel(t *testing.T) {
	models := `DEFINE MODEL Base COLLAPSED
    ADD STRING "severity"
    ADD STRING "source" WITH "lot"
DEFINE MODEL Alert FROM Base
    ADD DOUBLE "value"
    ADD TIMESTAMP "ts" WITH TIMESTAMP "UTC"
DEFINE MODEL Kept COLLAPSED WITH RETAIN AND QOS1
    ADD INT "n"
`
	runStmtCases(t, []stmtCase{
		{name: "assigned and defaults", src: models + onMsg + "    PUBLISH MODEL Alert TO \"alerts/\" + TOPIC POSITION 2 WITH\n        severity = \"HIGH\"\n        value = PAYLOAD\n",
			payload: "85", want: []string{`alerts/x={"severity":"HIGH","source":"lot","value":85,"ts":"2025-03-17 14:25:30"}`}},
		{name: "flat assignments", src: models + onMsg + "    PUBLISH MODEL Alert TO \"a\" WITH value = 1, source = \"plc\"\n",
			want: []string{`a={"severity":null,"source":"plc","value":1,"ts":"2025-03-17 14:25:30"}`}},
		{name: "retain and qos", src: models + onMsg + "    PUBLISH MODEL Kept TO \"k\" WITH n = PAYLOAD\n",
			payload: "7.9", want: []string{`k={"n":7} (retained)`}},
		{name: "cast failure", src: models + onMsg + "    PUBLISH MODEL Kept TO \"k\" WITH n = PAYLOAD\n",
			payload: "x", wantErr: ErrCast, errText: `PUBLISH MODEL Kept: model Kept at 8:5: field "n": cannot cast "x" to INT`},
		{name: "unknown model", src: onMsg + "    PUBLISH MODEL Nope TO \"k\" WITH n = 1\n", wantErr: ErrUnknown},
		{name: "unknown field", src: models + onMsg + "    PUBLISH MODEL Kept TO \"k\" WITH m = 1\n", wantErr: ErrUnknown},
	})
}

func TestEnvAndEvents(t *testing.T) {
	runStmtCases(t, []stmtCase{
		{name: "keep env", src: onMsg + "    KEEP ENV \"LINE\" WITH PAYLOAD\n    PUBLISH TOPIC \"out\" WITH GET ENV \"LINE\"\n",
			payload: "7", want: []string{"out=7"}},
		{name: "delete secret", src: onMsg + "    KEEP SECRET \"K\" WITH 1\n    DELETE SECRET \"K\"\n    PUBLISH TOPIC \"out\" WITH GET SECRET \"K\" == EMPTY\n",
			want: []string{"out=true"}},
		{name: "trigger without firer", src: onMsg + "    TRIGGER \"ListParts\" TO PartsDB WITH PAYLOAD\n", wantErr: ErrUnavailable},
	})
}

// firer records connector events.
type firer struct {
	*recorder
	events []string
}

func (f *firer) FireEvent(connector, event string, payload []byte) error {
	f.events = append(f.events, connector+"/"+event+"="+string(payload))
	return nil
}

func TestTriggerEvent(t *testing.T) {
	d := deploy(t, onMsg+"    TRIGGER \"ListParts\" TO PartsDB WITH PAYLOAD\n", nil)
	f := &firer{recorder: d.rec}
	d.host.Effects = f
	if err := d.run("T", "in/a", "q"); err != nil {
		t.Fatal(err)
	}
	if err := sameList(f.events, []string{"PartsDB/ListParts=q"}); err != nil {
		t.Error(err)
	}
}
