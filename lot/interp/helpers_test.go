package interp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gantry/lot/syntax"
)

// published is one call to Effects, as a test records it.
type published struct {
	Topic   string
	Payload string
	Retain  bool
	QoS     byte
	Keep    bool
}

func (p published) String() string {
	s := p.Topic + "=" + p.Payload
	if p.Keep {
		s = "keep " + s
	}
	if p.Retain {
		s += " (retained)"
	}
	return s
}

// recorder is an Effects and a TopicReader: it records every publish and
// keep, and answers GET TOPIC from what was written, like the last-value
// cache.
type recorder struct {
	out    []published
	values map[string][]byte
	env    map[string]string
	fail   error // returned by Publish and Keep when set
}

func newRecorder() *recorder {
	return &recorder{values: map[string][]byte{}, env: map[string]string{}}
}

func (r *recorder) Publish(topic string, payload []byte, retain bool, qos byte) error {
	if r.fail != nil {
		return r.fail
	}
	r.out = append(r.out, published{Topic: topic, Payload: string(payload), Retain: retain, QoS: qos})
	r.values[topic] = payload
	return nil
}

func (r *recorder) Keep(topic string, payload []byte) error {
	if r.fail != nil {
		return r.fail
	}
	r.out = append(r.out, published{Topic: topic, Payload: string(payload), Keep: true})
	r.values[topic] = payload
	return nil
}

func (r *recorder) Lookup(topic string) ([]byte, bool) {
	b, ok := r.values[topic]
	return b, ok
}

func (r *recorder) Env(name string) (string, bool) {
	v, ok := r.env["env:"+name]
	return v, ok
}

func (r *recorder) Secret(name string) (string, bool) {
	v, ok := r.env["secret:"+name]
	return v, ok
}

func (r *recorder) SetEnv(name, value string, secret bool) error {
	r.env[envKey(name, secret)] = value
	return nil
}

func (r *recorder) DeleteEnv(name string, secret bool) error {
	delete(r.env, envKey(name, secret))
	return nil
}

func envKey(name string, secret bool) string {
	if secret {
		return "secret:" + name
	}
	return "env:" + name
}

// delivered lists the publishes (not keeps) as "topic=payload".
func (r *recorder) delivered() []string {
	var out []string
	for _, p := range r.out {
		if !p.Keep {
			out = append(out, p.Topic+"="+p.Payload)
		}
	}
	return out
}

// registry is a Callables and a Models backed by maps.
type registry struct {
	programs map[string]*Program
	models   map[string]*Model
}

func (g *registry) Callable(name string) (*Program, bool) {
	p, ok := g.programs[name]
	return p, ok
}

func (g *registry) Model(name string) (*Model, bool) {
	m, ok := g.models[name]
	return m, ok
}

// fixedClock is 2025-03-17T14:25:30.123Z.
var fixedClock = time.Date(2025, 3, 17, 14, 25, 30, 123_000_000, time.UTC)

// seqRandom returns 0, 1, 2, ... as random numbers.
type seqRandom struct{ n uint64 }

func (s *seqRandom) Uint64() uint64 {
	s.n++
	return s.n - 1
}

func testOptions() *Options {
	return &Options{Clock: func() time.Time { return fixedClock }, Location: time.UTC, Random: &seqRandom{}}
}

// parseOne parses a source and returns its definitions, failing the test
// on a syntax error.
func parseOne(t testing.TB, src string) *syntax.File {
	t.Helper()
	f, err := syntax.Parse("test.lot", src)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return f
}

// world is a miniature runtime for tests: it deploys a file's actions and
// models and routes publishes to them the way LOT.md describes (ON TOPIC,
// ON CHANGE per concrete topic, AS TRIGGER fields, JSON explosion on
// model topics), with a hop limit against loops.
type world struct {
	t       testing.TB
	rec     *recorder
	reg     *registry
	actions []*Program
	models  []*Model
	last    map[string]string // ON CHANGE memory: action + topic -> payload
}

func newWorld(t testing.TB, src string) *world {
	t.Helper()
	w := &world{t: t, rec: newRecorder(), reg: &registry{programs: map[string]*Program{}, models: map[string]*Model{}},
		last: map[string]string{}}
	for _, d := range parseOne(t, src).Defs {
		switch d := d.(type) {
		case *syntax.Action:
			p, err := Compile(d, testOptions())
			if err != nil {
				t.Fatalf("compile %s: %v", d.Name, err)
			}
			w.reg.programs[d.Name] = p
			w.actions = append(w.actions, p)
		case *syntax.Model:
			m, err := CompileModel(d, w.reg, testOptions())
			if err != nil {
				t.Fatalf("compile model %s: %v", d.Name, err)
			}
			w.reg.models[d.Name] = m
			w.models = append(w.models, m)
		}
	}
	return w
}

func (w *world) host() *Host {
	return &Host{Effects: w.rec, Topics: w.rec, Env: w.rec, Callables: w.reg, Models: w.reg}
}

// publish delivers a client message and everything it triggers.
func (w *world) publish(topic, payload string) {
	w.t.Helper()
	w.rec.values[topic] = []byte(payload)
	w.route(topic, payload, 0)
}

// start runs the ON START actions, then the timers once each.
func (w *world) tick(kind syntax.TriggerKind) {
	w.t.Helper()
	for _, p := range w.actions {
		if tr := p.Action().Trigger; tr != nil && tr.Kind == kind {
			w.runAndRoute(p, nil, 0)
		}
	}
}

func (w *world) route(topic, payload string, hops int) {
	w.t.Helper()
	if hops > 8 {
		w.t.Fatalf("publish loop through %s", topic)
	}
	for _, p := range w.actions {
		tr := p.Action().Trigger
		if tr == nil || (tr.Kind != syntax.TriggerTopic && tr.Kind != syntax.TriggerChange) {
			continue
		}
		filter := tr.Topic.(*syntax.StringLit).Value
		if _, ok := newPattern(filter).match(topic); !ok {
			continue
		}
		if tr.Kind == syntax.TriggerChange {
			key := p.Name() + "\x00" + topic
			if old, seen := w.last[key]; seen && old == payload {
				continue
			}
			w.last[key] = payload
		}
		w.runAndRoute(p, &Event{Topic: topic, Payload: []byte(payload)}, hops)
	}
	for _, m := range w.models {
		w.model(m, topic, payload, hops)
	}
}

func (w *world) model(m *Model, topic, payload string, hops int) {
	w.t.Helper()
	if m.Explodes() {
		if _, ok := newPattern(m.Topic()).match(topic); ok {
			err := m.Explode(topic, []byte(payload), func(t string, p []byte) error {
				return w.rec.Publish(t, p, false, 0)
			})
			if err != nil {
				w.t.Fatalf("explode %s: %v", topic, err)
			}
		}
	}
	inst, ok := m.Instance(topic)
	if !ok {
		return
	}
	out, err := m.Evaluate(w.host(), inst)
	if err != nil {
		w.t.Fatalf("model %s: %v", m.Name(), err)
	}
	w.rec.values[inst.Topic] = out
	w.rec.out = append(w.rec.out, published{Topic: inst.Topic, Payload: string(out), Retain: m.Retain(), QoS: m.QoS()})
	w.route(inst.Topic, string(out), hops+1)
}

func (w *world) runAndRoute(p *Program, ev *Event, hops int) {
	w.t.Helper()
	before := len(w.rec.out)
	if err := p.Run(w.host(), ev); err != nil {
		w.t.Fatalf("run %s: %v", p.Name(), err)
	}
	for _, o := range append([]published(nil), w.rec.out[before:]...) {
		if !o.Keep {
			w.route(o.Topic, o.Payload, hops+1)
		}
	}
}

// since returns what was delivered after the first n records.
func (w *world) since(n int) []string {
	var out []string
	for _, p := range w.rec.out[n:] {
		if !p.Keep {
			out = append(out, p.Topic+"="+p.Payload)
		}
	}
	return out
}

func sameList(got, want []string) error {
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fmt.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	return nil
}

// actionOf parses src and returns its first action.
func actionOf(t testing.TB, src string) *syntax.Action {
	t.Helper()
	for _, d := range parseOne(t, src).Defs {
		if a, ok := d.(*syntax.Action); ok {
			return a
		}
	}
	t.Fatalf("no action in\n%s", src)
	return nil
}
