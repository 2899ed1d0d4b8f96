package broker_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// inproc starts an in-process client whose messages go to the returned
// channel.
func inproc(t *testing.T, s *testServer, id string, origin broker.Origin) (*broker.Client, chan *broker.Message) {
	t.Helper()
	ch := make(chan *broker.Message, 100)
	c := s.NewClient(id, origin, func(m *broker.Message) { ch <- m })
	t.Cleanup(c.Close)
	return c, ch
}

// The in-process client receives a network client's messages and the
// retained ones on Subscribe; its Publish reaches network subscribers.
func TestInprocClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	net5 := connectV5(t, s.addr, &paho.Connect{ClientID: "ip-net", CleanStart: true, KeepAlive: 30})
	net5.pub(t, &paho.Publish{Topic: "ip/retained", QoS: 1, Retain: true, Payload: []byte("r")})

	c, msgs := inproc(t, s, "ip-go", broker.OriginConnector)
	if err := c.Subscribe("ip/#", 1); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, msgs, "retained message"); m.Topic != "ip/retained" || !m.Retain || string(m.Payload) != "r" {
		t.Fatalf("retained %+v", m)
	}
	net5.pub(t, &paho.Publish{Topic: "ip/live", QoS: 1, Payload: []byte("l")})
	m := recv(t, msgs, "live message")
	if m.Topic != "ip/live" || m.Retain || m.Origin != broker.OriginClient || m.ClientID != "ip-net" {
		t.Fatalf("live %+v", m)
	}

	net5.sub(t, "go/#", 2)
	for qos := byte(0); qos <= 2; qos++ {
		if err := c.Publish("go/out", []byte{qos}, qos, false); err != nil {
			t.Fatal(err)
		}
		m := recv(t, net5.msgs, "in-process publish")
		if m.Topic != "go/out" || m.QoS != qos || m.Payload[0] != qos {
			t.Fatalf("network subscriber got %s QoS %d", m.Topic, m.QoS)
		}
	}
	if err := c.Publish("go/+", nil, 0, false); err == nil {
		t.Fatal("Publish to a wildcard topic accepted")
	}
	if err := c.Unsubscribe("ip/#"); err != nil {
		t.Fatal(err)
	}
	net5.pub(t, &paho.Publish{Topic: "ip/live", QoS: 1, Payload: []byte("after")})
	noRecv(t, msgs, "message after Unsubscribe")
	c.Close()
	if err := c.Publish("go/out", nil, 0, false); err == nil {
		t.Fatal("Publish after Close accepted")
	}
}

// originHook records the origin of every message it sees.
type originHook struct {
	mu      sync.Mutex
	origins map[string]broker.Origin
	calls   atomic.Int64
}

func (h *originHook) InterceptPublish(m *broker.Message, _ broker.Resolver) error {
	h.calls.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.origins[m.Topic] = m.Origin
	return nil
}

// Messages of an in-process client carry its Origin to hooks and to
// subscribers; Server.Deliver (a peer's message) reaches subscribers
// without passing the hooks.
func TestOriginAndDeliver(t *testing.T) {
	t.Parallel()
	hook := &originHook{origins: map[string]broker.Origin{}}
	s := startServer(t, broker.Options{}, func(s *broker.Server) { s.AddPublishHook(hook) })
	watcher, seen := inproc(t, s, "or-watch", broker.OriginBroker)
	if err := watcher.Subscribe("or/#", 1); err != nil {
		t.Fatal(err)
	}
	w := watch(t, s, "or-net", "or/#")
	for _, tc := range []struct {
		origin broker.Origin
		id     string
	}{{broker.OriginLoT, "or-lot"}, {broker.OriginConnector, "or-conn"}} {
		c, _ := inproc(t, s, tc.id, tc.origin)
		tp := "or/" + tc.origin.String()
		if err := c.Publish(tp, []byte("x"), 1, false); err != nil {
			t.Fatal(err)
		}
		if m := recv(t, w.msgs, tp); m.Topic != tp {
			t.Fatalf("network subscriber got %s", m.Topic)
		}
		if m := recv(t, seen, tp); m.Origin != tc.origin || m.ClientID != tc.id {
			t.Fatalf("in-process subscriber got origin %v from %q, want %v from %q", m.Origin, m.ClientID, tc.origin, tc.id)
		}
		hook.mu.Lock()
		got, ok := hook.origins[tp]
		hook.mu.Unlock()
		if !ok || got != tc.origin {
			t.Fatalf("hook saw origin %v (seen %v), want %v", got, ok, tc.origin)
		}
	}
	calls := hook.calls.Load()
	peer := &broker.Message{Topic: "or/peer", Payload: []byte("p"), QoS: 1, Origin: broker.OriginPeer, ClientID: "node-2"}
	s.Deliver(peer)
	if m := recv(t, w.msgs, "peer message"); m.Topic != "or/peer" || string(m.Payload) != "p" || m.QoS != 1 {
		t.Fatalf("peer message %s %q QoS %d", m.Topic, m.Payload, m.QoS)
	}
	if m := recv(t, seen, "peer message"); m.Origin != broker.OriginPeer {
		t.Fatalf("peer message origin %v", m.Origin)
	}
	if got := hook.calls.Load(); got != calls {
		t.Fatalf("Deliver ran the publish hooks (%d calls)", got-calls)
	}
}

// events records observer events.
type events struct {
	mu  sync.Mutex
	all []broker.Event
}

func (e *events) Observe(ev broker.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(client string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		if ev.ClientID != client {
			continue
		}
		s := ev.Kind.String()
		if ev.Filter != "" {
			s += " " + ev.Filter
		}
		if ev.Kind == broker.EventDisconnect {
			s += fmt.Sprintf(" abnormal=%v", ev.Reason != nil)
		}
		out = append(out, s)
	}
	return out
}

// The Observer sees connect, subscribe, unsubscribe and disconnect, with
// a Reason for an abnormal disconnect only.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	ev := &events{}
	s := startServer(t, broker.Options{}, func(s *broker.Server) { s.AddObserver(ev) })
	c := connectV5(t, s.addr, &paho.Connect{ClientID: "ev", CleanStart: true, KeepAlive: 30})
	c.subWith(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "ev/a", QoS: 1}, {Topic: "ev/b", QoS: 0}}})
	if _, err := c.Unsubscribe(t.Context(), &paho.Unsubscribe{Topics: []string{"ev/a"}}); err != nil {
		t.Fatal(err)
	}
	c.close()
	want := []string{"connect", "subscribe ev/a", "subscribe ev/b", "unsubscribe ev/a", "disconnect abnormal=false"}
	eventually(t, waitTimeout, func() error {
		if got := ev.of("ev"); !slices.Equal(got, want) {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
	raw, _ := connectRaw(t, s.addr, v5Connect("ev-raw"))
	raw.nc.Close()
	want = []string{"connect", "disconnect abnormal=true"}
	eventually(t, waitTimeout, func() error {
		if got := ev.of("ev-raw"); !slices.Equal(got, want) {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.all {
		if e.Kind == broker.EventConnect && e.Remote == "" {
			t.Errorf("connect event without remote address: %+v", e)
		}
	}
}

// TestInprocClientIDIsReserved: a network client cannot take over the
// identifier of an in-process client (LoT, a connector).
func TestInprocClientIDIsReserved(t *testing.T) {
	srv := startServer(t, broker.Options{})
	got := make(chan *broker.Message, 1)
	ic := srv.NewClient("lot-engine", broker.OriginLoT, func(m *broker.Message) { got <- m })
	defer ic.Close()
	if err := ic.Subscribe("lot/#", 0); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, srv.addr, packet.V5)
	if ack := c.connect(v5Connect("lot-engine")); ack.ReasonCode != packet.ClientIdentifierNotValid {
		t.Fatalf("CONNECT with an in-process client's id: %v, want 0x85", ack.ReasonCode)
	}
	srv.Deliver(&broker.Message{Topic: "lot/x", Payload: []byte("still mine")})
	if m := recv(t, got, "message for the in-process client"); string(m.Payload) != "still mine" {
		t.Fatalf("got %q", m.Payload)
	}
}
