package engine

import (
	"context"
	"time"

	"gantry/broker"
	"gantry/drivers"
)

// Listening is the state of a server connector that serves.
const Listening = "Listening"

// Failed is the state of a server connector whose bind failed: it is not
// retried (the seed's "Server connectors"); redeploy to try again.
const Failed = "Failed"

// serverTypes run on every node, whatever the owner says.
var serverTypes = map[string]bool{"MODBUS_SERVER": true, "OPCUA_SERVER": true}

// tagServer is a protocol's server of tag values.
type tagServer interface {
	Start() error // bind; a failure is not retried
	Stop()
	Set(t *drivers.Tag, v drivers.Value)
}

// serverRunner serves the current value of each tag's topic (Modbus TCP,
// OPC UA); a client's write of a writable tag is published to the tag's
// DESTINATION_TOPIC.
type serverRunner struct {
	tags []*drivers.Tag
	srv  tagServer  // set before the connector's client subscribes
	c    *connector // set by run before the server starts
}

// clientWrite is called on the server's goroutines.
func (r *serverRunner) clientWrite(t *drivers.Tag, v drivers.Value) { r.write(r.c, t, v) }

func (r *serverRunner) subscriptions() []string {
	var out []string
	for _, t := range r.tags {
		out = append(out, t.Topic)
	}
	return out
}

// onMessage records a tag's current value (retained values included:
// they are the current ones).
func (r *serverRunner) onMessage(c *connector, m *broker.Message) {
	for _, t := range r.tags {
		if t.Topic != m.Topic {
			continue
		}
		v, err := t.ParsePayload(m.Payload)
		if err != nil {
			c.setTagError(t.Name, err.Error())
			continue
		}
		c.setTagError(t.Name, "")
		c.counters.Reads.Add(1)
		c.values.note(t, v)
		r.srv.Set(t, v)
	}
}

func (r *serverRunner) run(ctx context.Context, c *connector) {
	r.c = c
	if err := r.srv.Start(); err != nil {
		c.setState(Failed, err.Error())
		c.log.Error("server connector cannot listen; not retried", "err", err)
		return
	}
	c.setState(Listening, "")
	status := time.NewTicker(c.m.o.StatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			r.srv.Stop()
			return
		case <-status.C:
			c.publishStatus()
		}
	}
}

// write publishes what a Modbus client wrote.
func (r *serverRunner) write(c *connector, t *drivers.Tag, v drivers.Value) {
	c.mu.Lock()
	pub := c.pub
	c.mu.Unlock()
	if pub == nil {
		return
	}
	if err := pub.Publish(t.WriteTopic, t.Payload(v, time.Now().UnixMilli()), 0, false); err != nil {
		c.counters.WriteErrors.Add(1)
		c.warn("server connector: cannot publish a client's write", "tag", t.Name, "err", err)
		return
	}
	c.counters.Writes.Add(1)
}

// Listener is a server connector's listener, for GET /cluster,
// $SYS/Coreflux/Cluster/RouteListeners and /metrics.
type Listener struct {
	Connector string `json:"connector"`
	Type      string `json:"type"`
	Address   string `json:"address"`
	Up        bool   `json:"up"`
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
}

// Listeners lists the server connectors' listeners, by connector name.
func (m *Manager) Listeners() []Listener {
	out := []Listener{}
	for _, s := range m.Snapshots() {
		if !serverTypes[s.Type] {
			continue
		}
		l := Listener{Connector: s.Name, Type: s.Type, Address: s.Device, Up: s.Connection == Listening, State: s.Connection}
		if !l.Up {
			l.Error = s.LastError
		}
		out = append(out, l)
	}
	return out
}

// ListenersTopic lists the server connectors' listeners, retained.
const ListenersTopic = "$SYS/Coreflux/Cluster/RouteListeners"

// publishListeners publishes Listeners on ListenersTopic.
func (m *Manager) publishListeners() { m.publishJSON(ListenersTopic, m.Listeners()) }
