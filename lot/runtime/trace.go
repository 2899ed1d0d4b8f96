package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/lot/command"
	"gantry/lot/interp"
)

// TraceWindow is how long -actionTrace streams an action's runs (LOT.md
// §8.2: five minutes); the same command again restarts the window.
const TraceWindow = 5 * time.Minute

// maxTracePayload bounds each payload a trace message shows.
const maxTracePayload = 1024

// TraceTopic is where -actionTrace streams the runs of action name.
func TraceTopic(name string) string { return "$SYS/Coreflux/Actions/" + name + "/Trace" }

// tracer is the set of traced actions. A run reads only active unless
// some trace is on.
type tracer struct {
	active atomic.Bool // a trace is on (perhaps expired)
	mu     sync.Mutex  // guards all and names
	all    time.Time   // -actionTrace all: until then every action; zero when off
	names  map[string]time.Time
}

// traced reports whether a run of name is traced now.
func (t *tracer) traced(name string, now time.Time) bool {
	if !t.active.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
	if len(t.names) == 0 && t.all.IsZero() {
		t.active.Store(false)
		return false
	}
	return !t.all.IsZero() || !t.names[name].IsZero()
}

func (t *tracer) pruneLocked(now time.Time) {
	if !t.all.IsZero() && !now.Before(t.all) {
		t.all = time.Time{}
	}
	maps.DeleteFunc(t.names, func(_ string, until time.Time) bool { return !now.Before(until) })
}

// traceStatus is the data of -actionTrace's replies.
type traceStatus struct {
	Topic   string               `json:"topic,omitempty"` // where the runs go (with +: every action)
	All     *time.Time           `json:"all,omitempty"`   // every action is traced until then
	Actions map[string]time.Time `json:"actions"`         // each traced action, until when
}

// TraceActions implements command.Tracer: NAME or all traces for
// TraceWindow, off stops every trace, remove NAME one, status lists them.
// The runs of this node are traced: in a cluster an action runs where its
// message entered, so send the command to every node whose runs you want.
func (e *Engine) TraceActions(_ context.Context, _ command.Caller, op command.TraceOp, name string) (any, error) {
	now := time.Now()
	t := &e.trace
	if op == command.TraceOn && name != "" && e.dep.Load().actions[name] == nil {
		return nil, fmt.Errorf("%w: action %q", command.ErrNotFound, name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
	st := traceStatus{}
	switch op {
	case command.TraceOn:
		until := now.Add(TraceWindow)
		if name == "" {
			t.all, st.Topic = until, TraceTopic("+")
		} else {
			if t.names == nil {
				t.names = map[string]time.Time{}
			}
			t.names[name], st.Topic = until, TraceTopic(name)
		}
		t.active.Store(true)
	case command.TraceOff:
		t.all, t.names = time.Time{}, nil
	case command.TraceRemove:
		if t.names[name].IsZero() {
			return nil, fmt.Errorf("%w: no trace of action %q", command.ErrNotFound, name)
		}
		delete(t.names, name)
	}
	if !t.all.IsZero() {
		all := t.all
		st.All = &all
	}
	st.Actions = maps.Clone(t.names)
	if st.Actions == nil {
		st.Actions = map[string]time.Time{}
	}
	return st, nil
}

// traceRun is one message on TraceTopic: a run of the action, what
// started it, what it wrote and how it ended.
type traceRun struct {
	Action     string       `json:"action"`
	At         time.Time    `json:"at"`
	DurationUs int64        `json:"durationUs"`
	Trigger    traceTrigger `json:"trigger"`
	Writes     []traceWrite `json:"writes"`
	Error      string       `json:"error,omitempty"`
}

type traceTrigger struct {
	Topic   string `json:"topic,omitempty"`    // the message's topic; "" for a timer, ON START or a call
	Payload string `json:"payload,omitempty"`  // clipped to maxTracePayload bytes
	Client  string `json:"clientId,omitempty"` // of ON CONNECT, ON DISCONNECT and ON SUBSCRIBE
}

type traceWrite struct {
	Topic   string `json:"topic"`
	Payload string `json:"payload"`
	Keep    bool   `json:"keep,omitempty"` // KEEP TOPIC (the cache only)
	Retain  bool   `json:"retain,omitempty"`
	QoS     byte   `json:"qos"`
}

// startTrace returns the record of a traced run, or nil when a is not
// traced.
func (e *Engine) startTrace(a *action, ev *interp.Event) *traceRun {
	now := time.Now()
	if !e.trace.traced(a.name, now) {
		return nil
	}
	tr := &traceRun{Action: a.name, At: now, Writes: []traceWrite{}}
	if ev != nil {
		tr.Trigger = traceTrigger{Topic: ev.Topic, Payload: clipPayload(ev.Payload), Client: ev.Session.ClientID}
	}
	return tr
}

// finishTrace records what the run wrote (its frame, until the scratch is
// reset) and how it ended, and publishes the record.
func (e *Engine) finishTrace(tr *traceRun, fx *effects, err error) {
	tr.DurationUs = time.Since(tr.At).Microseconds()
	for i, w := range fx.frame.Writes() {
		tw := traceWrite{Topic: w.Topic, Payload: clipPayload(w.Payload), Keep: w.Keep}
		if i < len(fx.meta) {
			tw.Retain, tw.QoS = fx.meta[i].retain, fx.meta[i].qos
		}
		tr.Writes = append(tr.Writes, tw)
	}
	if err != nil {
		tr.Error = err.Error()
	}
	b, jerr := json.Marshal(tr)
	if jerr != nil || e.cmd == nil {
		return
	}
	e.cmd.PublishMessage(&broker.Message{Topic: TraceTopic(tr.Action), Payload: b, Origin: broker.OriginBroker,
		ClientID: commandClientID})
}

func clipPayload(p []byte) string {
	if len(p) > maxTracePayload {
		return string(p[:maxTracePayload]) + "…"
	}
	return string(p)
}
