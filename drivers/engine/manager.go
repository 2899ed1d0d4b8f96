package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/drivers"
	"gantry/lot/syntax"
)

// Topics of a connector's runtime state.
const (
	sysPrefix    = "$SYS/Coreflux/Connectors/"
	routesPrefix = "$SYS/Coreflux/Routes/"
)

// StatusTopic is where a connector's status is published, retained.
func StatusTopic(name string) string { return sysPrefix + name + "/status" }

// WriteTopic is where the result of a write to a tag is published, retained.
func WriteTopic(connector, tag string) string { return sysPrefix + connector + "/Writes/" + tag }

// ClientPrefix starts the identifiers of the connectors' in-process clients.
const ClientPrefix = "$connector/"

// Options configure a Manager.
type Options struct {
	Broker *broker.Server
	Logger *slog.Logger
	// WaitForOwner: a deployed connector runs only after Run (the
	// cluster's owner map says where). Off, every deployed connector runs
	// (one node).
	WaitForOwner bool
	// StatusInterval refreshes each status topic (30 s).
	StatusInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before a redial (200 ms, 30 s).
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds opening a device (10 s; the protocol's own
	// CONNECTION_TIMEOUT applies within it) and PollTimeout one read or
	// write of a batch (30 s).
	DialTimeout, PollTimeout time.Duration
	// WarnEvery rate-limits a connector's repeating warnings (1 min).
	WarnEvery time.Duration
	// PKIDir holds the server connectors' certificates: an OPCUA_SERVER
	// presents the one in PKIDir/own/private, and makes and keeps one
	// there when it finds none ("": a new certificate on every start).
	PKIDir string
}

// DefaultOptions returns the defaults (Broker still to set).
func DefaultOptions() Options {
	return Options{StatusInterval: 30 * time.Second, MinBackoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second,
		DialTimeout: 10 * time.Second, PollTimeout: 30 * time.Second, WarnEvery: time.Minute}
}

// Validate reports the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Broker == nil:
		return errors.New("engine: Options.Broker is required")
	case o.StatusInterval <= 0 || o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff || o.DialTimeout <= 0 || o.PollTimeout <= 0:
		return fmt.Errorf("engine: intervals must be positive and MaxBackoff >= MinBackoff: %+v", o)
	}
	return nil
}

// Manager runs the deployed connectors of a node. Deploy (from the LoT
// engine) says which exist; Run and Stop (the owner seam) say which run
// here.
type Manager struct {
	o   Options
	log *slog.Logger
	sys *broker.Client // $SYS status and write results

	mu         sync.Mutex // guards connectors, wanted, closed; never held while a connector stops
	connectors map[string]*connector
	wanted     map[string]bool // Run was called (WaitForOwner)
	closed     bool
	opMu       sync.Mutex // serialises Deploy, Run, Stop, Close: starts and stops in call order
}

// New builds a manager.
func New(o Options) (*Manager, error) {
	d := DefaultOptions()
	if o.StatusInterval == 0 {
		o.StatusInterval = d.StatusInterval
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = d.MinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = max(d.MaxBackoff, o.MinBackoff)
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = d.DialTimeout
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = d.PollTimeout
	}
	if o.WarnEvery == 0 {
		o.WarnEvery = d.WarnEvery
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Manager{o: o, log: log.With("component", "drivers"), connectors: map[string]*connector{}, wanted: map[string]bool{}}
	m.sys = o.Broker.NewClient(ClientPrefix+"$sys", broker.OriginBroker, nil)
	return m, nil
}

// Check builds a connector's definition as Deploy would and reports every
// problem of its settings, each at its line and column: the LoT engine
// refuses such a deploy.
func (m *Manager) Check(c *syntax.Connector, env drivers.Env) error {
	_, err := build(c, env)
	return err
}

// Definition is one deployed connector: its name, source and parse.
type Definition struct {
	Name   string
	Source string
	Def    *syntax.Connector
}

// Deploy makes the running connectors match list: new ones start (unless
// they wait for their owner), changed ones restart, removed ones stop and
// their status is cleared. It returns once every stop is done (each
// within about a second); starting does not wait for a device.
func (m *Manager) Deploy(list []Definition, env drivers.Env) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	old := m.connectors
	next := make(map[string]*connector, len(list))
	var starts, stops []*connector
	for _, d := range list {
		if c := old[d.Name]; c != nil && c.source == d.Source {
			next[d.Name] = c
			continue
		}
		c := m.newConnector(d, env)
		next[d.Name] = c
		if !m.o.WaitForOwner || m.wanted[d.Name] || serverTypes[d.Def.Type] {
			starts = append(starts, c)
		}
	}
	for name, c := range old {
		if next[name] != c {
			stops = append(stops, c)
		}
	}
	m.connectors = next
	m.mu.Unlock()
	servers := false
	for _, c := range stops {
		c.close()
		if next[c.spec.Name] == nil {
			m.publishSys(StatusTopic(c.spec.Name), nil)
			m.publishSys(routesPrefix+c.spec.Name+"/status", nil)
		}
		servers = servers || serverTypes[c.spec.Type]
	}
	if servers {
		m.publishListeners()
	}
	for _, c := range starts {
		c.open()
		c.start()
	}
	for _, c := range next {
		if !c.running() && !slices.Contains(starts, c) {
			c.publishStatus()
		}
	}
}

// Run starts the connector name on this node (the owner says run). It is
// idempotent, returns at once, and is remembered for a connector deployed
// later.
func (m *Manager) Run(name string) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	m.wanted[name] = true
	c := m.connectors[name]
	m.mu.Unlock()
	if c == nil {
		return fmt.Errorf("engine: no connector %q is deployed", name)
	}
	c.open()
	c.start()
	return nil
}

// Stop stops the connector name on this node (the owner says stop): when
// it returns, the device connection is closed. Idempotent; about a second
// at most.
func (m *Manager) Stop(name string) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	delete(m.wanted, name)
	c := m.connectors[name]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	if !m.o.WaitForOwner {
		c.stop()
		return nil
	}
	// Its broker client goes too: a write to a DESTINATION_TOPIC published
	// here then reaches the owner (the cluster forwards it), and this
	// node neither answers it nor holds it for later.
	c.close()
	c.setState(Standby, "")
	return nil
}

// Info describes a deployed connector for placement.
type Info struct {
	Name        string
	Type        string
	ClusterNode string // CONNECTOR_CONFIG CLUSTER_NODE
	Running     bool
	// Server: a server connector, which runs on every node without Run;
	// the others are exclusive connections that run where Run says.
	Server bool
}

// Connectors lists the deployed connectors, by name.
func (m *Manager) Connectors() []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Info, 0, len(m.connectors))
	for _, c := range m.connectors {
		out = append(out, Info{Name: c.spec.Name, Type: c.spec.Type, ClusterNode: c.spec.ClusterNode, Running: c.running(),
			Server: serverTypes[c.spec.Type]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Snapshots returns every connector's status, by name (for /metrics).
func (m *Manager) Snapshots() []Snapshot {
	m.mu.Lock()
	list := make([]*connector, 0, len(m.connectors))
	for _, c := range m.connectors {
		list = append(list, c)
	}
	m.mu.Unlock()
	out := make([]Snapshot, len(list))
	for i, c := range list {
		out[i] = c.snapshot()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close stops every connector; the manager then deploys nothing.
func (m *Manager) Close() {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	m.closed = true
	list := m.connectors
	m.connectors = map[string]*connector{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close()
		}()
	}
	wg.Wait()
	m.sys.Close()
}

// newConnector builds a connector from its definition; one that does not
// build is kept, in state Invalid, so that its status says why.
func (m *Manager) newConnector(d Definition, env drivers.Env) *connector {
	b, err := build(d.Def, env)
	if err == nil {
		b.usePKIDir(m.o.PKIDir)
	}
	c := &connector{m: m, source: d.Source, writes: make(chan writeReq, writeQueue),
		log: m.log.With("connector", d.Name)}
	if err != nil {
		c.spec = &drivers.Spec{Name: d.Name, Type: d.Def.Type}
		c.st.state, c.st.since = Invalid, time.Now()
		c.st.lastError, c.st.lastErrAt = err.Error(), time.Now()
		m.log.Error("connector does not build; it does not run", "connector", d.Name, "err", err)
		return c
	}
	c.spec, c.describe, c.run = b.spec, b.describe, b.run
	c.st.state, c.st.since = Disconnected, time.Now()
	if m.o.WaitForOwner && !serverTypes[d.Def.Type] {
		c.st.state = Standby // until Run
	}
	c.clientID = ClientPrefix + d.Name
	return c
}

// open registers the connector's broker client (writes in, values out).
func (c *connector) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pub != nil || c.run == nil {
		return
	}
	c.pub = c.m.o.Broker.NewClient(c.clientID, broker.OriginConnector, c.onMessage)
	for _, f := range c.subscriptions() {
		if err := c.pub.Subscribe(f, 0); err != nil {
			c.log.Error("connector cannot subscribe", "filter", f, "err", err)
		}
	}
}

// close stops the goroutine and removes the broker client.
func (c *connector) close() {
	c.stop()
	c.mu.Lock()
	pub := c.pub
	c.pub = nil
	c.mu.Unlock()
	if pub != nil {
		pub.Close()
	}
}

// subscriptions are the filters the connector's client takes: each
// writable tag's DESTINATION_TOPIC, and what the runner asks for.
func (c *connector) subscriptions() []string {
	var out []string
	for _, t := range c.spec.Tags() {
		if t.Writable && t.WriteTopic != "" && !slices.Contains(out, t.WriteTopic) {
			out = append(out, t.WriteTopic)
		}
	}
	if s, ok := c.run.(interface{ subscriptions() []string }); ok {
		out = append(out, s.subscriptions()...)
	}
	return out
}

// onMessage hands a message to the runner when it takes messages (the
// bridge), else treats it as a write.
func (c *connector) onMessage(msg *broker.Message) {
	if h, ok := c.run.(interface {
		onMessage(c *connector, m *broker.Message)
	}); ok {
		h.onMessage(c, msg)
		return
	}
	c.onWrite(msg)
}

func (m *Manager) publishSys(tp string, payload []byte) {
	if err := m.sys.Publish(tp, payload, 0, true); err != nil && !errors.Is(err, broker.ErrClientClosed) {
		m.log.Warn("cannot publish a connector topic", "topic", tp, "err", err)
	}
}

func (m *Manager) publishJSON(tp string, v any) {
	b, _ := json.Marshal(v)
	m.publishSys(tp, b)
}

// matches reports whether name matches filter.
func matches(filter, name string) bool {
	if filter == name {
		return true
	}
	if !strings.ContainsAny(filter, "+#") {
		return false
	}
	return topic.Matches(filter, name)
}
