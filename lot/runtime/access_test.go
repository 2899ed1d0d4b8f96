package runtime

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// TestNarrowDenyFiltersWildcards: a DENY on one topic refuses only the
// subscriptions wholly inside it; "#", "test/+" and "+/nosubscribe" are
// granted and do not receive the denied topic, live or retained. A rule
// change re-decides subscriptions already made.
func TestNarrowDenyFiltersWildcards(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addRule DEFINE RULE NoSub WITH PRIORITY 100 FOR Subscribe TO TOPIC "test/nosubscribe" DENY`)
	h.root.publishRetained(t, "test/nosubscribe", "retained-secret")
	h.root.publishRetained(t, "test/open", "retained-open")

	bob := h.connect("bob", "bob-acl")
	wantCodes(t, "bob subscribes", bob.subscribe(t, "#", "test/+", "+/nosubscribe", "test/nosubscribe"), 0, 0, 0, 0x87)
	if got := bob.await(t, "test/open"); got != "retained-open" {
		t.Errorf("retained test/open: %q", got)
	}
	h.root.publish(t, "test/nosubscribe", "live-secret", 1)
	h.root.publish(t, "test/open", "live-open", 1)
	h.settle(bob)
	if got := bob.on("test/nosubscribe"); len(got) != 0 {
		t.Errorf("bob received the denied topic: %q", got)
	}
	if got := bob.on("test/open"); len(got) < 3 { // retained via # and test/+, then live at least once
		t.Errorf("test/open: %q, want the retained and the live message", got)
	}

	// The rule goes: the same subscriptions now read the topic.
	h.mustCommand("-removeRule NoSub")
	h.root.publish(t, "test/nosubscribe", "after-removal", 1)
	h.settle(bob)
	if got := bob.on("test/nosubscribe"); len(got) == 0 || got[0] != "after-removal" {
		t.Errorf("after -removeRule: %q, want after-removal", got)
	}

	// A new rule narrows a subscription granted whole before.
	bob.subscribe(t, "other/#")
	h.mustCommand(`-addRule DEFINE RULE Hidden WITH PRIORITY 100 FOR Subscribe TO TOPIC "other/hidden" IF USER IS "bob" THEN DENY`)
	h.root.publish(t, "other/hidden", "hidden", 1)
	h.root.publish(t, "other/x", "visible", 1)
	h.settle(bob)
	if got := bob.on("other/hidden"); len(got) != 0 {
		t.Errorf("bob received other/hidden after the rule was added: %q", got)
	}
	if got := bob.on("other/x"); len(got) == 0 {
		t.Error("bob lost other/x")
	}
	// alice is not concerned by the rule.
	alice := h.connect("alice", "alice-acl")
	wantCodes(t, "alice subscribes", alice.subscribe(t, "other/#"), 0)
	h.root.publish(t, "other/hidden", "for-alice", 1)
	h.settle(alice)
	if got := alice.on("other/hidden"); len(got) != 1 {
		t.Errorf("alice on other/hidden: %q", got)
	}
}

// publishRetained publishes a retained QoS 1 message.
func (c *client) publishRetained(t testing.TB, topic, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1, Retain: true}); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}

// TestRestoreRulesAndRuleCount: -restoreRules brings the seed rules back
// (here: after AllowConnect was removed, ordinary users connect again),
// other rules stay, and $SYS/Coreflux/Config/Rules counts the rules.
func TestRestoreRulesAndRuleCount(t *testing.T) {
	h := newHarness(t)
	if got, _ := h.retained(RulesCountTopic); got != "3" {
		t.Errorf("%s = %q, want 3 (the seeds)", RulesCountTopic, got)
	}
	h.mustCommand(`-addRule DEFINE RULE Mine WITH PRIORITY 100 FOR Publish TO TOPIC "mine/#" DENY`)
	h.mustCommand("-removeRule AllowConnect")
	if _, _, err := h.tryConnect("bob", "bob-locked"); err == nil {
		t.Fatal("bob connected without AllowConnect")
	}
	if got, _ := h.retained(RulesCountTopic); got != "3" {
		t.Errorf("%s = %q, want 3", RulesCountTopic, got)
	}
	r := h.mustCommand("-restoreRules")
	if !strings.Contains(r.Message, "AllowConnect") {
		t.Errorf("-restoreRules: %+v", r)
	}
	h.connect("bob", "bob-back")
	if _, ok := h.store.Get("rule", "Mine"); !ok {
		t.Error("-restoreRules removed a user rule")
	}
	if got, _ := h.retained(RulesCountTopic); got != "4" {
		t.Errorf("%s = %q, want 4", RulesCountTopic, got)
	}
}

// TestEnvironmentCommands: -listEnv shows the values, -listSecrets only
// the names; -removeEnv and -removeSecret remove one, and say when there
// was none.
func TestEnvironmentCommands(t *testing.T) {
	h := newHarness(t)
	h.mustCommand("-setEnv PLANT=north")
	h.mustCommand("-setSecret TOKEN=s3cr3t-value")
	if r := h.mustCommand("-listEnv"); !strings.Contains(string(r.Data), `"PLANT":"north"`) {
		t.Errorf("-listEnv: %s", r.Data)
	}
	r := h.mustCommand("-listSecrets")
	if !strings.Contains(string(r.Data), `"TOKEN"`) || strings.Contains(string(r.Data)+r.Message, "s3cr3t") {
		t.Errorf("-listSecrets: %s %s", r.Message, r.Data)
	}
	h.mustCommand("-removeEnv PLANT")
	h.mustCommand("-removeSecret TOKEN")
	if r := h.command("-removeEnv PLANT"); r.Success || !strings.Contains(r.Message, "not found") {
		t.Errorf("second -removeEnv: %+v", r)
	}
	if r := h.mustCommand("-listSecrets"); strings.Contains(string(r.Data), "TOKEN") {
		t.Errorf("-listSecrets after -removeSecret: %s", r.Data)
	}
}

// TestKeptValuesSurviveRestart: a value kept with KEEP TOPIC is there
// again after a restart, for GET TOPIC, and counting goes on from it.
func TestKeptValuesSurviveRestart(t *testing.T) {
	kept := filepath.Join(t.TempDir(), "lot-kept.json")
	h := newHarness(t, func(h *harness) { h.engineOpts = func(o *Options) { o.KeptFile = kept } })
	h.mustCommand(`-addAction DEFINE ACTION Count ON TOPIC "count/in" DO
    KEEP TOPIC "count/state" WITH (GET TOPIC "count/state" AS INT) + 1
    PUBLISH TOPIC "count/out" WITH GET TOPIC "count/state"`)
	for range 3 {
		h.root.publish(t, "count/in", "x", 0)
	}
	h.settle(h.root)
	if got := h.root.on("count/out"); len(got) != 3 || got[2] != "3" {
		t.Fatalf("before the restart: %q", got)
	}
	h.restart()
	h.root.publish(t, "count/in", "x", 0)
	if got := h.root.await(t, "count/out"); got != "4" {
		t.Fatalf("after the restart: %q, want 4 (the kept 3, plus one)", got)
	}
}

// TestModelErrorsOnSysTopic: a model that fails publishes its error,
// retained, on $SYS/Coreflux/Models/<name>/Error as an action does on its
// own; the next good evaluation clears it, and so does removing the model.
func TestModelErrorsOnSysTopic(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addModel DEFINE MODEL Bad WITH TOPIC "mx/out"
    ADD DOUBLE "v" WITH TOPIC "mx/v" AS TRIGGER
    ADD DOUBLE "ratio" WITH (100 / GET TOPIC "mx/v" AS DOUBLE)`)
	topic := modelErrorTopic("Bad")
	h.root.publish(t, "mx/v", "0", 0)
	h.settle(h.root)
	got, ok := h.retained(topic)
	if !ok || !strings.Contains(got, `"model":"Bad"`) {
		t.Logf("out: %q", h.root.on("mx/out"))
		t.Fatalf("%s = %q (%v), want the model's error", topic, got, ok)
	}
	h.root.publish(t, "mx/v", "4", 0)
	h.settle(h.root)
	if got, ok := h.retained(topic); ok {
		t.Errorf("%s after a good evaluation: %q, want cleared", topic, got)
	}
}

// TestLotDiagnostic: -lotDiagnostic KIND NAME returns what the checker
// says of a stored definition, warnings included, and whether it runs.
func TestLotDiagnostic(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addAction DEFINE ACTION Warned ON TOPIC "dg/in" DO PUBLISH TOPIC "dg/out" WITH {never}`)
	r := h.mustCommand("-lotDiagnostic action Warned")
	if !strings.Contains(string(r.Data), `"severity":"warning"`) || !strings.Contains(string(r.Data), `"running":true`) {
		t.Errorf("-lotDiagnostic: %s", r.Data)
	}
	if r := h.command("-lotDiagnostic action Nobody"); r.Success || !strings.Contains(r.Message, "not found") {
		t.Errorf("unknown action: %+v", r)
	}
	if r := h.command("-lotDiagnostic panel X"); r.Success {
		t.Errorf("unknown kind: %+v", r)
	}
	if r := h.mustCommand("-lotDiagnostic rule AllowConnect"); !strings.Contains(string(r.Data), `"diagnostics":[]`) {
		t.Errorf("a clean rule: %s", r.Data)
	}
}
