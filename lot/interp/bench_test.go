package interp

import (
	"testing"
)

// discard is an Effects that keeps nothing, so that a benchmark measures
// the interpreter alone.
type discard struct{ n int }

func (d *discard) Publish(string, []byte, bool, byte) error { d.n++; return nil }
func (d *discard) Keep(string, []byte) error                { d.n++; return nil }

// hotAction is the typical per-message action: read PAYLOAD as a number,
// compare, publish to a topic built from the trigger topic.
const hotAction = `DEFINE ACTION Hot
ON TOPIC "sensors/+/temp" DO
    IF PAYLOAD AS DOUBLE > 30 THEN
        PUBLISH TOPIC "alerts/" + TOPIC POSITION 2 WITH PAYLOAD
`

func benchRun(b *testing.B, src, payload string, host *Host) {
	b.Helper()
	p, err := Compile(actionOf(b, src), nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := &Event{Topic: "sensors/s7/temp", Payload: []byte(payload)}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(host, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunTopicAction runs hotAction on a payload over the threshold:
// parse, compare, build the topic, publish.
func BenchmarkRunTopicAction(b *testing.B) {
	d := &discard{}
	benchRun(b, hotAction, "31.5", &Host{Effects: d})
	if d.n == 0 {
		b.Fatal("nothing published")
	}
}

// BenchmarkRunTopicActionQuiet is the same action on a payload under the
// threshold: nothing to publish.
func BenchmarkRunTopicActionQuiet(b *testing.B) {
	benchRun(b, hotAction, "21.5", &Host{Effects: &discard{}})
}

// BenchmarkRunJSONAction reads two fields of a JSON payload and keeps a
// computed value.
func BenchmarkRunJSONAction(b *testing.B) {
	src := `DEFINE ACTION J
ON TOPIC "dev/+/json" DO
    SET "t" WITH GET JSON "data.temp" IN PAYLOAD AS DOUBLE
    SET "h" WITH GET JSON "data.hum" IN PAYLOAD AS DOUBLE
    IF {t} > 30 AND {h} < 80 THEN
        KEEP TOPIC "state/" + TOPIC POSITION 2 WITH {t} * 1.8 + 32
`
	benchRun(b, src, `{"id":"a1","data":{"temp":31.5,"hum":40,"unit":"C"}}`, &Host{Effects: &discard{}})
}

// BenchmarkModelEvaluate evaluates M4 of the reference: two topic fields,
// a calculated and a conditional one.
func BenchmarkModelEvaluate(b *testing.B) {
	d := deploy(b, `DEFINE MODEL Eff WITH TOPIC "line/eff"
    ADD DOUBLE "produced" WITH TOPIC "line/produced" AS TRIGGER
    ADD DOUBLE "target" WITH TOPIC "line/target"
    ADD DOUBLE "pct" WITH (produced / target * 100)
    ADD STRING "grade" WITH IF produced >= 90 THEN "OK" ELSE "LOW"
`, nil)
	d.rec.values["line/produced"], d.rec.values["line/target"] = []byte("95"), []byte("100")
	m := d.reg.models["Eff"]
	inst, _ := m.Instance("line/produced")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Evaluate(d.host, inst); err != nil {
			b.Fatal(err)
		}
	}
}
