package runtime

// The test harness: a real broker on 127.0.0.1:0 with the engine wired the
// way appliance/wire_lot.go wires it (authenticator gate, authorizer,
// observer), a definitions store in t.TempDir(), a manual clock for the
// timers, and real MQTT 5 clients (paho.golang) that deploy through
// $SYS/Coreflux/Command and watch what subscribers receive.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/rules"
	"gantry/lot/schedule/clocktest"

	"github.com/eclipse/paho.golang/paho"
)

const waitTimeout = 5 * time.Second // generous bound for something that must happen

// eventually polls cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// ---- users ----

// testUser is a user of the fake user store.
type testUser struct {
	password string
	rule     rules.User
}

// testUsers is both the engine's Users and the broker's credential check
// (the appliance's broker/auth store plays both parts). Every password is
// "pw-" + the user name, but mallory's, which the harness never sends.
type testUsers map[string]testUser

func newTestUsers() testUsers {
	u := testUsers{}
	add := func(name string, admin bool, flags ...string) {
		u[name] = testUser{password: "pw-" + name, rule: rules.User{Name: name, Admin: admin, Flags: flags}}
	}
	add("root", true)
	add("bob", false)
	add("alice", false)
	add("emanuel", false)
	add("guest", false)
	add("ops", false, rules.FlagSystemConfiguration)
	u["mallory"] = testUser{password: "not what the harness sends"}
	return u
}

func (u testUsers) RuleUser(name string) (rules.User, bool) {
	tu, ok := u[name]
	return tu.rule, ok
}

func (u testUsers) Authenticate(info *broker.ConnInfo) error {
	tu, ok := u[info.Username]
	if !ok || string(info.Password) != tu.password {
		return packet.BadUserNameOrPassword
	}
	return nil
}

// ---- logs ----

// logCounter is a slog.Handler that counts records by message.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[r.Message]++
	return nil
}

func (l *logCounter) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// ---- harness ----

// harness is one node: broker, definitions store and engine. restart
// stops them and starts new ones on the same directories.
type harness struct {
	t       *testing.T
	dir     string // the definitions store
	envFile string
	clock   *clocktest.Clock
	users   testUsers
	// engineOpts adjusts the engine's options (nil: none); listener is
	// the MQTT listener's configuration. Set them through newHarness's
	// options.
	engineOpts func(*Options)
	listener   broker.ListenerConfig

	srv     *broker.Server
	addr    string
	served  chan error
	store   *defs.Local
	eng     *Engine
	clients []*client
	root    *client // the administrator, subscribed to '#' and to the command output

	seq atomic.Int64 // request ids, barriers

	projects string // Options.ProjectsDir
}

// project makes a new empty project folder and returns its path and the
// name -loadProject takes.
func (h *harness) project() (dir, name string) {
	name = fmt.Sprintf("p%d", h.seq.Add(1))
	dir = filepath.Join(h.projects, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	return dir, name
}

// newHarness starts a node on fresh directories; opts adjust it before it
// starts; t.Cleanup stops it.
func newHarness(t *testing.T, opts ...func(*harness)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: filepath.Join(dir, "lot"), envFile: filepath.Join(dir, "lot-env.json"),
		projects: filepath.Join(dir, "projects"),
		clock:    clocktest.New(time.Date(2025, 3, 17, 8, 0, 0, 0, time.Local)), users: newTestUsers(),
		listener: broker.ListenerConfig{Name: "tcp"}}
	for _, o := range opts {
		o(h)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// start opens the store, builds and starts the engine, serves the broker
// and connects root.
func (h *harness) start() {
	t := h.t
	t.Helper()
	store, err := defs.OpenLocal(h.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := broker.New(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Broker: srv, Store: store, Users: h.users, EnvFile: h.envFile, SeedRules: true, Clock: h.clock,
		ProjectsDir: h.projects,
		Watch:       []string{"zz/barrier/#"}}
	if h.engineOpts != nil {
		h.engineOpts(&o)
	}
	eng, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// As appliance/wire_lot.go: the engine gates CONNECT after the
	// credential check, decides publish and subscribe, observes clients.
	srv.SetAuthenticator(h.users)
	srv.SetAuthorizer(eng.Authorizer())
	srv.AddObserver(eng)
	if err := eng.Start(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.srv, h.store, h.eng, h.addr, h.served = srv, store, eng, l.Addr().String(), make(chan error, 1)
	go func() { h.served <- srv.Serve(l, h.listener) }()
	h.root = h.connect("root", "root-console")
	h.root.subscribe(t, "#", command.OutputTopic)
	h.root.pong = true
}

// stop disconnects the clients, stops the engine and shuts the broker down.
func (h *harness) stop() {
	if h.srv == nil {
		return
	}
	for _, c := range h.clients {
		c.close()
	}
	h.clients, h.root = nil, nil
	h.eng.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.t.Errorf("Shutdown: %v", err)
	}
	if err := <-h.served; !errors.Is(err, broker.ErrServerClosed) {
		h.t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
	h.srv = nil
}

// restart stops the node and starts it again on the same directories, as
// a reboot of the gateway would (retained messages, in memory, are lost).
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

// ---- MQTT clients ----

// client is a connected paho.golang MQTT 5 client that records every
// message it receives.
type client struct {
	*paho.Client
	nc   net.Conn
	user string
	pong bool // subscribed to the pings of settle

	mu   sync.Mutex // guards msgs, read
	msgs []*paho.Publish
	read map[string]int // topic → messages of that topic already returned by await
}

// connect connects user (password "pw-"+user; "" connects anonymously)
// with clientID, failing the test if refused.
func (h *harness) connect(user, clientID string) *client {
	h.t.Helper()
	c, ca, err := h.tryConnect(user, clientID)
	if err != nil {
		code := -1
		if ca != nil {
			code = int(ca.ReasonCode)
		}
		h.t.Fatalf("connect %s as %q: %v (CONNACK 0x%02x)", clientID, user, err, code)
	}
	return c
}

// tryConnect connects and returns the CONNACK; err is set when the broker
// refused (the CONNACK then says why).
func (h *harness) tryConnect(user, clientID string) (*client, *paho.Connack, error) {
	h.t.Helper()
	nc, err := net.DialTimeout("tcp", h.addr, waitTimeout)
	if err != nil {
		h.t.Fatal(err)
	}
	c := &client{nc: nc, user: user, read: map[string]int{}}
	c.Client = paho.NewClient(paho.ClientConfig{
		Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				c.mu.Lock()
				c.msgs = append(c.msgs, pr.Packet)
				c.mu.Unlock()
				return true, nil
			},
		},
	})
	cp := &paho.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 30}
	if user != "" {
		cp.Username, cp.UsernameFlag = user, true
		cp.Password, cp.PasswordFlag = []byte("pw-"+user), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		nc.Close()
		return nil, ca, err
	}
	h.clients = append(h.clients, c)
	return c, ca, nil
}

// close disconnects normally and waits for the client's goroutines.
func (c *client) close() {
	c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	select {
	case <-c.Done():
	case <-time.After(waitTimeout):
	}
	c.nc.Close()
}

// subscribe subscribes to filters (QoS 0) and returns the SUBACK reason
// codes; a refused filter is not a test failure.
func (c *client) subscribe(t testing.TB, filters ...string) []byte {
	t.Helper()
	s := &paho.Subscribe{}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, paho.SubscribeOptions{Topic: f, QoS: 0})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sa, err := c.Subscribe(ctx, s)
	if sa == nil {
		t.Fatalf("subscribe %v: %v", filters, err)
	}
	return sa.Reasons
}

// publish publishes at QoS 0, or at QoS 1 and returns the PUBACK reason code.
func (c *client) publish(t testing.TB, topic, payload string, qos byte) byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: qos})
	if r != nil {
		return r.ReasonCode
	}
	if err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
	return 0
}

// count returns how many messages the client has received.
func (c *client) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// since returns the messages received after the first n.
func (c *client) since(n int) []*paho.Publish {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*paho.Publish(nil), c.msgs[n:]...)
}

// on returns the payloads received on topic, in order.
func (c *client) on(topic string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msgs {
		if m.Topic == topic {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

// await returns the next payload on topic that await has not returned yet,
// waiting for it.
func (c *client) await(t testing.TB, topic string) string {
	t.Helper()
	var got string
	eventually(t, waitTimeout, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		seen := 0
		for _, m := range c.msgs {
			if m.Topic != topic {
				continue
			}
			if seen == c.read[topic] {
				c.read[topic]++
				got = string(m.Payload)
				return nil
			}
			seen++
		}
		return fmt.Errorf("%s: nothing new on %s", c.user, topic)
	})
	return got
}

// ---- commands ----

// reply is the JSON envelope on $SYS/Coreflux/Command/Output.
type reply struct {
	Success    bool            `json:"success"`
	Command    string          `json:"command"`
	RequestID  string          `json:"requestId"`
	Message    string          `json:"message"`
	EntityType string          `json:"entityType"`
	EntityName string          `json:"entityName"`
	Data       json.RawMessage `json:"data"`
	Errors     []struct {
		Message     string   `json:"message"`
		Line        int      `json:"line"`
		Column      int      `json:"column"`
		SourceLines []string `json:"sourceLines"`
		Suggestions []string `json:"suggestions"`
	} `json:"errors"`
}

// command sends a command as root and returns its reply.
func (h *harness) command(line string) reply {
	h.t.Helper()
	return h.commandAs(h.root, line)
}

// mustCommand sends a command as root and fails the test unless it succeeds.
func (h *harness) mustCommand(line string) reply {
	h.t.Helper()
	r := h.command(line)
	if !r.Success {
		h.t.Fatalf("%s: %s %+v", firstLine(line), r.Message, r.Errors)
	}
	return r
}

// commandAs publishes a command as c (which must read the output) and
// waits for the reply with its request id.
func (h *harness) commandAs(c *client, line string) reply {
	h.t.Helper()
	id := fmt.Sprintf("req-%d", h.seq.Add(1))
	c.publish(h.t, command.CommandTopic, line+"\n-requestId "+id, 0)
	var r reply
	eventually(h.t, waitTimeout, func() error {
		for _, p := range c.on(command.OutputTopic) {
			var got reply
			if json.Unmarshal([]byte(p), &got) == nil && got.RequestID == id {
				r = got
				return nil
			}
		}
		return fmt.Errorf("no reply to %q", firstLine(line))
	})
	return r
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ---- waiting for LoT ----

// settle waits until LoT has handled everything published so far, chains
// included, and until c has received everything routed to it: a barrier
// message is seen by the trigger goroutine only after every message
// before it, and a ping c sends itself arrives after everything routed to
// c before it. Rounds repeat until a round publishes nothing new.
func (h *harness) settle(c *client) {
	h.t.Helper()
	if !c.pong {
		c.subscribe(h.t, "zz/ping/#")
		c.pong = true
	}
	for round := 0; round < 32; round++ {
		before := h.eng.stats.Published.Load()
		n := h.seq.Add(1)
		barrier := fmt.Sprintf("zz/barrier/%d", n)
		c.publish(h.t, barrier, "b", 0)
		eventually(h.t, waitTimeout, func() error {
			if _, ok := h.eng.cache.Lookup(barrier); !ok {
				return fmt.Errorf("LoT has not seen %s", barrier)
			}
			return nil
		})
		ping := fmt.Sprintf("zz/ping/%d", n)
		c.publish(h.t, ping, "p", 0)
		c.await(h.t, ping)
		if h.eng.stats.Published.Load() == before {
			return
		}
	}
	h.t.Fatal("LoT keeps publishing: not settled after 32 rounds")
}

// retained returns the broker's retained payload of topic.
func (h *harness) retained(topic string) (string, bool) {
	m, ok := h.srv.Retained(topic)
	if !ok {
		return "", false
	}
	return string(m.Payload), true
}
