package engine

import (
	"context"
	"sync"
	"time"

	"gantry/broker"
	"gantry/drivers/bridge"
)

// bridgeRunner runs an MQTT_BRIDGE: the bridge keeps its own connection
// to the remote broker (paho redials with backoff); the connector's
// broker client is its local side.
type bridgeRunner struct {
	cfg *bridge.Config

	mu sync.Mutex // guards b
	b  *bridge.Bridge
}

func (r *bridgeRunner) subscriptions() []string {
	var out []string
	for _, rt := range r.cfg.Routes {
		if rt.Direction != bridge.In {
			out = append(out, rt.Local.String())
		}
	}
	return out
}

func (r *bridgeRunner) run(ctx context.Context, c *connector) {
	b := bridge.New(r.cfg, localSide{c}, bridgeReport{c}, c.m.o.MinBackoff, c.m.o.MaxBackoff)
	r.mu.Lock()
	r.b = b
	r.mu.Unlock()
	b.Start()
	status := time.NewTicker(c.m.o.StatusInterval)
	defer status.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-status.C:
			c.publishStatus()
		}
	}
	b.Stop()
	r.mu.Lock()
	r.b = nil
	r.mu.Unlock()
}

// onMessage sends a local message out, unless the bridge published it.
func (r *bridgeRunner) onMessage(c *connector, m *broker.Message) {
	if m.Origin == broker.OriginConnector && m.ClientID == c.clientID {
		return
	}
	r.mu.Lock()
	b := r.b
	r.mu.Unlock()
	if b == nil {
		return
	}
	b.FromLocal(m.Topic, m.Payload, m.QoS, m.Retain)
}

type localSide struct{ c *connector }

func (l localSide) Publish(tp string, payload []byte, qos byte, retain bool) error {
	l.c.mu.Lock()
	pub := l.c.pub
	l.c.mu.Unlock()
	if pub == nil {
		return broker.ErrClientClosed
	}
	return pub.Publish(tp, payload, qos, retain)
}

type bridgeReport struct{ c *connector }

func (r bridgeReport) State(connected bool, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
		r.c.counters.Failures.Add(1)
		r.c.warn("bridge: remote broker connection lost; redialling", "err", err)
	}
	if connected {
		r.c.counters.Connects.Add(1)
		r.c.setState(Connected, "")
		return
	}
	r.c.setState(Reconnecting, msg)
}

func (r bridgeReport) Received() { r.c.counters.Received.Add(1) }
func (r bridgeReport) Sent()     { r.c.counters.Sent.Add(1) }
func (r bridgeReport) Dropped(err error) {
	r.c.counters.WriteErrors.Add(1)
	r.c.warn("bridge: message dropped", "err", err)
}
