package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/lot/defs"
	"gantry/lot/interp"
	"gantry/lot/syntax"
	"gantry/lot/topiccache"
)

// ErrHopLimit is reported when a chain of actions reaches Options.HopLimit.
var ErrHopLimit = errors.New("runtime: hop limit reached: actions trigger each other in a loop")

// payloadSum is what ON CHANGE remembers of a payload: a hash and the
// length, 16 bytes whatever the payload's size (a collision, 2^-64 per
// pair, would hide one change).
type payloadSum struct {
	hash uint64
	n    int
}

// changeSeed seeds the payload hashes of this process.
var changeSeed = maphash.MakeSeed()

// maxChangeTopics bounds the concrete topics whose last payload ON CHANGE
// remembers; past it the memory starts over (each topic's next message
// then counts as a change once).
const maxChangeTopics = 100_000

// onMessage handles every routed message, on the trigger client's
// goroutine, in routing order.
func (e *Engine) onMessage(m *broker.Message) {
	if m.Retain {
		// A retained message replayed when the client subscribed: it
		// seeds the cache, it is not news, and it never replaces a newer
		// value (a redeploy that adds a subscription replays old ones).
		if _, ok := e.cache.Lookup(m.Topic); !ok {
			e.cache.Publish(m.Topic, m.Payload, time.Now())
		}
		return
	}
	if m.ClientID != triggerClientID || m.Origin != broker.OriginLoT {
		// LoT's own messages were cached when they were published, so
		// that the next run reads them at once (see publish).
		e.cache.Publish(m.Topic, m.Payload, time.Now())
	}
	if m.Origin == broker.OriginPeer {
		return // a peer's message never triggers LoT: it ran where it entered
	}
	d := e.dep.Load()
	matched := e.matchActions(d, m.Topic)
	changed := e.rememberChange(matched, m)
	for _, en := range matched {
		a := en.Client
		if a.def.Trigger.Kind == syntax.TriggerChange && !changed {
			continue
		}
		e.runAction(a, &interp.Event{Topic: m.Topic, Payload: m.Payload}, m.Hops)
	}
	clear(matched)
	e.matched = matched[:0]
	for _, mod := range d.exploding {
		if topic.Matches(mod.Topic(), m.Topic) {
			e.explode(mod, m)
		}
	}
	for _, mod := range d.triggered {
		if inst, ok := mod.Instance(m.Topic); ok {
			e.publishModel(d, mod, inst, m.Hops)
		}
	}
}

// matchActions returns the ON TOPIC and ON CHANGE actions whose filter
// matches tp, in deployment order, in the trigger goroutine's own buffer.
func (e *Engine) matchActions(d *deployment, tp string) []*topic.Entry[*action] {
	matched := d.triggers.Match(tp, e.matched[:0], nil)
	if len(matched) > 1 {
		slices.SortFunc(matched, func(a, b *topic.Entry[*action]) int { return a.Client.order - b.Client.order })
	}
	return matched
}

// rememberChange records m's payload when an ON CHANGE action is among
// the matched ones and reports whether it differs from the previous
// payload of that topic (the first message on a topic does). The memory
// is the trigger goroutine's own: the topic cache cannot serve, since
// LoT's publishes, KEEP TOPIC and retained messages write it too.
func (e *Engine) rememberChange(matched []*topic.Entry[*action], m *broker.Message) bool {
	if !slices.ContainsFunc(matched, func(en *topic.Entry[*action]) bool {
		return en.Client.def.Trigger.Kind == syntax.TriggerChange
	}) {
		return false
	}
	sum := payloadSum{maphash.Bytes(changeSeed, m.Payload), len(m.Payload)}
	prev, had := e.lastPayload[m.Topic]
	if had && prev == sum {
		return false
	}
	if !had && len(e.lastPayload) >= maxChangeTopics {
		for tp := range e.lastPayload { // forget one topic, not all: the others would all fire
			delete(e.lastPayload, tp)
			break
		}
	}
	e.lastPayload[m.Topic] = sum
	return true
}

// explode republishes, key by key, a JSON object that arrived on the topic
// of a model (LOT.md §5.4).
func (e *Engine) explode(mod *interp.Model, m *broker.Message) {
	err := mod.Explode(m.Topic, m.Payload, func(tp string, payload []byte) error {
		return e.publish(tp, payload, false, 0, m.Hops+1)
	})
	if err != nil {
		err = fmt.Errorf("exploding the JSON on %s: %w", m.Topic, err)
	}
	e.reportFailure(defs.Model, mod.Name(), err)
}

// runAction runs one action and delivers what it published. ev may be nil
// (timers, ON START); it is copied, so a caller's Event may live on its
// stack.
func (e *Engine) runAction(a *action, ev *interp.Event, hops uint8) error {
	e.stats.Runs.Add(1)
	d := e.dep.Load()
	sc := e.scratch.Get().(*runScratch)
	sc.host.Callables, sc.host.Models = d, d
	var runEv *interp.Event
	if ev != nil {
		sc.ev = *ev
		runEv = &sc.ev
		if ev.Topic != "" {
			sc.fx.frame.SetTrigger(ev.Topic, ev.Payload)
		}
	}
	tr := e.startTrace(a, ev)
	err := a.prog.Run(&sc.host, runEv)
	if ferr := e.flush(&sc.fx, hops); ferr != nil && err == nil {
		err = fmt.Errorf("action %s: %w", a.name, ferr)
	}
	if tr != nil {
		e.finishTrace(tr, &sc.fx, err)
	}
	sc.reset()
	e.scratch.Put(sc)
	e.reportRun(a.name, err)
	return err
}

// runScratch is what an action run needs besides the interpreter's own
// state: the event, the host and the buffered effects. The engine recycles
// them (Engine.scratch), so that a message through the trigger path
// allocates only what it publishes.
type runScratch struct {
	ev   interp.Event
	host interp.Host
	fx   effects
}

func (e *Engine) newScratch() any {
	sc := &runScratch{fx: effects{frame: topiccache.NewFrame(e.cache, retainedReader{e.o.Broker})}}
	sc.host = interp.Host{Effects: &sc.fx, Topics: &sc.fx, Env: e.env}
	return sc
}

// reset drops every reference to the run's messages and deployment.
func (sc *runScratch) reset() {
	sc.ev = interp.Event{}
	sc.host.Callables, sc.host.Models = nil, nil
	sc.fx.frame.Reset()
	clear(sc.fx.meta)
	sc.fx.meta = sc.fx.meta[:0]
}

// publishModel evaluates one instance of a triggered model and publishes
// its JSON.
func (e *Engine) publishModel(d *deployment, m *interp.Model, inst interp.Instance, hops uint8) {
	host := &interp.Host{Topics: cacheThenRetained{e}, Env: e.env, Models: d}
	payload, err := m.Evaluate(host, inst)
	if err == nil && inst.Topic != "" {
		err = e.publish(inst.Topic, payload, m.Retain(), m.QoS(), hops+1)
	}
	e.reportFailure(defs.Model, m.Name(), err)
}

// effects buffers a run's PUBLISH and KEEP in a topiccache.Frame, so that
// GET TOPIC sees the run's own writes first (LOT.md §4.5); flush delivers
// them when the run ends, in order.
type effects struct {
	frame *topiccache.Frame
	meta  []publishMeta // retain and QoS of each buffered write
	bytes int           // payload bytes buffered
}

// Bounds of what one run may buffer before it ends: a LOOP that publishes
// a large payload many times must not hold gigabytes.
const (
	maxRunWrites = 1000
	maxRunBytes  = 4 << 20
)

// ErrRunWrites is returned when a run publishes or keeps more than
// maxRunWrites messages or maxRunBytes bytes.
var ErrRunWrites = fmt.Errorf("runtime: a run may publish at most %d messages and %d MiB", maxRunWrites, maxRunBytes>>20)

func (f *effects) room(payload []byte) error {
	if len(f.meta) >= maxRunWrites || f.bytes+len(payload) > maxRunBytes {
		return ErrRunWrites
	}
	f.bytes += len(payload)
	return nil
}

type publishMeta struct {
	retain bool
	qos    byte
}

// newEffects returns effects of a run that is not recycled (-runAction,
// whose reply lists the writes after the flush).
func newEffects(e *Engine) *effects {
	return &effects{frame: topiccache.NewFrame(e.cache, retainedReader{e.o.Broker})}
}

func (f *effects) Publish(topic string, payload []byte, retain bool, qos byte) error {
	if err := f.room(payload); err != nil {
		return err
	}
	f.frame.Publish(topic, payload)
	f.meta = append(f.meta, publishMeta{retain, qos})
	return nil
}

func (f *effects) Keep(topic string, payload []byte) error {
	if err := f.room(payload); err != nil {
		return err
	}
	f.frame.Keep(topic, payload)
	f.meta = append(f.meta, publishMeta{})
	return nil
}

// Lookup implements interp.TopicReader over the frame.
func (f *effects) Lookup(topic string) ([]byte, bool) {
	p, src := f.frame.Get(topic)
	return p, src != topiccache.NotFound
}

// flush delivers a run's writes: KEEP to the cache only, PUBLISH through
// the broker, one hop further than the trigger.
func (e *Engine) flush(f *effects, hops uint8) error {
	var errs []error
	for i, w := range f.frame.Writes() {
		if w.Keep {
			at := time.Now()
			if err := e.cache.Keep(w.Topic, w.Payload, at); err != nil {
				errs = append(errs, fmt.Errorf("KEEP TOPIC %s: %w", w.Topic, err))
			} else if r := e.o.KeptOut; r != nil {
				r.Kept(w.Topic, w.Payload, at)
			}
			e.keptChanged()
			continue
		}
		if err := e.publish(w.Topic, w.Payload, f.meta[i].retain, f.meta[i].qos, hops+1); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// publish sends one message as LoT, refusing it at the hop limit. It
// writes the topic cache at once, before routing: the next run reads the
// value even when the trigger goroutine has not yet seen the message (a
// timer that counts, two messages handled back to back).
func (e *Engine) publish(tp string, payload []byte, retain bool, qos byte, hops uint8) error {
	if int(hops) > e.o.HopLimit {
		e.stats.Loops.Add(1)
		return fmt.Errorf("PUBLISH TOPIC %s: %w (%d)", tp, ErrHopLimit, e.o.HopLimit)
	}
	if e.trig == nil {
		return errors.New("runtime: not started")
	}
	e.stats.Published.Add(1)
	e.cache.Publish(tp, payload, time.Now())
	return e.trig.PublishMessage(&broker.Message{Topic: tp, Payload: payload, QoS: qos, Retain: retain,
		Origin: broker.OriginLoT, ClientID: triggerClientID, Hops: hops})
}

// retainedReader reads the broker's retained messages for GET TOPIC.
type retainedReader struct{ b *broker.Server }

func (r retainedReader) Retained(topic string) ([]byte, bool) {
	m, ok := r.b.Retained(topic)
	if !ok {
		return nil, false
	}
	return m.Payload, true
}

// actionError is the retained JSON on $SYS/Coreflux/Actions/<name>/Error
// and $SYS/Coreflux/Models/<name>/Error.
type actionError struct {
	Action string    `json:"action,omitempty"`
	Model  string    `json:"model,omitempty"`
	Error  string    `json:"error"`
	Line   int       `json:"line,omitempty"`
	Column int       `json:"column,omitempty"`
	Time   time.Time `json:"time"`
	Count  uint64    `json:"errors"` // failed runs of the action on this node since it was added
}

// errorTopic is where an action's last error is kept.
func errorTopic(action string) string { return "$SYS/Coreflux/Actions/" + action + "/Error" }

// modelErrorTopic is where a model's last error is kept.
func modelErrorTopic(model string) string { return "$SYS/Coreflux/Models/" + model + "/Error" }

// errorLogInterval rate-limits the log line of an action that keeps
// failing (its error topic has every error).
const errorLogInterval = time.Minute

// errorRecord is what the engine remembers of an action's failures.
type errorRecord struct {
	count      uint64    // failed runs of the action on this node since it was added
	published  bool      // an error is retained on its error topic
	logged     time.Time // when a failure was last logged
	suppressed uint64    // failures not logged since
}

// reportRun publishes a failed run's error retained on the action's error
// topic, and clears that topic after the next good run.
func (e *Engine) reportRun(name string, err error) { e.reportFailure(defs.Action, name, err) }

// errorKey is the errored map's key of a definition.
func errorKey(kind defs.Kind, name string) string { return string(kind) + "/" + name }

// errorTopicOf is where the last error of an action or model is kept.
func errorTopicOf(kind defs.Kind, name string) string {
	if kind == defs.Model {
		return modelErrorTopic(name)
	}
	return errorTopic(name)
}

// reportFailure publishes an action's or a model's error, retained on its
// error topic, and clears that topic after the next success (err nil).
func (e *Engine) reportFailure(kind defs.Kind, name string, err error) {
	key := errorKey(kind, name)
	if err == nil {
		if e.errorsShown.Load() == 0 {
			return // no error topic to clear: a good run takes no lock
		}
		e.mu.Lock()
		rec := e.errored[key]
		had := rec != nil && rec.published
		if had {
			rec.published = false
			e.errorsShown.Add(-1)
		}
		e.mu.Unlock()
		if had {
			e.publishSys(errorTopicOf(kind, name), nil)
		}
		return
	}
	e.stats.Errors.Add(1)
	e.mu.Lock()
	rec := e.errored[key]
	if rec == nil {
		rec = &errorRecord{}
		e.errored[key] = rec
	}
	rec.count++
	if !rec.published {
		rec.published = true
		e.errorsShown.Add(1)
	}
	n := rec.count
	now := time.Now()
	logIt, suppressed := now.Sub(rec.logged) >= errorLogInterval, rec.suppressed
	if logIt {
		rec.logged, rec.suppressed = now, 0
	} else {
		rec.suppressed++
	}
	e.mu.Unlock()
	ae := actionError{Error: err.Error(), Time: now.UTC(), Count: n}
	if kind == defs.Model {
		ae.Model = name
	} else {
		ae.Action = name
	}
	var ie *interp.Error
	if errors.As(err, &ie) {
		ae.Line, ae.Column = ie.Pos.Line, ie.Pos.Col
	}
	data, _ := json.Marshal(ae)
	e.publishSys(errorTopicOf(kind, name), data)
	if logIt {
		e.log.Warn(strings.ToLower(string(kind))+" failed", string(kind), name, "err", err, "errors", n, "not_logged_since_last", suppressed)
	}
}

// publishSys publishes a retained $SYS message (an empty payload clears it).
func (e *Engine) publishSys(tp string, payload []byte) {
	if e.cmd == nil {
		return
	}
	e.cmd.PublishMessage(&broker.Message{Topic: tp, Payload: payload, Retain: true, Origin: broker.OriginBroker,
		ClientID: commandClientID})
}

// cacheThenRetained reads a model's topics as GET TOPIC does, from the
// cache and then the retained store (LOT.md §4.5).
type cacheThenRetained struct{ e *Engine }

func (r cacheThenRetained) Lookup(topic string) ([]byte, bool) {
	if p, ok := r.e.cache.Lookup(topic); ok {
		return p, true
	}
	return retainedReader{r.e.o.Broker}.Retained(topic)
}
