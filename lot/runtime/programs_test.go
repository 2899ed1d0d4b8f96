package runtime

// The conformance suite: every example program of the reference
// (lot/testdata/programs, LOT.md §4.6, §5.9, §6.6, §7.9, §8.4) deployed
// through $SYS/Coreflux/Command on a running broker, then driven by real
// MQTT clients, checking what subscribers receive.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gantry/lot/command"
	"gantry/lot/syntax"

	"github.com/eclipse/paho.golang/paho"
)

// step is one thing a scenario does, and the messages subscribers must
// receive as a result, in order, as "topic=payload" (JSON payloads are
// compared as JSON). Inputs, barriers and $SYS topics are left out.
type step struct {
	publish []string      // "topic=payload", published by root at QoS 0, in order
	tick    time.Duration // advance the engine's clock
	command string        // a command sent by root; it must succeed
	want    []string
	check   func(t *testing.T, h *harness)
}

// scenario is what a broker running one program file must do.
type scenario struct {
	reject bool     // deploying must fail with a positioned error
	deploy []string // messages while deploying (ON START)
	steps  []step
}

func pub(msgs ...string) []string { return msgs }

// scenarios holds one entry per program file; each header comment says the
// same in words.
var scenarios = map[string]scenario{
	"4.6-a01-echo.lot": {steps: []step{
		{publish: pub("in/msg=hello"), want: []string{"out/msg=hello"}, check: notRetained("out/msg")},
	}},
	"4.6-a02-plus-one.lot": {steps: []step{
		{publish: pub("num/in=10"), want: []string{"num/out=11"}},
		{publish: pub("num/in=2.5"), want: []string{"num/out=3.5"}},
	}},
	"4.6-a03-wildcard-topic-position.lot": {steps: []step{
		{publish: pub("sensors/s7/temperature=21.5"), want: []string{"processed/s7=T=21.5"}},
		{publish: pub("sensors/s7/humidity=40"), want: nil},
	}},
	"4.6-a04-timer-counter.lot": {steps: []step{
		{tick: 999 * time.Millisecond, want: nil},
		{tick: time.Millisecond, want: []string{"count=0"}},
		{tick: time.Second, want: []string{"count=1"}},
		{tick: time.Second, want: []string{"count=2"}},
		// Three ticks at once: each run reads what the previous one
		// published, without waiting for the message to come back.
		{tick: 3 * time.Second, want: []string{"count=3", "count=4", "count=5"}},
	}},
	"4.6-a05-replace.lot": {steps: []step{
		{publish: pub("selected/machine=12"), want: []string{"announce=Machine 12 was selected"}},
	}},
	"4.6-a06-get-json-threshold.lot": {steps: []step{
		{publish: pub(`dev/a/json={"data":{"temp":31.5}}`), want: []string{"alerts/a=hot 31.5"}},
		{publish: pub(`dev/a/json={"data":{"temp":20}}`), want: nil, check: cached("state/a", "20")},
		{publish: pub(`dev/a/json={"x":1}`), want: nil, check: cached("state/a", "0")},
	}},
	"4.6-a07-keep-topic.lot": {steps: []step{
		{publish: pub("mode/set=auto"), want: nil, check: cached("state/mode", "auto")},
		{publish: pub("mode/get=?"), want: []string{"mode/value=auto"}},
	}},
	"4.6-a08-callable.lot": {steps: []step{
		{publish: pub(`pair/in={"x":10,"y":20}`), want: []string{"pair/avg=15"}},
	}},
	"4.6-a09-on-change.lot": {steps: []step{
		{publish: pub("meter/1/state=on", "meter/1/state=on", "meter/1/state=off", "meter/1/state=off", "meter/1/state=on"),
			want: []string{"changes/1=on", "changes/1=off", "changes/1=on"}},
		{publish: pub("meter/2/state=on"), want: []string{"changes/2=on"}},
	}},
	"4.6-a10-on-start-audit.lot": {deploy: []string{"system/status=online"}, steps: []step{
		// Published back to back: the second run reads the count the
		// first one published, not a stale one.
		{publish: pub("plant/a=x", "plant/a/b/c=y"), want: []string{"audit/count=1", "audit/count=2"}},
		{publish: pub("other/a=z"), want: nil},
	}},
	"4.6-a11-callable-description.lot": {steps: []step{
		{check: retainedIs("$SYS/Coreflux/Actions/LampOn/Description", "Turns the lamp on")},
		{command: "-runAction LampOn", want: []string{"lamp=true"}},
	}},
	"4.6-a12-timer-reads-payload.lot": {reject: true, steps: []step{
		{tick: 10 * time.Second, want: nil},
	}},
	"5.9-m1-triggered-aggregation.lot": {steps: []step{
		{publish: pub("equip/id=P1", "equip/hours=12"), want: nil},
		{publish: pub("equip/status=RUN"), want: []string{
			`equip/formatted={"id":"P1","status":"RUN","hours":12,"site":"A"}`,
			"equip/formatted/id=P1", "equip/formatted/status=RUN",
			"equip/formatted/hours=12", "equip/formatted/site=A",
		}},
	}},
	"5.9-m2-json-explosion.lot": {steps: []step{
		{publish: pub(`sensors/dev1/data={"temperature":23.5,"humidity":65,"status":"active"}`), want: []string{
			"sensors/dev1/data/temperature=23.5", "sensors/dev1/data/humidity=65", "sensors/dev1/data/status=active",
		}},
		{publish: pub("sensors/dev1/data=not json"), want: nil},
	}},
	"5.9-m3-wildcard-explosion.lot": {steps: []step{
		{publish: pub(`proc/m/33/material={"Name":"Peppers"}`), want: []string{"proc/m/33/material/Name=Peppers"}},
		{publish: pub(`proc/m/34/material={"Name":"Salt"}`), want: []string{"proc/m/34/material/Name=Salt"}},
	}},
	"5.9-m4-calculated-fields.lot": {steps: []step{
		{publish: pub("line/target=100"), want: nil},
		{publish: pub("line/produced=95"), want: []string{
			`line/eff={"produced":95,"target":100,"pct":95,"grade":"OK"}`,
			"line/eff/produced=95", "line/eff/target=100", "line/eff/pct=95", "line/eff/grade=OK",
		}},
	}},
	"5.9-m5-template-publish-model.lot": {steps: []step{
		{publish: pub("t/k1/value=85"), want: []string{`alerts/k1={"severity":"HIGH","source":"lot","value":85}`}},
		{publish: pub("t/k1/value=70"), want: nil},
	}},
	"5.9-m6-no-trigger.lot": {steps: []step{
		{publish: pub("idle/a=1", "idle/b=2", "idle/a=3"), want: nil},
	}},
	"6.6-r1-subscribe-restriction.lot": {steps: []step{{check: testR1}}},
	"6.6-r2-publish-deny.lot":          {steps: []step{{check: testR2}}},
	"6.6-r3-deny-wins-tie.lot":         {steps: []step{{check: testR3}}},
	"6.6-r4-per-device.lot":            {steps: []step{{check: testR4}}},
	"6.6-r5-connect-admission.lot":     {steps: []step{{check: testR5}}},
	"6.6-r6-management-scope.lot":      {steps: []step{{check: testR6}}},
	"7.9-rt1-bridge-out.lot": {steps: []step{
		{check: retainedSource("Connectors", "ToCloud")},
		{check: retainedSource("Routes", "ToCloud")},
	}},
	"7.9-rt2-bridge-in.lot":    {steps: []step{{check: retainedSource("Connectors", "FromCloud")}}},
	"7.9-rt3-modbus-read.lot":  {steps: []step{{check: retainedSource("Connectors", "PLC1")}}},
	"7.9-rt4-modbus-write.lot": {steps: []step{{check: retainedSource("Connectors", "PLC1")}}},
	"7.9-rt5-sql-event.lot":    {reject: true},
	"7.9-rt6-trigger-from-action.lot": {steps: []step{
		{publish: pub("ask=parts"), want: nil, check: hasActionError("Ask", "PartsDB")},
	}},
	"7.9-rt7-file-storage.lot":      {reject: true},
	"7.x-seed-pinned-connector.lot": {steps: []step{{check: retainedSource("Connectors", "Press1")}}},
	"8.4-c1-deploy-flat.lot":        {steps: c1Steps},
	"8.4-c3-replace.lot":            {steps: c3Steps},
	"8.4-c8-run-callable.lot":       {steps: []step{{check: testC8}}},
}

// TestReferencePrograms deploys every program file through the command
// topic and plays its scenario.
func TestReferencePrograms(t *testing.T) {
	files, err := filepath.Glob("../testdata/programs/*.lot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no programs: %v", err)
	}
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		sc, ok := scenarios[name]
		if !ok {
			t.Errorf("%s has no scenario: every reference program must be tested", name)
			continue
		}
		seen[name] = true
		t.Run(strings.TrimSuffix(name, ".lot"), func(t *testing.T) { playScenario(t, path, sc) })
	}
	for name := range scenarios {
		if !seen[name] {
			t.Errorf("scenario %s has no program file", name)
		}
	}
}

func playScenario(t *testing.T, path string, sc scenario) {
	h := newHarness(t)
	mark := h.root.count()
	r := h.deployFile(path)
	if sc.reject {
		checkRejected(t, h, path, r)
	} else if !r.Success {
		t.Fatalf("deploy: %s %+v", r.Message, r.Errors)
	}
	h.settle(h.root)
	if err := sameMessages(delivered(h.root.since(mark), nil), sc.deploy); err != nil {
		t.Errorf("while deploying: %v", err)
	}
	for i, s := range sc.steps {
		mark := h.root.count()
		for _, m := range s.publish {
			tp, payload, _ := strings.Cut(m, "=")
			h.root.publish(t, tp, payload, 0)
		}
		if s.tick > 0 {
			h.clock.Advance(s.tick)
		}
		if s.command != "" {
			h.mustCommand(s.command)
		}
		h.settle(h.root)
		if err := sameMessages(delivered(h.root.since(mark), s.publish), s.want); err != nil {
			t.Errorf("step %d %v: %v", i, s.publish, err)
		}
		if s.check != nil {
			s.check(t, h)
		}
	}
}

// deployFile deploys a program file: one definition with its -add
// command (comment header included), several with -loadProject on a
// directory holding the file.
func (h *harness) deployFile(path string) reply {
	h.t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := syntax.Parse(path, string(src))
	if err != nil {
		h.t.Fatalf("%s does not parse: %v", path, err)
	}
	if len(f.Defs) > 1 {
		dir, name := h.project()
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(path)), src, 0o644); err != nil {
			h.t.Fatal(err)
		}
		return h.command("-loadProject " + name)
	}
	verb := map[syntax.DefKind]string{syntax.KindAction: "-addAction", syntax.KindModel: "-addModel",
		syntax.KindRule: "-addRule", syntax.KindConnector: "-addConnector"}[f.Defs[0].Header().Kind]
	if strings.Contains(string(src), "DEFINE ROUTE") {
		verb = "-addRoute"
	}
	return h.command(verb + " " + string(src))
}

// checkRejected: the reply is a failure whose errors point into the
// source, and nothing of the file was deployed.
func checkRejected(t *testing.T, h *harness, path string, r reply) {
	t.Helper()
	if r.Success {
		t.Fatalf("deploying %s succeeded, want it rejected", filepath.Base(path))
	}
	src, _ := os.ReadFile(path)
	lines := strings.Split(string(src), "\n")
	positioned := false
	for _, e := range r.Errors {
		if e.Line > 0 && e.Column > 0 {
			positioned = true
			// The position is in the source as sent, header comments included.
			if e.Line > len(lines) || strings.HasPrefix(strings.TrimSpace(lines[e.Line-1]), "//") {
				t.Errorf("error %q points at line %d, not at code of the source sent", e.Message, e.Line)
			}
		}
	}
	if !positioned {
		t.Errorf("the errors of a rejected deploy carry no line and column: %+v", r.Errors)
	}
	if n := len(h.store.List("")); n != 3 { // the three seed rules
		t.Errorf("the store holds %d definitions after a rejected deploy, want the 3 seed rules", n)
	}
	if r.EntityName != "" {
		for _, kind := range []string{"Actions", "Models", "Connectors"} {
			if _, ok := h.retained("$SYS/Coreflux/" + kind + "/" + r.EntityName); ok {
				t.Errorf("a rejected %s is published on $SYS/Coreflux/%s", r.EntityName, kind)
			}
		}
	}
}

// delivered lists the messages as "topic=payload", without $SYS topics,
// the harness's barriers and the inputs (each input once).
func delivered(msgs []*paho.Publish, inputs []string) []string {
	skip := map[string]int{}
	for _, in := range inputs {
		skip[in]++
	}
	var out []string
	for _, m := range msgs {
		if strings.HasPrefix(m.Topic, "$") || strings.HasPrefix(m.Topic, "zz/") {
			continue
		}
		s := m.Topic + "=" + string(m.Payload)
		if skip[s] > 0 {
			skip[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

// sameMessages compares "topic=payload" lists in order, JSON object
// payloads as JSON.
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
	return &listError{got, want}
}

type listError struct{ got, want []string }

func (e *listError) Error() string {
	return "got\n\t" + strings.Join(e.got, "\n\t") + "\nwant\n\t" + strings.Join(e.want, "\n\t")
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

// ---- checks ----

func notRetained(topic string) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		for _, m := range h.root.since(0) {
			if m.Topic == topic && (m.Retain || m.QoS != 0) {
				t.Errorf("%s arrived retained %v, QoS %d; want not retained, QoS 0", topic, m.Retain, m.QoS)
			}
		}
		if _, ok := h.retained(topic); ok {
			t.Errorf("the broker retains %s", topic)
		}
	}
}

// cached checks what GET TOPIC reads from the topic cache.
func cached(topic, want string) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		if got, ok := h.eng.cache.Lookup(topic); !ok || string(got) != want {
			t.Errorf("GET TOPIC %q = %q (%v), want %q", topic, got, ok, want)
		}
	}
}

func retainedIs(topic, want string) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		if got, ok := h.retained(topic); !ok || got != want {
			t.Errorf("retained %s = %q (%v), want %q", topic, got, ok, want)
		}
	}
}

// retainedSource checks that the deployed source is retained on
// $SYS/Coreflux/<kind>/<name>.
func retainedSource(kind, name string) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		got, ok := h.retained("$SYS/Coreflux/" + kind + "/" + name)
		if !ok || !strings.Contains(got, "DEFINE ") || !strings.Contains(got, name) {
			t.Errorf("$SYS/Coreflux/%s/%s = %q (%v), want the source", kind, name, got, ok)
		}
	}
}

// actionError checks the retained error of an action.
func hasActionError(action, mention string) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		var ae actionErrorJSON
		eventually(t, waitTimeout, func() error {
			return h.retainedJSON(errorTopic(action), &ae)
		})
		if ae.Action != action || !strings.Contains(ae.Error, mention) || ae.Count == 0 {
			t.Errorf("%s = %+v, want an error of %s mentioning %q", errorTopic(action), ae, action, mention)
		}
	}
}

type actionErrorJSON struct {
	Action string `json:"action"`
	Error  string `json:"error"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Count  uint64 `json:"errors"`
}

func (h *harness) retainedJSON(topic string, v any) error {
	p, ok := h.retained(topic)
	if !ok {
		return &missingError{topic}
	}
	return json.Unmarshal([]byte(p), v)
}

type missingError struct{ topic string }

func (e *missingError) Error() string { return "nothing retained on " + e.topic }

// ---- rules (LOT.md §6.6) ----

func wantCodes(t *testing.T, what string, got []byte, want ...byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Errorf("%s: SUBACK %x, want %x", what, got, want)
	}
}

func wantPuback(t *testing.T, what string, got, want byte) {
	t.Helper()
	if got != want {
		t.Errorf("%s: PUBACK 0x%02x, want 0x%02x", what, got, want)
	}
}

// deliveredTo reports whether root received payload on topic once settled.
func (h *harness) deliveredTo(topic, payload string) bool {
	h.settle(h.root)
	for _, p := range h.root.on(topic) {
		if p == payload {
			return true
		}
	}
	return false
}

func testR1(t *testing.T, h *harness) {
	em := h.connect("emanuel", "em-1")
	wantCodes(t, "emanuel subscribes emanuel/x", em.subscribe(t, "emanuel/x"), 0)
	bob := h.connect("bob", "bob-1")
	wantCodes(t, "bob subscribes emanuel/x", bob.subscribe(t, "emanuel/x"), 0x87)
	wantCodes(t, "bob subscribes emanuel/#", bob.subscribe(t, "emanuel/#"), 0x87)
	// '#' only overlaps the denied tree: granted, without emanuel's messages.
	wantCodes(t, "bob subscribes #", bob.subscribe(t, "#"), 0)
	wantCodes(t, "bob subscribes other/x", bob.subscribe(t, "other/x"), 0)
	h.root.publish(t, "emanuel/x", "for emanuel", 0)
	h.root.publish(t, "other/x", "for all", 0)
	if got := em.await(t, "emanuel/x"); got != "for emanuel" {
		t.Errorf("emanuel got %q", got)
	}
	bob.await(t, "other/x")
	if got := bob.on("emanuel/x"); len(got) != 0 {
		t.Errorf("bob received emanuel's %q through '#'", got)
	}
}

func testR2(t *testing.T, h *harness) {
	bob := h.connect("bob", "bob-1")
	wantPuback(t, "bob publishes config/a", bob.publish(t, "config/a", "from bob", 1), 0x87)
	bob.publish(t, "config/a", "from bob at QoS 0", 0)
	ops := h.connect("ops", "ops-1")
	wantPuback(t, "ops publishes config/a", ops.publish(t, "config/a", "from ops", 1), 0)
	h.root.publish(t, "config/a", "from root", 0)
	if h.deliveredTo("config/a", "from bob") || h.deliveredTo("config/a", "from bob at QoS 0") {
		t.Error("bob's publish to config/a was delivered")
	}
	if !h.deliveredTo("config/a", "from root") || !h.deliveredTo("config/a", "from ops") {
		t.Errorf("root's or ops's publish to config/a was not delivered: %q", h.root.on("config/a"))
	}
	wantPuback(t, "bob publishes other/a", bob.publish(t, "other/a", "x", 1), 0)
}

func testR3(t *testing.T, h *harness) {
	bob := h.connect("bob", "bob-1")
	alice := h.connect("alice", "alice-1")
	wantPuback(t, "bob publishes x/1", bob.publish(t, "x/1", "from bob", 1), 0x87)
	wantPuback(t, "alice publishes x/1", alice.publish(t, "x/1", "from alice", 1), 0)
	if h.deliveredTo("x/1", "from bob") || !h.deliveredTo("x/1", "from alice") {
		t.Errorf("x/1 received %q, want only alice's", h.root.on("x/1"))
	}
}

func testR4(t *testing.T, h *harness) {
	gw := h.connect("bob", "gw1")
	wantPuback(t, "gw1 publishes devices/gw1/t", gw.publish(t, "devices/gw1/t", "own", 1), 0)
	wantPuback(t, "gw1 publishes devices/gw2/t", gw.publish(t, "devices/gw2/t", "other", 1), 0x87)
	if !h.deliveredTo("devices/gw1/t", "own") || h.deliveredTo("devices/gw2/t", "other") {
		t.Errorf("devices/gw1/t %q, devices/gw2/t %q", h.root.on("devices/gw1/t"), h.root.on("devices/gw2/t"))
	}
	wantPuback(t, "root publishes devices/gw2/t", h.root.publish(t, "devices/gw2/t", "root", 1), 0)
}

func testR5(t *testing.T, h *harness) {
	h.connect("bob", "gw42")
	_, ca, err := h.tryConnect("bob", "laptop")
	if err == nil || ca == nil || ca.ReasonCode != 0x87 {
		t.Errorf("laptop connect: err %v, CONNACK %+v; want 0x87 not authorized", err, ca)
	}
	h.connect("root", "laptop-of-root")
	_, ca, err = h.tryConnect("bob", "gw42x")
	if err == nil || ca == nil || ca.ReasonCode != 0x87 {
		t.Errorf("gw42x connect: err %v, CONNACK %+v; want 0x87", err, ca)
	}
}

func testR6(t *testing.T, h *harness) {
	// guest may send commands and read their output, nothing more.
	h.mustCommand(`-addRule DEFINE RULE GuestCommands WITH PRIORITY 100 FOR CommandCall IF USER IS "guest" THEN ALLOW`)
	h.mustCommand(`-addRule DEFINE RULE GuestOutput WITH PRIORITY 100 FOR SubscribeSys TO TOPIC "$SYS/Coreflux/Command/Output" IF USER IS "guest" THEN ALLOW`)
	guest := h.connect("guest", "guest-1")
	wantCodes(t, "guest subscribes to the output", guest.subscribe(t, command.OutputTopic), 0)
	r := h.commandAs(guest, `-addAction DEFINE ACTION GuestAction ON TOPIC "g" DO PUBLISH TOPIC "g/out" WITH PAYLOAD`)
	if r.Success || !strings.Contains(r.Message, "Permission denied") {
		t.Errorf("guest -addAction: %+v, want permission denied", r)
	}
	if _, ok := h.store.Get("action", "GuestAction"); ok {
		t.Error("guest's action was deployed")
	}
	if _, ok := h.retained("$SYS/Coreflux/Actions/GuestAction"); ok {
		t.Error("guest's action is on $SYS/Coreflux/Actions")
	}
	// A user whose flag grants entity management is not concerned.
	ops := h.connect("ops", "ops-1")
	wantCodes(t, "ops subscribes to the output", ops.subscribe(t, command.OutputTopic), 0)
	if r := h.commandAs(ops, `-addAction DEFINE ACTION OpsAction ON TOPIC "o" DO PUBLISH TOPIC "o/out" WITH PAYLOAD`); !r.Success {
		t.Errorf("ops -addAction: %+v", r)
	}
	// C6: a user without CommandCall cannot send commands at all.
	bob := h.connect("bob", "bob-1")
	wantCodes(t, "bob subscribes to the output", bob.subscribe(t, command.OutputTopic), 0x87)
	wantPuback(t, "bob publishes a command", bob.publish(t, command.CommandTopic, "-removeAllActions", 1), 0x87)
	h.settle(h.root)
	if _, ok := h.store.Get("action", "OpsAction"); !ok {
		t.Error("bob's -removeAllActions removed the actions")
	}
}

// ---- commands (LOT.md §8.4) ----

const helloSource = `DEFINE ACTION Hello ON EVERY 10 SECONDS DO PUBLISH TOPIC "test" WITH "hello"`

var c1Steps = []step{
	{check: func(t *testing.T, h *harness) {
		r := h.command("-addAction " + helloSource)
		if !r.Success || r.EntityName != "Hello" || !strings.Contains(r.Message, "success") {
			t.Errorf("C1 reply: %+v", r)
		}
		retainedIs("$SYS/Coreflux/Actions/Hello", helloSource)(t, h)
	}},
	{tick: 9 * time.Second, want: nil},
	{tick: time.Second, want: []string{"test=hello"}},
	{tick: 10 * time.Second, want: []string{"test=hello"}},
	// C2: remove.
	{command: "-removeAction Hello", want: nil, check: func(t *testing.T, h *harness) {
		if p, ok := h.retained("$SYS/Coreflux/Actions/Hello"); ok {
			t.Errorf("$SYS/Coreflux/Actions/Hello still retained: %q", p)
		}
	}},
	{tick: 30 * time.Second, want: nil},
}

var c3Steps = []step{
	{tick: time.Second, want: nil},
	{tick: time.Second, want: []string{"test=hello again"}},
	{tick: 4 * time.Second, want: []string{"test=hello again", "test=hello again"}},
	// C3 proper: C1's body replaces C3's, with its own schedule.
	{command: "-addAction " + helloSource, want: nil},
	{tick: 8 * time.Second, want: nil},
	{tick: 2 * time.Second, want: []string{"test=hello"}},
}

func testC8(t *testing.T, h *harness) {
	r := h.mustCommand(`-runAction Average2 {"a":1,"b":3}`)
	var data struct {
		Status    string            `json:"status"`
		Outputs   map[string]any    `json:"outputs"`
		Published []json.RawMessage `json:"published"`
		TraceID   string            `json:"traceId"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	if data.Status == "" || data.Published == nil || len(data.Published) != 0 || data.TraceID == "" {
		t.Errorf("data = %s, want status, an empty published[] and a trace id", r.Data)
	}
	if avg, ok := data.Outputs["avg"].(float64); !ok || avg != 2 {
		t.Errorf("outputs = %v, want avg 2", data.Outputs)
	}
}
