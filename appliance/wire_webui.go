package appliance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grandcat/zeroconf"

	"gantry/appliance/config"
	"gantry/broker"
	"gantry/broker/auth"
	"gantry/cluster/discovery"
	"gantry/drivers/engine"
	"gantry/lot/command"
	"gantry/webui"
)

// SetupFile is where the first-boot wizard writes the node's settings, in
// the data directory; a starting node reads it over its configuration
// file (config.LoadNode).
const SetupFile = config.SetupFile

// consoleHandler builds the web console served under /ui/ on the
// operations port.
func (n *Node) consoleHandler() http.Handler {
	c, err := webui.New(webui.Options{
		Users:    n.Users,
		Throttle: n.throttle,
		Commands: &consoleCommands{b: n.Broker, waiting: map[string]chan command.Reply{}},
		Status:   n.clusterStatus,
		Stats:    n.consoleStats,
		Retained: func(topic string) ([]byte, bool) {
			m, ok := n.Broker.Retained(topic)
			if !ok {
				return nil, false
			}
			return m.Payload, true
		},
		Sessions:    n.Broker,
		Connectors:  n.consoleConnectors,
		ClusterJSON: n.clusterJSON,
		Setup:       &consoleSetup{n: n},
		DataDir:     n.cfg.DataDir,
		Done:        n.stop,
		Logger:      n.log,
	})
	if err != nil {
		n.log.Error("web console off", "component", "webui", "err", err)
		return http.NotFoundHandler()
	}
	return c.Handler()
}

// consoleConnectors is the console's connectors page: every deployed
// connector's status with its tags' latest readings on this node.
func (n *Node) consoleConnectors() []webui.ConnectorView {
	if n.drivers == nil {
		return nil
	}
	info := map[string]engine.Info{}
	for _, i := range n.drivers.Connectors() {
		info[i.Name] = i
	}
	var out []webui.ConnectorView
	for _, s := range n.drivers.Snapshots() {
		cv := webui.ConnectorView{Name: s.Name, Type: s.Type, Device: s.Device, Connection: s.Connection, Health: s.Health,
			Since: s.Since, LastError: s.LastError, ClusterNode: info[s.Name].ClusterNode, Running: info[s.Name].Running,
			Polls: s.Polls, Reads: s.Reads, ReadErrors: s.ReadErrors, Published: s.Published, Writes: s.Writes,
			WriteErrors: s.WriteErrors, Connects: s.Connects, Failures: s.Failures}
		if s.LastErrorAt != nil {
			cv.LastErrorAt = *s.LastErrorAt
		}
		tags, _ := n.drivers.TagValues(s.Name)
		for _, t := range tags {
			cv.Tags = append(cv.Tags, webui.TagView{Name: t.Tag, Topic: t.Topic, Type: t.Type, Unit: t.Unit, Writable: t.Writable,
				WriteTopic: t.WriteTopic, Value: t.Value, At: t.At, Error: t.Error})
		}
		out = append(out, cv)
	}
	return out
}

// clusterJSON is the body GET /cluster serves, for the console's health
// page (which lists the fields it has no tile of its own for).
func (n *Node) clusterJSON() []byte {
	var w bufferedResponse
	r, _ := http.NewRequest(http.MethodGet, "/cluster", nil)
	n.serveCluster(&w, r)
	return w.body.Bytes()
}

// bufferedResponse keeps what a handler writes.
type bufferedResponse struct {
	header http.Header
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(int)             {}

func (n *Node) consoleStats() webui.NodeStats {
	st := n.Broker.Stats()
	q, f := n.Broker.QueueCounts()
	return webui.NodeStats{NodeName: n.cfg.Cluster.NodeName, Version: Version, Slot: bootSlot(), Uptime: time.Since(n.started),
		Connections: st.Connections.Load(), Sessions: n.Broker.SessionCount(), Subscriptions: n.Broker.SubscriptionCount(),
		Retained: n.Broker.RetainedCount(), Queued: q, Inflight: f,
		MessagesIn: st.MessagesIn.Load(), MessagesOut: st.MessagesOut.Load(), Dropped: st.Dropped.Load(),
		AuthFailures: st.AuthFailures.Load()}
}

// consoleClientID is the console's in-process client: it publishes
// commands on $SYS/Coreflux/Command as the logged-in user and reads the
// replies, so the console takes the command topic's path and rules.
const consoleClientID = "$console"

// consoleCommands runs LoT commands for the console.
type consoleCommands struct {
	b *broker.Server

	once    sync.Once
	client  *broker.Client
	err     error
	mu      sync.Mutex // guards waiting
	waiting map[string]chan command.Reply
}

func (cc *consoleCommands) start() error {
	cc.once.Do(func() {
		cc.client = cc.b.NewClient(consoleClientID, broker.OriginBroker, cc.onReply)
		cc.err = cc.client.Subscribe(command.OutputTopic, 0)
	})
	return cc.err
}

func (cc *consoleCommands) onReply(m *broker.Message) {
	var r command.Reply
	if json.Unmarshal(m.Payload, &r) != nil || r.RequestID == "" {
		return
	}
	cc.mu.Lock()
	ch := cc.waiting[r.RequestID]
	delete(cc.waiting, r.RequestID)
	cc.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// Command publishes payload as user with a request id of its own and waits
// for the reply (10 s at most).
func (cc *consoleCommands) Command(ctx context.Context, user, payload string) (command.Reply, error) {
	if err := cc.start(); err != nil {
		return command.Reply{}, err
	}
	var b [12]byte
	rand.Read(b[:])
	id := "console-" + hex.EncodeToString(b[:])
	ch := make(chan command.Reply, 1)
	cc.mu.Lock()
	cc.waiting[id] = ch
	cc.mu.Unlock()
	defer func() {
		cc.mu.Lock()
		delete(cc.waiting, id)
		cc.mu.Unlock()
	}()
	m := &broker.Message{Topic: command.CommandTopic, Payload: []byte(payload + "\n-requestId " + id), Username: user}
	if err := cc.client.PublishMessage(m); err != nil {
		return command.Reply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return command.Reply{}, fmt.Errorf("no reply on %s: %w", command.OutputTopic, ctx.Err())
	}
}

// consoleSetup is the first-boot wizard's view of the node.
type consoleSetup struct{ n *Node }

// Pending: the random password root was created with is still on disk
// (an operator who read it and deleted the file has set the node up).
func (s *consoleSetup) Pending() bool {
	_, err := os.Stat(filepath.Join(s.n.cfg.DataDir, auth.InitialRootFile))
	return err == nil
}

// setupJSON is the configuration file the wizard writes.
func setupJSON(c webui.SetupConfig) ([]byte, error) {
	cl := map[string]any{"Enabled": c.ClusterEnabled}
	if c.NodeName != "" { // blank: the configuration's (or the host name)
		cl["NodeName"] = c.NodeName
	}
	if c.ClusterEnabled {
		cl["ClusterId"], cl["SharedSecret"], cl["Discovery"] = c.ClusterID, c.SharedSecret, c.Discovery
		if c.Discovery == config.DiscoverySeeds {
			cl["Seeds"] = c.Seeds
		}
		if c.Discovery == config.DiscoveryKubernetes {
			cl["KubernetesServiceDns"] = c.KubernetesDNS
		}
	}
	return json.MarshalIndent(map[string]any{"Cluster": cl, "Durability": map[string]any{"Enabled": c.Durability}}, "", "  ")
}

// Validate loads the file the wizard would write, as -config would.
func (s *consoleSetup) Validate(c webui.SetupConfig) []string {
	data, err := setupJSON(c)
	if err != nil {
		return []string{err.Error()}
	}
	tmp, err := os.CreateTemp(s.n.cfg.DataDir, "setup-check-*.json")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.Remove(tmp.Name())
	tmp.Write(data)
	tmp.Close()
	cfg, err := config.Load(tmp.Name(), nil)
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		return ce.Problems
	case err != nil:
		return []string{err.Error()}
	}
	if c.ClusterEnabled {
		return cfg.ClusterProblems()
	}
	return nil
}

// Apply replaces root's password, writes DataDir/setup.json, and removes
// the initial password file, which ends setup.
func (s *consoleSetup) Apply(_ context.Context, c webui.SetupConfig) error {
	if c.Password == "" {
		return errors.New("the administrator password is empty")
	}
	data, err := setupJSON(c)
	if err != nil {
		return err
	}
	dir := s.n.cfg.DataDir
	if err := os.WriteFile(filepath.Join(dir, SetupFile), append(data, '\n'), 0o600); err != nil {
		return err
	}
	users := s.n.Users
	if _, ok := users.Lookup("root"); ok {
		err = users.SetPassword("root", c.Password)
	} else {
		err = users.Add("root", c.Password, true)
	}
	if err != nil {
		return fmt.Errorf("root's password: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, auth.InitialRootFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.n.log.Info("first-boot setup done: root's password replaced", "component", "webui", "settings", filepath.Join(dir, SetupFile))
	if why := s.restartNeeded(c); why != "" {
		s.n.requestRestart(why)
	}
	return nil
}

// restartNeeded says why the node must start again for c to take effect
// (setup.json is read at start, over the configuration file): "" when c
// changes nothing the node runs with.
func (s *consoleSetup) restartNeeded(c webui.SetupConfig) string {
	cfg := s.n.cfg
	cl := &cfg.Cluster
	switch {
	case c.Durability != cfg.Durability.Enabled:
		return "the setup wizard changed durability"
	case c.NodeName != "" && c.NodeName != cl.NodeName:
		return "the setup wizard changed the node name"
	case c.ClusterEnabled != cl.Enabled:
		return "the setup wizard turned clustering " + map[bool]string{true: "on", false: "off"}[c.ClusterEnabled]
	case c.ClusterEnabled && (c.ClusterID != cl.ClusterId || c.SharedSecret != cl.SharedSecret ||
		c.Discovery != cl.Discovery || !slices.Equal(c.Seeds, cl.Seeds) || c.KubernetesDNS != cl.KubernetesServiceDns):
		return "the setup wizard changed the cluster's settings"
	}
	return ""
}

// Discover browses the consoles other Gantry nodes register with zeroconf
// (discovery.ConsoleService, TXT path=/ui/).
func (s *consoleSetup) Discover(ctx context.Context) ([]webui.Gateway, error) {
	res, err := zeroconf.NewResolver(zeroconf.SelectIPTraffic(zeroconf.IPv4))
	if err != nil {
		return nil, fmt.Errorf("zeroconf: %w", err)
	}
	entries := make(chan *zeroconf.ServiceEntry, 16)
	if err := res.Browse(ctx, discovery.ConsoleService, "local.", entries); err != nil {
		return nil, fmt.Errorf("zeroconf browse: %w", err)
	}
	var out []webui.Gateway
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return out, nil
		case e, ok := <-entries:
			if !ok {
				return out, nil
			}
			txt := map[string]string{}
			for _, t := range e.Text {
				if k, v, ok := strings.Cut(t, "="); ok {
					txt[k] = v
				}
			}
			if txt["path"] != "/ui/" || txt["node"] == "" || seen[txt["node"]] || txt["node"] == s.n.cfg.Cluster.NodeName {
				continue
			}
			seen[txt["node"]] = true
			addr := e.HostName
			if len(e.AddrIPv4) > 0 {
				addr = e.AddrIPv4[0].String()
			}
			out = append(out, webui.Gateway{NodeName: txt["node"], ClusterID: txt["cluster"],
				Address: net.JoinHostPort(addr, strconv.Itoa(e.Port))})
		}
	}
}
