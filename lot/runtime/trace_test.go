package runtime

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestActionTrace: -actionTrace NAME streams each run of that action to
// $SYS/Coreflux/Actions/NAME/Trace (trigger, writes, error), nothing of
// other actions; status lists it; remove and off stop it; all traces
// every action; an unknown action is refused by name.
func TestActionTrace(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addAction DEFINE ACTION Doubler ON TOPIC "tr/in" DO PUBLISH TOPIC "tr/out" WITH (PAYLOAD * 2)`)
	h.mustCommand(`-addAction DEFINE ACTION Other ON TOPIC "tr/other" DO PUBLISH TOPIC "tr/other/out" WITH "x"`)
	h.mustCommand(`-addAction DEFINE ACTION Failing ON TOPIC "tr/bad" DO PUBLISH TOPIC "tr/bad/out" WITH (PAYLOAD * 2)`)
	watcher := h.connect("root", "trace-watcher")
	watcher.subscribe(t, "$SYS/Coreflux/Actions/+/Trace", "tr/#")
	h.settle(watcher)
	pub := h.connect("root", "trace-pub")

	if r := h.command("-actionTrace Nobody"); r.Success || !strings.Contains(r.Message, "not found") {
		t.Fatalf("-actionTrace of an unknown action: %+v", r)
	}
	r := h.mustCommand("-actionTrace Doubler")
	if !strings.Contains(string(r.Data), `"topic":"$SYS/Coreflux/Actions/Doubler/Trace"`) || !strings.Contains(string(r.Data), `"Doubler":`) {
		t.Fatalf("-actionTrace Doubler: %s", r.Data)
	}
	pub.publish(t, "tr/other", "1", 0)
	pub.publish(t, "tr/in", "21", 0)
	var run traceRun
	if err := json.Unmarshal([]byte(watcher.await(t, TraceTopic("Doubler"))), &run); err != nil {
		t.Fatal(err)
	}
	if run.Action != "Doubler" || run.Trigger.Topic != "tr/in" || run.Trigger.Payload != "21" ||
		len(run.Writes) != 1 || run.Writes[0].Topic != "tr/out" || run.Writes[0].Payload != "42" || run.Error != "" || run.At.IsZero() {
		t.Fatalf("trace of a run: %+v", run)
	}
	watcher.await(t, "tr/other/out") // Other ran before Doubler: its trace would have come first
	if got := watcher.on(TraceTopic("Other")); len(got) != 0 {
		t.Fatalf("an action that is not traced was traced: %v", got)
	}
	if r := h.mustCommand("-actionTrace status"); !strings.Contains(string(r.Data), `"Doubler":`) {
		t.Fatalf("status: %s", r.Data)
	}
	h.mustCommand("-actionTrace remove Doubler")
	if r := h.command("-actionTrace remove Doubler"); r.Success {
		t.Fatalf("removing a trace that is not on: %+v", r)
	}

	h.mustCommand("-actionTrace all")
	pub.publish(t, "tr/bad", "not a number", 0)
	if err := json.Unmarshal([]byte(watcher.await(t, TraceTopic("Failing"))), &run); err != nil {
		t.Fatal(err)
	}
	if run.Error == "" || len(run.Writes) != 0 {
		t.Fatalf("trace of a failing run: %+v", run)
	}
	pub.publish(t, "tr/other", "2", 0)
	watcher.await(t, TraceTopic("Other"))
	if r := h.mustCommand("-actionTrace status"); !strings.Contains(string(r.Data), `"all":`) {
		t.Fatalf("status with all: %s", r.Data)
	}
	h.mustCommand("-actionTrace off")
	pub.publish(t, "tr/in", "1", 0)
	watcher.await(t, "tr/out")
	watcher.await(t, "tr/out")
	h.settle(watcher)
	if got := watcher.on(TraceTopic("Doubler")); len(got) != 1 {
		t.Fatalf("traced after off or remove: %d traces of Doubler", len(got))
	}
}
