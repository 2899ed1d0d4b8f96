package runtime

// End-to-end tests of the engine beyond the reference programs: deploys
// that fail, projects, restarts, the $SYS topics, runtime errors, loops,
// peer messages, client events and the commands.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gantry/broker"
	"gantry/lot/command"
	"gantry/lot/defs"
)

const echoSource = `DEFINE ACTION Echo
ON TOPIC "in/msg" DO
    PUBLISH TOPIC "out/msg" WITH PAYLOAD`

// echoes checks that Echo is running: in/msg=payload gives out/msg=payload.
func (h *harness) echoes(t *testing.T, payload string) {
	t.Helper()
	h.root.publish(t, "in/msg", payload, 0)
	if got := h.root.await(t, "out/msg"); got != payload {
		t.Fatalf("out/msg = %q, want %q", got, payload)
	}
}

// TestFailedDeployChangesNothing: a definition that does not parse, or
// parses but fails the checks, is refused with line and column, and the
// version deployed before keeps running (LOT.md §8.4 C4).
func TestFailedDeployChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + echoSource)
	h.echoes(t, "one")
	for _, tc := range []struct {
		name, source string
		line         int
	}{
		{"C4 missing DO", `DEFINE ACTION Echo ON EVERY 10 SECONDS PUBLISH TOPIC "t" WITH 1`, 1},
		{"parse error on line 3", "DEFINE ACTION Echo\nON TOPIC \"in/msg\" DO\n    PUBLISH TOPIC WITH\n", 3},
		{"PAYLOAD in a timer", "DEFINE ACTION Echo\nON EVERY 5 SECONDS DO\n    PUBLISH TOPIC \"t\" WITH PAYLOAD\n", 3},
		{"unknown callable", "DEFINE ACTION Echo\nON TOPIC \"in/msg\" DO\n    CALL ACTION Missing WITH a = 1 RETURN r\n", 3},
		{"a $ topic", "DEFINE ACTION Echo\nON TOPIC \"$SYS/#\" DO\n    PUBLISH TOPIC \"x\" WITH PAYLOAD\n", 2},
		{"a timer too fast", "DEFINE ACTION Echo\nON EVERY 1 MILLISECOND DO\n    PUBLISH TOPIC \"x\" WITH 1\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.command("-addAction " + tc.source)
			if r.Success || len(r.Errors) == 0 || r.Errors[0].Line != tc.line || r.Errors[0].Column == 0 {
				t.Errorf("reply %+v, want a failure at line %d with a column", r, tc.line)
			}
			if got, _ := h.retained("$SYS/Coreflux/Actions/Echo"); got != echoSource {
				t.Errorf("$SYS/Coreflux/Actions/Echo = %q, want the first version", got)
			}
			h.clock.Advance(10 * time.Second)
			h.echoes(t, tc.name)
		})
	}
	// C4 proper: no entity is created under the new name.
	if r := h.command(`-addAction DEFINE ACTION X ON EVERY 10 SECONDS PUBLISH TOPIC "t" WITH 1`); r.Success {
		t.Errorf("C4 deployed: %+v", r)
	}
	if _, ok := h.store.Get("action", "X"); ok {
		t.Error("C4 created action X")
	}
	// A model whose FROM parent is missing, a rule with a bad scope.
	if r := h.command("-addModel DEFINE MODEL Child FROM Nobody\n    ADD STRING \"a\"\n"); r.Success {
		t.Errorf("a model with a missing parent deployed: %+v", r)
	}
	if r := h.command("-addRule DEFINE RULE R WITH PRIORITY 100 FOR Nonsense ALLOW"); r.Success {
		t.Errorf("a rule with an unknown scope deployed: %+v", r)
	}
	if got := len(h.store.List("")); got != 4 { // Echo and the three seed rules
		t.Errorf("the store holds %d definitions, want 4", got)
	}
}

// TestLoadProject: the .lot files of a directory are one change, all or
// nothing; definitions may refer to each other across files.
func TestLoadProject(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + echoSource)
	write := func(dir, name, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	callable := "DEFINE ACTION Double\nINPUT x AS DOUBLE\nDO\n    SET \"y\" WITH {x} * 2\nRETURN\n    OUTPUT y\n"
	caller := "DEFINE ACTION Doubler\nON TOPIC \"dbl/in\" DO\n    CALL ACTION Double WITH x = PAYLOAD RETURN r\n    PUBLISH TOPIC \"dbl/out\" WITH {r}\n"

	bad, badName := h.project()
	write(bad, "a/caller.lot", caller)
	write(bad, "b/callable.lot", callable)
	write(bad, "c/broken.lot", "DEFINE ACTION Broken\nON TOPIC \"x\" DO\n    PUBLISH TOPIC \"y\" WITH\n")
	write(bad, "notes.txt", "not LoT")
	r := h.command("-loadProject " + badName)
	if r.Success || len(r.Errors) == 0 || r.Errors[0].Line != 3 {
		t.Errorf("a project with a broken file: %+v, want a failure at line 3", r)
	}
	if !strings.Contains(r.Message, "broken.lot") && !strings.Contains(fmt.Sprint(r.Errors), "broken.lot") {
		t.Errorf("the error does not name the file: %+v", r)
	}
	for _, name := range []string{"Double", "Doubler", "Broken"} {
		if _, ok := h.store.Get("action", name); ok {
			t.Errorf("%s deployed by a refused project", name)
		}
	}

	// A check error in one file refuses the whole project too.
	unchecked, uncheckedName := h.project()
	write(unchecked, "caller.lot", caller)
	write(unchecked, "timer.lot", "DEFINE ACTION T\nON EVERY 1 SECOND DO\n    PUBLISH TOPIC \"t\" WITH PAYLOAD\n")
	if r := h.command("-loadProject " + uncheckedName); r.Success {
		t.Errorf("a project that fails the checks loaded: %+v", r)
	}
	// The caller alone does not check: its callable is missing.
	alone, aloneName := h.project()
	write(alone, "caller.lot", caller)
	if r := h.command("-loadProject " + aloneName); r.Success {
		t.Errorf("a caller without its callable loaded: %+v", r)
	}
	if got := len(h.store.List("")); got != 4 {
		t.Errorf("the store holds %d definitions after refused projects, want 4", got)
	}

	good, goodName := h.project()
	write(good, "caller.lot", caller) // the caller first: load order is the store's
	write(good, "lib/callable.lot", callable)
	// A link is not followed: it could read any file of the node.
	if err := os.Symlink("/etc/passwd", filepath.Join(good, "passwd.lot")); err != nil {
		t.Fatal(err)
	}
	r = h.mustCommand("-loadProject " + goodName)
	var data struct{ Files, Definitions int }
	if err := json.Unmarshal(r.Data, &data); err != nil || data.Files != 2 || data.Definitions != 2 {
		t.Errorf("data %s, want 2 files and 2 definitions", r.Data)
	}
	h.root.publish(t, "dbl/in", "21", 0)
	if got := h.root.await(t, "dbl/out"); got != "42" {
		t.Errorf("dbl/out = %q, want 42", got)
	}
	h.echoes(t, "still here")

	if r := h.command("-loadProject " + goodName + "/missing"); r.Success {
		t.Errorf("a missing directory loaded: %+v", r)
	}
	for _, outside := range []string{good, "../" + goodName, goodName + "/../../x"} {
		if r := h.command("-loadProject " + outside); r.Success {
			t.Errorf("-loadProject %s, outside the projects folder, loaded: %+v", outside, r)
		}
	}

	// A change that would break what is deployed is refused, and says
	// what it would break, without pointing into the command's source.
	for _, cmd := range []string{
		"-removeAction Double",
		"-addAction DEFINE ACTION Double\nINPUT x AS DOUBLE\nINPUT factor AS DOUBLE\nDO\n    SET \"y\" WITH {x} * {factor}\nRETURN\n    OUTPUT y\n",
	} {
		r := h.command(cmd)
		if r.Success || !strings.Contains(r.Message, "Doubler would no longer build") {
			t.Errorf("%s: %+v, want a refusal naming Doubler", firstLine(cmd), r)
		}
		for _, e := range r.Errors {
			if e.Line != 0 || len(e.SourceLines) > 0 {
				t.Errorf("%s: error %+v points into the command's source", firstLine(cmd), e)
			}
		}
	}
	h.root.publish(t, "dbl/in", "2", 0)
	if got := h.root.await(t, "dbl/out"); got != "4" {
		t.Errorf("dbl/out = %q after refused changes, want 4", got)
	}
}

// bootSource counts its runs in the environment, which survives restarts.
const bootSource = `DEFINE ACTION Boot
ON START DO
    KEEP ENV "boots" WITH (GET ENV "boots" + 1)
    PUBLISH TOPIC "system/status" WITH "online"`

func (h *harness) boots(t *testing.T) string {
	t.Helper()
	v, _ := h.eng.env.Env("boots")
	return v
}

// TestRestart: definitions persist in the store's directory; after a
// restart everything runs again, ON START included (it runs when the
// definition starts: at broker start and on a deploy of changed code,
// never on a redeploy of the same code).
func TestRestart(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + bootSource)
	if got := h.boots(t); got != "1" {
		t.Errorf("boots after the deploy = %q, want 1", got)
	}
	h.mustCommand("-addAction " + bootSource)
	if got := h.boots(t); got != "1" {
		t.Errorf("boots after a redeploy of the same code = %q, want 1", got)
	}
	h.mustCommand("-addAction " + echoSource)
	h.mustCommand(`-addAction DEFINE ACTION Tick ON EVERY 1 MINUTE DO PUBLISH TOPIC "tick" WITH "t"`)
	h.mustCommand("-addModel DEFINE MODEL Dev WITH TOPIC \"dev/data\"")
	h.mustCommand(`-addRule DEFINE RULE NoBob WITH PRIORITY 100 FOR Publish TO TOPIC "#" IF USER IS "bob" THEN DENY`)
	h.mustCommand("-setEnv SITE=plant-7")

	h.restart()
	if got := h.boots(t); got != "2" {
		t.Errorf("boots after a restart = %q, want 2 (ON START runs at broker start)", got)
	}
	if p, _ := h.eng.cache.Lookup("system/status"); string(p) != "online" {
		t.Errorf("system/status = %q after the restart, want online", p)
	}
	for _, topic := range []string{"Actions/Boot", "Actions/Echo", "Actions/Tick", "Models/Dev", "Rules/NoBob", "Rules/AllowConnect"} {
		if got, ok := h.retained("$SYS/Coreflux/" + topic); !ok || !strings.Contains(got, "DEFINE") {
			t.Errorf("$SYS/Coreflux/%s = %q after the restart", topic, got)
		}
	}
	h.echoes(t, "after restart")
	h.clock.Advance(time.Minute)
	if got := h.root.await(t, "tick"); got != "t" {
		t.Errorf("tick = %q", got)
	}
	h.root.publish(t, "dev/data", `{"t":1}`, 0)
	if got := h.root.await(t, "dev/data/t"); got != "1" {
		t.Errorf("dev/data/t = %q", got)
	}
	bob := h.connect("bob", "bob-1")
	wantPuback(t, "bob after the restart", bob.publish(t, "a", "b", 1), 0x87)
	if v, _ := h.eng.env.Env("SITE"); v != "plant-7" {
		t.Errorf("SITE = %q after the restart, want plant-7", v)
	}
	if got := len(h.store.List("rule")); got != 4 {
		t.Errorf("%d rules after the restart, want 4: the seed rules must not come back twice", got)
	}

	// Changed code runs ON START again; the same code again does not.
	changed := strings.Replace(bootSource, `"online"`, `"online again"`, 1)
	h.mustCommand("-addAction " + changed)
	if got := h.boots(t); got != "3" {
		t.Errorf("boots after a deploy of changed code = %q, want 3", got)
	}
	h.mustCommand("-addAction " + changed)
	if got := h.boots(t); got != "3" {
		t.Errorf("boots after a redeploy of the same code = %q, want 3", got)
	}

	// Removed seed rules stay removed across a restart.
	h.mustCommand("-removeRule AllowSubscribeTopic")
	h.restart()
	if _, ok := h.store.Get("rule", "AllowSubscribeTopic"); ok {
		t.Error("a removed seed rule came back after a restart")
	}
}

// TestSysTopics: each definition's source is retained on
// $SYS/Coreflux/<Kind>s/<name> for an administrator who subscribes, and
// cleared when it is removed.
func TestSysTopics(t *testing.T) {
	h := newHarness(t)
	sources := map[string]string{
		"Actions/Echo":  echoSource,
		"Models/Dev":    `DEFINE MODEL Dev WITH TOPIC "dev/data"`,
		"Rules/NoBob":   `DEFINE RULE NoBob WITH PRIORITY 100 FOR Publish TO TOPIC "#" IF USER IS "bob" THEN DENY`,
		"Connectors/P1": "DEFINE CONNECTOR P1 WITH TYPE MODBUS_TCP\n    ADD MODBUS_CONFIG\n        WITH HOST \"127.0.0.1\"\n        WITH PORT '5020'",
	}
	verbs := map[string]string{"Actions": "-addAction", "Models": "-addModel", "Rules": "-addRule", "Connectors": "-addConnector"}
	for topic, src := range sources {
		kind, _, _ := strings.Cut(topic, "/")
		h.mustCommand(verbs[kind] + " " + src)
	}
	watcher := h.connect("root", "sys-watcher")
	wantCodes(t, "root subscribes to $SYS/Coreflux/#", watcher.subscribe(t, "$SYS/Coreflux/#"), 0)
	for topic, src := range sources {
		if got := watcher.await(t, "$SYS/Coreflux/"+topic); got != src {
			t.Errorf("$SYS/Coreflux/%s = %q, want %q", topic, got, src)
		}
	}
	if got := watcher.await(t, "$SYS/Coreflux/Routes/P1"); got != sources["Connectors/P1"] {
		t.Errorf("$SYS/Coreflux/Routes/P1 = %q", got)
	}
	bob := h.connect("bob", "bob-1")
	wantCodes(t, "bob subscribes to $SYS/Coreflux/Actions/#", bob.subscribe(t, "$SYS/Coreflux/Actions/#"), 0x87)

	for _, cmd := range []string{"-removeAction Echo", "-removeModel Dev", "-removeRule NoBob", "-removeConnector P1"} {
		h.mustCommand(cmd)
	}
	for topic := range sources {
		if got := watcher.await(t, "$SYS/Coreflux/"+topic); got != "" {
			t.Errorf("after removal $SYS/Coreflux/%s = %q, want an empty payload", topic, got)
		}
		if _, ok := h.retained("$SYS/Coreflux/" + topic); ok {
			t.Errorf("$SYS/Coreflux/%s is still retained", topic)
		}
	}
	if _, ok := h.retained("$SYS/Coreflux/Routes/P1"); ok {
		t.Error("$SYS/Coreflux/Routes/P1 is still retained")
	}
	if r := h.command("-removeAction Echo"); r.Success || !strings.Contains(r.Message, "not found") {
		t.Errorf("removing a missing action: %+v", r)
	}
}

// TestRuntimeErrors: an error stops that run only; it is retained on
// $SYS/Coreflux/Actions/<name>/Error with line and column until a good
// run clears it; other actions go on.
func TestRuntimeErrors(t *testing.T) {
	logs := &logCounter{}
	h := newHarness(t, func(h *harness) { h.engineOpts = func(o *Options) { o.Logger = slog.New(logs) } })
	h.mustCommand("-addAction DEFINE ACTION Divide\nON TOPIC \"calc\" DO\n    PUBLISH TOPIC \"calc/out\" WITH (10 / PAYLOAD)\n")
	h.mustCommand("-addAction DEFINE ACTION Count\nON TOPIC \"calc\" DO\n    PUBLISH TOPIC \"calc/seen\" WITH PAYLOAD\n")
	h.mustCommand("-addAction " + echoSource)

	h.root.publish(t, "calc", "0", 0)
	if got := h.root.await(t, "calc/seen"); got != "0" {
		t.Errorf("calc/seen = %q: the other action on the same message did not run", got)
	}
	var ae actionErrorJSON
	eventually(t, waitTimeout, func() error { return h.retainedJSON(errorTopic("Divide"), &ae) })
	if ae.Action != "Divide" || ae.Line != 3 || ae.Column == 0 || ae.Count != 1 || !strings.Contains(ae.Error, "zero") {
		t.Errorf("error = %+v, want Divide's division by zero at line 3, counted once", ae)
	}
	h.echoes(t, "after an error")
	h.root.publish(t, "calc", "0", 0)
	eventually(t, waitTimeout, func() error {
		if err := h.retainedJSON(errorTopic("Divide"), &ae); err != nil || ae.Count != 2 {
			return fmt.Errorf("count %d (%v), want 2", ae.Count, err)
		}
		return nil
	})
	if n := logs.count("action failed"); n != 1 {
		t.Errorf("%d log lines for two failures in a row, want 1 (rate-limited)", n)
	}
	h.root.publish(t, "calc", "4", 0)
	if got := h.root.await(t, "calc/out"); got != "2.5" {
		t.Errorf("calc/out = %q, want 2.5", got)
	}
	h.settle(h.root)
	if p, ok := h.retained(errorTopic("Divide")); ok {
		t.Errorf("the error is still retained after a good run: %s", p)
	}
	// The error of a removed action goes with it.
	h.root.publish(t, "calc", "0", 0)
	eventually(t, waitTimeout, func() error { return h.retainedJSON(errorTopic("Divide"), &ae) })
	h.mustCommand("-removeAction Divide")
	if p, ok := h.retained(errorTopic("Divide")); ok {
		t.Errorf("the error of a removed action is still retained: %s", p)
	}
	if h.eng.Stats().Errors.Load() < 3 {
		t.Errorf("Stats.Errors = %d, want at least 3", h.eng.Stats().Errors.Load())
	}
}

// TestHopLimit: two actions publishing to each other's topics are stopped
// at the hop limit, and the loop is reported.
func TestHopLimit(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.engineOpts = func(o *Options) { o.HopLimit = 6 } })
	h.mustCommand(`-addAction DEFINE ACTION Ping ON TOPIC "ping" DO PUBLISH TOPIC "pong" WITH PAYLOAD + "o"`)
	h.mustCommand(`-addAction DEFINE ACTION Pong ON TOPIC "pong" DO PUBLISH TOPIC "ping" WITH PAYLOAD + "i"`)
	h.root.publish(t, "ping", "p", 0)
	h.settle(h.root)
	got := append(h.root.on("ping"), h.root.on("pong")...)
	if len(got) != 1+6 { // the client's message and six hops
		t.Errorf("ping/pong carried %d messages, want 7: %q", len(got), got)
	}
	if n := h.eng.Stats().Loops.Load(); n != 1 {
		t.Errorf("Stats.Loops = %d, want 1", n)
	}
	var ae actionErrorJSON
	eventually(t, waitTimeout, func() error { return h.retainedJSON(errorTopic("Ping"), &ae) })
	if !strings.Contains(ae.Error, "hop limit") {
		t.Errorf("Ping's error = %q, want the hop limit", ae.Error)
	}
	// The chain ends; the next message starts a new one.
	h.root.publish(t, "ping", "q", 0)
	h.settle(h.root)
	if n := h.eng.Stats().Loops.Load(); n != 2 {
		t.Errorf("Stats.Loops = %d, want 2", n)
	}
}

// TestPeerMessagesDoNotTrigger: a message from a peer node (Deliver) is
// delivered and read by GET TOPIC, but never triggers an action or a
// model (DESIGN.md: LoT runs where a message entered, once).
func TestPeerMessagesDoNotTrigger(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + echoSource)
	h.mustCommand(`-addAction DEFINE ACTION Changes ON CHANGE "in/msg" DO PUBLISH TOPIC "changes" WITH PAYLOAD`)
	h.mustCommand(`-addAction DEFINE ACTION Report ON TOPIC "report" DO PUBLISH TOPIC "report/out" WITH GET TOPIC "in/msg"`)
	h.mustCommand("-addModel DEFINE MODEL Dev WITH TOPIC \"dev/data\"")
	h.srv.Deliver(&broker.Message{Topic: "in/msg", Payload: []byte("from a peer"), Origin: broker.OriginPeer, ClientID: "node2"})
	h.srv.Deliver(&broker.Message{Topic: "dev/data", Payload: []byte(`{"a":1}`), Origin: broker.OriginPeer, ClientID: "node2"})
	if got := h.root.await(t, "in/msg"); got != "from a peer" {
		t.Errorf("in/msg = %q: the peer message was not delivered", got)
	}
	h.settle(h.root)
	for _, topic := range []string{"out/msg", "changes", "dev/data/a"} {
		if got := h.root.on(topic); len(got) > 0 {
			t.Errorf("a peer message triggered LoT: %s = %q", topic, got)
		}
	}
	h.root.publish(t, "report", "?", 0)
	if got := h.root.await(t, "report/out"); got != "from a peer" {
		t.Errorf("GET TOPIC of a peer's topic = %q, want its payload", got)
	}
	h.echoes(t, "local")
	if got := h.root.await(t, "changes"); got != "local" {
		t.Errorf("changes = %q", got)
	}
}

// TestSessionTriggers: ON CONNECT, ON SUBSCRIBE and ON DISCONNECT with a
// real client.
func TestSessionTriggers(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addAction DEFINE ACTION Hi ON CONNECT DO PUBLISH TOPIC "sessions/connected" WITH CLIENTID + " " + USER + " " + CLEANSESSION`)
	h.mustCommand(`-addAction DEFINE ACTION Sub ON SUBSCRIBE "data/#" DO PUBLISH TOPIC "sessions/subscribed" WITH CLIENTID + " " + SUBSCRIBETOPIC`)
	h.mustCommand(`-addAction DEFINE ACTION AnySub ON SUBSCRIBE DO PUBLISH TOPIC "sessions/any" WITH SUBSCRIBETOPIC`)
	h.mustCommand(`-addAction DEFINE ACTION Bye ON DISCONNECT DO PUBLISH TOPIC "sessions/gone" WITH CLIENTID`)
	h.mustCommand(`-addRule DEFINE RULE NoSecrets WITH PRIORITY 100 FOR Subscribe TO TOPIC "data/secret" DENY`)

	bob := h.connect("bob", "bob-1")
	if got := h.root.await(t, "sessions/connected"); got != "bob-1 bob true" {
		t.Errorf("ON CONNECT: %q, want \"bob-1 bob true\" (clean start)", got)
	}
	wantCodes(t, "bob subscribes", bob.subscribe(t, "other/x", "data/secret", "data/x"), 0, 0x87, 0)
	if got := h.root.await(t, "sessions/subscribed"); got != "bob-1 data/x" {
		t.Errorf("ON SUBSCRIBE \"data/#\": %q, want \"bob-1 data/x\" only", got)
	}
	if got := h.root.await(t, "sessions/any"); got != "other/x" {
		t.Errorf("ON SUBSCRIBE: %q, want other/x", got)
	}
	if got := h.root.await(t, "sessions/any"); got != "data/x" {
		t.Errorf("ON SUBSCRIBE: %q, want data/x (a refused subscription does not count)", got)
	}
	bob.close()
	if got := h.root.await(t, "sessions/gone"); got != "bob-1" {
		t.Errorf("ON DISCONNECT: %q", got)
	}
	// A refused CONNECT is no connection.
	if _, _, err := h.tryConnect("mallory", "mallory-1"); err == nil {
		t.Fatal("mallory connected with a wrong password")
	}
	h.connect("alice", "alice-1")
	if got := h.root.await(t, "sessions/connected"); got != "alice-1 alice true" {
		t.Errorf("ON CONNECT: %q, want \"alice-1 alice true\" (nothing for mallory)", got)
	}
	if got := h.root.on("sessions/any"); len(got) != 2 {
		t.Errorf("sessions/any = %q, want bob's two granted subscriptions", got)
	}
}

// TestCommands: -listEntities, -setEnv and GET ENV, -setSecret,
// -removeAction, -removeAllActions and -removeAllModels.
func TestCommands(t *testing.T) {
	// The process environment holds the node's own settings: GET ENV
	// must not read it.
	t.Setenv("COREFLUX_CLUSTER_SHARED_SECRET", "node-secret")
	h := newHarness(t)
	h.mustCommand("-addAction " + echoSource)
	h.mustCommand(`-addAction DEFINE ACTION Site ON TOPIC "site/q" DO PUBLISH TOPIC "site/a" WITH GET ENV "SITE" + "/" + GET SECRET "TOKEN" + GET ENV "COREFLUX_CLUSTER_SHARED_SECRET"`)
	h.mustCommand(`-addAction DEFINE ACTION Tick ON EVERY 1 SECOND DO PUBLISH TOPIC "tick" WITH "t"`)
	h.mustCommand("-addModel DEFINE MODEL Dev WITH TOPIC \"dev/data\"")

	r := h.mustCommand("-listEntities")
	var list map[string][]string
	if err := json.Unmarshal(r.Data, &list); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	want := map[string][]string{"actions": {"Echo", "Site", "Tick"}, "models": {"Dev"}, "connectors": {},
		"rules": {"AllowConnect", "AllowPublishTopic", "AllowSubscribeTopic"}}
	for k, v := range want {
		got := slices.Sorted(slices.Values(list[k]))
		if !slices.Equal(got, v) {
			t.Errorf("-listEntities %s = %q, want %q", k, got, v)
		}
	}

	h.mustCommand("-setEnv SITE=plant-7")
	r = h.mustCommand("-setSecret TOKEN=s3cr3t")
	if strings.Contains(string(r.Data)+r.Message, "s3cr3t") {
		t.Errorf("the reply echoes the secret: %+v", r)
	}
	h.root.publish(t, "site/q", "?", 0)
	if got := h.root.await(t, "site/a"); got != "plant-7/s3cr3t" {
		t.Errorf("site/a = %q, want plant-7/s3cr3t", got)
	}
	if fi, err := os.Stat(h.envFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file: %v, mode %v; want 0600", err, fi)
	}

	r = h.mustCommand("-removeAction Site")
	if !strings.Contains(r.Message, "removed") {
		t.Errorf("-removeAction: %+v", r)
	}
	h.root.publish(t, "site/q", "?", 0)
	h.settle(h.root)
	if got := h.root.on("site/a"); len(got) != 1 {
		t.Errorf("a removed action ran: site/a = %q", got)
	}

	r = h.mustCommand("-removeAllActions")
	var removed struct{ Removed int }
	if json.Unmarshal(r.Data, &removed); removed.Removed != 2 || !strings.Contains(r.Message, "Removed all actions successfully") {
		t.Errorf("-removeAllActions: %+v", r)
	}
	h.clock.Advance(5 * time.Second)
	h.root.publish(t, "in/msg", "gone", 0)
	h.settle(h.root)
	if got := h.root.on("out/msg"); len(got) > 0 {
		t.Errorf("Echo ran after -removeAllActions: %q", got)
	}
	if got := h.root.on("tick"); len(got) > 0 {
		t.Errorf("Tick ran after -removeAllActions: %q", got)
	}
	if got := h.clock.Pending(); got != 0 {
		t.Errorf("%d timers armed after -removeAllActions", got)
	}
	for _, name := range []string{"Echo", "Tick"} {
		if _, ok := h.retained("$SYS/Coreflux/Actions/" + name); ok {
			t.Errorf("$SYS/Coreflux/Actions/%s still retained", name)
		}
	}
	if r := h.mustCommand("-removeAllModels"); !strings.Contains(strings.ToLower(r.Message), "removed all models successfully") {
		t.Errorf("-removeAllModels: %+v", r)
	}
	if r := h.command("-runAction Echo"); r.Success || !strings.Contains(r.Message, "not found") {
		t.Errorf("-runAction of a removed action: %+v", r)
	}
	if r := h.command("-frobnicate"); r.Success || !strings.Contains(r.Message, "Unknown command") {
		t.Errorf("unknown command: %+v", r)
	}
}

// TestRunActionSimulatesMessage: -runAction of a triggered action with
// {"topic", "payload"} runs it as if that message had arrived.
func TestRunActionSimulatesMessage(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + `DEFINE ACTION Route1
ON TOPIC "sensors/+/temperature" DO
    PUBLISH TOPIC "processed/" + TOPIC POSITION 2 WITH "T=" + PAYLOAD`)
	r := h.mustCommand(`-runAction Route1 {"topic":"sensors/s9/temperature","payload":"20.5"}`)
	if got := h.root.await(t, "processed/s9"); got != "T=20.5" {
		t.Errorf("processed/s9 = %q", got)
	}
	var data runResult
	if err := json.Unmarshal(r.Data, &data); err != nil || len(data.Published) != 1 ||
		data.Published[0] != (publishedJSON{Topic: "processed/s9", Payload: "T=20.5"}) {
		t.Errorf("data = %s (%v)", r.Data, err)
	}
	r = h.command(`-runAction Route1 {"payload":1}`) // no topic: TOPIC POSITION fails
	if r.Success {
		t.Errorf("a run without a topic succeeded: %+v", r)
	}
	if _, ok := h.retained(errorTopic("Route1")); !ok {
		t.Error("the failed -runAction is not on the action's error topic")
	}
}

// TestCommandOutputIsPrivate: the replies go to
// $SYS/Coreflux/Command/Output, which ordinary users cannot read.
func TestCommandOutputIsPrivate(t *testing.T) {
	h := newHarness(t)
	bob := h.connect("bob", "bob-1")
	// $SYS/# is granted (every user reads $SYS/broker/#), without the
	// topics bob may not read.
	wantCodes(t, "bob subscribes to the output", bob.subscribe(t, command.OutputTopic, "$SYS/#"), 0x87, 0)
	h.mustCommand("-listEntities")
	h.settle(bob)
	for _, m := range bob.since(0) {
		if strings.HasPrefix(m.Topic, "$SYS") && !strings.HasPrefix(m.Topic, "$SYS/broker/") {
			t.Errorf("bob received %s", m.Topic)
		}
	}
}

// TestStoredDefinitionThatDoesNotBuild: a stored definition that does not
// build (stored by a version with other checks, or committed by a peer)
// is left out with what depends on it; everything else, the access rules
// first, keeps running, at once and after a restart.
func TestStoredDefinitionThatDoesNotBuild(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-addAction " + echoSource)
	_, err := h.store.Apply(t.Context(), defs.Change{Puts: []defs.Put{
		{Kind: defs.Action, Name: "Broken", Source: "DEFINE ACTION Broken\nON TOPIC \"x\" DO\n    PUBLISH TOPIC \"y\" WITH\n"},
		{Kind: defs.Action, Name: "Half", Source: "DEFINE ACTION Half\nINPUT v AS DOUBLE\nDO\n    SET \"h\" WITH {v} / 2\nRETURN\n    OUTPUT h\n"},
		{Kind: defs.Action, Name: "UsesHalf", Source: "DEFINE ACTION UsesHalf\nON TOPIC \"half/in\" DO\n    CALL ACTION Half WITH v = PAYLOAD RETURN r\n    PUBLISH TOPIC \"half/out\" WITH {r}\n"},
		{Kind: defs.Rule, Name: "Bad", Source: "DEFINE RULE Bad WITH PRIORITY 100 FOR Publish TO TOPIC \"a/#/b\" DENY"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		h.echoes(t, fmt.Sprint("round ", round))
		h.root.publish(t, "half/in", "5", 0)
		if got := h.root.await(t, "half/out"); got != "2.5" {
			t.Errorf("half/out = %q, want 2.5", got)
		}
		if _, ok := h.retained("$SYS/Coreflux/Actions/Broken"); ok {
			t.Error("a definition that does not build is published as deployed")
		}
		bob := h.connect("bob", fmt.Sprint("bob-", round))
		wantPuback(t, "bob publishes under the seed rules", bob.publish(t, "a/x/b", "x", 1), 0)
		h.restart()
	}
	r := h.mustCommand("-listEntities")
	var list struct {
		NotRunning []struct{ Kind, Name, Error string } `json:"notRunning"`
	}
	if err := json.Unmarshal(r.Data, &list); err != nil || len(list.NotRunning) != 2 ||
		list.NotRunning[0].Name != "Broken" || list.NotRunning[1].Name != "Bad" || list.NotRunning[1].Error == "" {
		t.Errorf("-listEntities: %s, want Broken and Bad not running, with why", r.Data)
	}
	// A broken callable takes its callers with it, not the others.
	_, err = h.store.Apply(t.Context(), defs.Change{Puts: []defs.Put{
		{Kind: defs.Action, Name: "Half", Source: "DEFINE ACTION Half\nINPUT v AS DOUBLE\nDO\n    SET \"h\" WITH\n"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.root.publish(t, "half/in", "5", 0)
	h.echoes(t, "after the callable broke")
	if got := h.root.on("half/out"); len(got) != 0 {
		t.Errorf("half/out = %q: the caller of a broken callable ran", got)
	}
	if _, ok := h.retained("$SYS/Coreflux/Actions/UsesHalf"); ok {
		t.Error("the caller of a broken callable is published as deployed")
	}
	// Fixed, the callable brings its caller back.
	h.mustCommand("-addAction DEFINE ACTION Half\nINPUT v AS DOUBLE\nDO\n    SET \"h\" WITH {v} / 4\nRETURN\n    OUTPUT h\n")
	h.root.publish(t, "half/in", "5", 0)
	if got := h.root.await(t, "half/out"); got != "1.25" {
		t.Errorf("half/out = %q, want 1.25", got)
	}
	if _, ok := h.retained("$SYS/Coreflux/Actions/UsesHalf"); !ok {
		t.Error("the caller is not published again once it builds")
	}
}

// TestConnectRulesAndAnonymousClients: the Connect rules should also
// decide about clients without a user name that a listener admits.
func TestConnectRulesAndAnonymousClients(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.listener.AllowAnonymous = true })
	h.mustCommand(`-addRule DEFINE RULE OnlyGateways WITH PRIORITY 100 FOR Connect IF CLIENTID MATCHES REGEX "^gw[0-9]+$" THEN ALLOW ELSE DENY`)
	h.connect("", "gw7")
	c, ca, err := h.tryConnect("", "laptop")
	if err == nil {
		c.close()
	}
	if ca == nil || ca.ReasonCode != 0x87 {
		t.Errorf("anonymous laptop: %v, CONNACK %+v; want 0x87", err, ca)
	}
}

// TestUnsupportedRuleConditions: a rule condition the engine cannot
// evaluate is refused at deploy with its position, not stored to never
// hold.
func TestUnsupportedRuleConditions(t *testing.T) {
	h := newHarness(t)
	for _, src := range []string{
		`DEFINE RULE Own WITH PRIORITY 50 FOR Publish TO TOPIC "u/+" IF USER IS TOPIC POSITION 2 THEN ALLOW ELSE DENY`,
		`DEFINE RULE Ep WITH PRIORITY 50 FOR Connect IF ENDPOINT IS "10.0.0.1" THEN ALLOW ELSE DENY`,
	} {
		r := h.command("-addRule " + src)
		if r.Success || len(r.Errors) == 0 || r.Errors[0].Line != 1 || r.Errors[0].Column == 0 {
			t.Errorf("%s: %+v, want a refusal with a position", src, r)
		}
	}
}
