package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/lot/interp"
	"gantry/lot/syntax"
	"gantry/lot/topiccache"
)

// ErrHopLimit is reported when a chain of actions reaches Options.HopLimit.
var ErrHopLimit = errors.New("runtime: hop limit reached: actions trigger each other in a loop")

// onMessage handles every routed message, on the trigger client's
// goroutine, in routing order.
func (e *Engine) onMessage(m *broker.Message) {
	now := time.Now()
	if m.Retain {
		// A retained message replayed when the client subscribed: it
		// seeds the cache, it is not news.
		e.cache.Publish(m.Topic, m.Payload, now)
		return
	}
	prev, had := e.cache.Lookup(m.Topic)
	changed := !had || !bytes.Equal(prev, m.Payload)
	e.cache.Publish(m.Topic, m.Payload, now)
	if m.Origin == broker.OriginPeer {
		return // a peer's message never triggers LoT: it ran where it entered
	}
	d := e.dep.Load()
	for _, a := range d.onMessage {
		if !topic.Matches(a.filter, m.Topic) {
			continue
		}
		if a.def.Trigger.Kind == syntax.TriggerChange && !changed {
			continue
		}
		e.runAction(a, &interp.Event{Topic: m.Topic, Payload: m.Payload}, m.Hops)
	}
	for _, mod := range d.triggered {
		if inst, ok := mod.Instance(m.Topic); ok {
			e.publishModel(d, mod, inst, m.Hops)
		}
	}
}

// runAction runs one action and delivers what it published.
func (e *Engine) runAction(a *action, ev *interp.Event, hops uint8) error {
	e.stats.Runs.Add(1)
	d := e.dep.Load()
	fx := newEffects(e, ev)
	host := &interp.Host{Effects: fx, Topics: fx, Env: e.env, Callables: d, Models: d}
	err := a.prog.Run(host, ev)
	if ferr := e.flush(fx, hops); ferr != nil && err == nil {
		err = fmt.Errorf("action %s: %w", a.name, ferr)
	}
	e.reportRun(a.name, err)
	return err
}

// publishModel evaluates one instance of a triggered model and publishes
// its JSON.
func (e *Engine) publishModel(d *deployment, m *interp.Model, inst interp.Instance, hops uint8) {
	host := &interp.Host{Topics: e.cache, Env: e.env, Models: d}
	payload, err := m.Evaluate(host, inst)
	if err == nil && inst.Topic != "" {
		err = e.publish(inst.Topic, payload, m.Retain(), m.QoS(), hops+1)
	}
	if err != nil {
		e.stats.Errors.Add(1)
		e.log.Warn("model failed", "model", m.Name(), "err", err)
	}
}

// effects buffers a run's PUBLISH and KEEP in a topiccache.Frame, so that
// GET TOPIC sees the run's own writes first (LOT.md §4.5); flush delivers
// them when the run ends, in order.
type effects struct {
	frame *topiccache.Frame
	meta  []publishMeta // retain and QoS of each buffered write
}

type publishMeta struct {
	retain bool
	qos    byte
}

func newEffects(e *Engine, ev *interp.Event) *effects {
	fr := topiccache.NewFrame(e.cache, retainedReader{e.o.Broker})
	if ev != nil && ev.Topic != "" {
		fr.SetTrigger(ev.Topic, ev.Payload)
	}
	return &effects{frame: fr}
}

func (f *effects) Publish(topic string, payload []byte, retain bool, qos byte) error {
	f.frame.Publish(topic, payload)
	f.meta = append(f.meta, publishMeta{retain, qos})
	return nil
}

func (f *effects) Keep(topic string, payload []byte) error {
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
			if err := e.cache.Keep(w.Topic, w.Payload, time.Now()); err != nil {
				errs = append(errs, fmt.Errorf("KEEP TOPIC %s: %w", w.Topic, err))
			}
			continue
		}
		if err := e.publish(w.Topic, w.Payload, f.meta[i].retain, f.meta[i].qos, hops+1); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// publish sends one message as LoT, refusing it at the hop limit.
func (e *Engine) publish(tp string, payload []byte, retain bool, qos byte, hops uint8) error {
	if int(hops) > e.o.HopLimit {
		e.stats.Loops.Add(1)
		return fmt.Errorf("PUBLISH TOPIC %s: %w (%d)", tp, ErrHopLimit, e.o.HopLimit)
	}
	if e.trig == nil {
		return errors.New("runtime: not started")
	}
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

// actionError is the retained JSON on $SYS/Coreflux/Actions/<name>/Error.
type actionError struct {
	Action string    `json:"action"`
	Error  string    `json:"error"`
	Line   int       `json:"line,omitempty"`
	Column int       `json:"column,omitempty"`
	Time   time.Time `json:"time"`
	Count  uint64    `json:"errors"`
}

// errorTopic is where an action's last error is kept.
func errorTopic(action string) string { return "$SYS/Coreflux/Actions/" + action + "/Error" }

// reportRun publishes a failed run's error retained on the action's error
// topic, and clears that topic after the next good run.
func (e *Engine) reportRun(name string, err error) {
	if err == nil {
		e.mu.Lock()
		had := e.errored[name]
		delete(e.errored, name)
		e.mu.Unlock()
		if had {
			e.publishSys(errorTopic(name), nil)
		}
		return
	}
	n := e.stats.Errors.Add(1)
	ae := actionError{Action: name, Error: err.Error(), Time: time.Now().UTC(), Count: n}
	var ie *interp.Error
	if errors.As(err, &ie) {
		ae.Line, ae.Column = ie.Pos.Line, ie.Pos.Col
	}
	data, _ := json.Marshal(ae)
	e.mu.Lock()
	e.errored[name] = true
	e.mu.Unlock()
	e.publishSys(errorTopic(name), data)
	e.log.Warn("action failed", "action", name, "err", err)
}

// publishSys publishes a retained $SYS message (an empty payload clears it).
func (e *Engine) publishSys(tp string, payload []byte) {
	if e.cmd == nil {
		return
	}
	e.cmd.PublishMessage(&broker.Message{Topic: tp, Payload: payload, Retain: true, Origin: broker.OriginBroker,
		ClientID: commandClientID})
}
