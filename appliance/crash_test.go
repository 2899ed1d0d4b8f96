package appliance_test

// Crash tests of durability on the real binary: kill -9 under load, a
// restart on the same data directory, and checks that nothing
// acknowledged was lost; and a damaged store file refused at start.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
	bolt "go.etcd.io/bbolt"
)

const crashWait = 15 * time.Second // bound for something that must happen

// crashNode is the gantry binary with durability on, on one data
// directory, started and killed by the test.
type crashNode struct {
	t       *testing.T
	bin     string
	ip      string
	dataDir string
	extra   []string // more environment, after (so over) the defaults
	held    bool     // clusterOf leaves it for the test to start

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process was reaped
	err    error         // the process's exit, once exited is closed

	mu  sync.Mutex
	log bytes.Buffer // stderr of every run, for failure messages
}

func (n *crashNode) env() []string {
	return append(append(os.Environ(),
		"COREFLUX_DURABILITY_ENABLED=true",
		"COREFLUX_DATA_DIR="+n.dataDir,
		"COREFLUX_MQTT_BIND_IP="+n.ip,
		"COREFLUX_OPS_SYS_INTERVAL_SECONDS=0",
		"COREFLUX_MQTT_WEBSOCKET_PORT=0", // only the MQTT listener
		"COREFLUX_OPS_PORT=0",
	), n.extra...)
}

// start runs the binary and waits until its MQTT listener is up.
func (n *crashNode) start() {
	t := n.t
	t.Helper()
	cmd := exec.Command(n.bin, "-dev")
	cmd.Env = n.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	listening := make(chan struct{})
	exited := n.exited
	go func() {
		lines := bufio.NewScanner(stderr)
		seen := false
		for lines.Scan() {
			n.mu.Lock()
			n.log.WriteString(lines.Text() + "\n")
			n.mu.Unlock()
			if !seen && strings.Contains(lines.Text(), "msg=listening") {
				seen = true
				close(listening)
			}
		}
		n.err = cmd.Wait() // after the last read of the pipe
		close(exited)
	}()
	select {
	case <-listening:
	case <-exited:
		t.Fatalf("gantry exited before listening: %v\n%s", n.err, n.stderr())
	case <-time.After(crashWait):
		t.Fatalf("gantry not listening after %v\n%s", crashWait, n.stderr())
	}
}

// kill sends SIGKILL (kill -9) and waits until the process is gone.
func (n *crashNode) kill() {
	n.t.Helper()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	select {
	case <-n.exited:
	case <-time.After(crashWait):
		n.t.Fatalf("gantry still running %v after SIGKILL", crashWait)
	}
	n.cmd = nil
}

func (n *crashNode) stderr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

func (n *crashNode) addr() string { return net.JoinHostPort(n.ip, "1883") }

// ---- clients ----

// crashV3 connects a paho.mqtt.golang (MQTT 3.1.1) client; onMsg, when
// set, receives every message in arrival order.
func crashV3(addr, id string, clean bool, onMsg func(topic, payload string)) (mqtt.Client, bool, error) {
	o := mqtt.NewClientOptions().
		AddBroker("tcp://" + addr).
		SetClientID(id).
		SetProtocolVersion(4).
		SetCleanSession(clean).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(5 * time.Second).
		SetKeepAlive(30 * time.Second).
		SetOrderMatters(true)
	if onMsg != nil {
		o.SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { onMsg(m.Topic(), string(m.Payload())) })
	}
	c := mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(crashWait) {
		return nil, false, errors.New("v3 connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, false, err
	}
	return c, tok.(*mqtt.ConnectToken).SessionPresent(), nil
}

// crashV5 connects a paho.golang (MQTT 5) client with session expiry
// expiry; onMsg, when set, receives every message in arrival order.
func crashV5(addr, id string, cleanStart bool, expiry uint32, onMsg func(topic, payload string)) (*paho.Client, bool, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, false, err
	}
	cfg := paho.ClientConfig{Conn: nc}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				onMsg(pr.Packet.Topic, string(pr.Packet.Payload))
				return true, nil
			},
		}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: cleanStart, KeepAlive: 30}
	if expiry > 0 {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		nc.Close()
		return nil, false, err
	}
	return c, ca.SessionPresent, nil
}

func closeV5(c *paho.Client) {
	c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
	}
}

// ---- load: publishers ----

// crashRetained tracks one retained topic: floor is the newest value the
// node must still hold (acknowledged, or seen after a restart), -1 when
// none; pending the values sent and not acknowledged since, any of which
// the node may hold instead (each was in flight at a kill).
type crashRetained struct {
	floor   int
	pending []int
}

// crashPublisher publishes QoS 1 messages alternately to its queue topic
// and to one of its retained topics; payloads are "name-seq" with seq
// counting across runs. Its fields are owned by its goroutine during a
// run and by the test between runs.
type crashPublisher struct {
	name     string
	v5       bool
	seq      int
	acked    []string // payloads acknowledged (PUBACK received), every run
	sent     int
	retained map[string]*crashRetained
}

const crashRetainedPerPublisher = 3

func (p *crashPublisher) topic(seq int) (topic string, retain bool) {
	if seq%2 == 0 {
		return "crash/q/" + p.name, false
	}
	return fmt.Sprintf("crash/r/%s/%d", p.name, (seq/2)%crashRetainedPerPublisher), true
}

// run connects and publishes until a publish fails (the node was killed)
// or stop is closed. An MQTT 5 publisher waits for each PUBACK before the
// next publish; an MQTT 3.1.1 one keeps up to crashWindow publishes in
// flight.
func (p *crashPublisher) run(addr string, stop <-chan struct{}) {
	// send publishes one message; its result reports, in order, whether
	// it was acknowledged, waiting for that unless stop is closed.
	var send func(topic string, retain bool, payload string) (acked func() bool)
	window := 1
	if p.v5 {
		c, _, err := crashV5(addr, "crash-pub-"+p.name, true, 0, nil)
		if err != nil {
			return
		}
		defer closeV5(c)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		send = func(topic string, retain bool, payload string) func() bool {
			_, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Retain: retain, Payload: []byte(payload)})
			return func() bool { return err == nil } // nil only for a PUBACK below 0x80
		}
	} else {
		window = crashWindow
		c, _, err := crashV3(addr, "crash-pub-"+p.name, true, nil)
		if err != nil {
			return
		}
		defer c.Disconnect(0)
		send = func(topic string, retain bool, payload string) func() bool {
			tok := c.Publish(topic, 1, retain, payload)
			return func() bool {
				select {
				case <-tok.Done():
					return tok.Error() == nil
				case <-stop: // killed: only what is acknowledged already counts
					select {
					case <-tok.Done():
						return tok.Error() == nil
					default:
						return false
					}
				}
			}
		}
	}
	type sent struct {
		seq   int
		acked func() bool
	}
	var flight []sent
	// Acknowledgements come in order: the first publish not acknowledged
	// ends the run, and the ones after it stay unacknowledged.
	defer func() {
		for _, f := range flight {
			if !f.acked() {
				return
			}
			p.ack(f.seq)
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if len(flight) == window {
			if !flight[0].acked() {
				return
			}
			p.ack(flight[0].seq)
			flight = flight[1:]
		}
		seq := p.seq
		p.seq++
		topic, retain := p.topic(seq)
		if retain {
			rt := p.retained[topic]
			rt.pending = append(rt.pending, seq)
		}
		p.sent++
		flight = append(flight, sent{seq, send(topic, retain, p.payload(seq))})
	}
}

// crashWindow is how many publishes an MQTT 3.1.1 publisher keeps in
// flight.
const crashWindow = 8

func (p *crashPublisher) payload(seq int) string { return fmt.Sprintf("%s-%d", p.name, seq) }

// ack records that message seq was acknowledged.
func (p *crashPublisher) ack(seq int) {
	p.acked = append(p.acked, p.payload(seq))
	if topic, retain := p.topic(seq); retain {
		rt := p.retained[topic]
		rt.floor = max(rt.floor, seq)
		rt.pending = slices.DeleteFunc(rt.pending, func(v int) bool { return v <= rt.floor })
	}
}

// ---- checks: persistent subscribers ----

// crashSubscriber is a persistent session subscribed to crash/# at QoS 1
// that is offline during the load and reconnects after each restart.
type crashSubscriber struct {
	id string
	v5 bool

	arrived chan struct{} // capacity 1: a message arrived

	mu  sync.Mutex
	got map[string]int // deliveries per payload
}

func newCrashSubscriber(id string, v5 bool) *crashSubscriber {
	return &crashSubscriber{id: id, v5: v5, arrived: make(chan struct{}, 1), got: map[string]int{}}
}

func (s *crashSubscriber) record(_, payload string) {
	s.mu.Lock()
	s.got[payload]++
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
}

// await waits until every payload of acked has been delivered.
func (s *crashSubscriber) await(t *testing.T, round int, acked []string) {
	t.Helper()
	deadline := time.After(crashWait)
	for {
		missing := s.missing(acked)
		if len(missing) == 0 {
			return
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("kill %d: %s lost %d acknowledged messages, e.g. %v", round+1, s.id, len(missing), missing[:min(10, len(missing))])
		}
	}
}

// connect reconnects to the session (fresh: a new one) and returns a
// disconnect function.
func (s *crashSubscriber) connect(t *testing.T, addr string, fresh bool) func() {
	t.Helper()
	var present bool
	var closeFn func()
	if s.v5 {
		c, p, err := crashV5(addr, s.id, fresh, 0xFFFFFFFF, s.record)
		if err != nil {
			t.Fatalf("subscriber %s: %v", s.id, err)
		}
		present, closeFn = p, func() { closeV5(c) }
		if fresh {
			ctx, cancel := context.WithTimeout(context.Background(), crashWait)
			defer cancel()
			if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "crash/#", QoS: 1}}}); err != nil {
				t.Fatalf("subscriber %s: %v", s.id, err)
			}
		}
	} else {
		c, p, err := crashV3(addr, s.id, false, s.record)
		if err != nil {
			t.Fatalf("subscriber %s: %v", s.id, err)
		}
		present, closeFn = p, func() { c.Disconnect(100) }
		if fresh {
			if tok := c.Subscribe("crash/#", 1, nil); !tok.WaitTimeout(crashWait) || tok.Error() != nil {
				t.Fatalf("subscriber %s: subscribe: %v", s.id, tok.Error())
			}
		}
	}
	if !fresh && !present {
		closeFn()
		t.Fatalf("subscriber %s: session not present after the restart", s.id)
	}
	return closeFn
}

// missing returns the acknowledged payloads not delivered yet.
func (s *crashSubscriber) missing(acked []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range acked {
		if s.got[p] == 0 {
			out = append(out, p)
		}
	}
	return out
}

func (s *crashSubscriber) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := 0
	for _, n := range s.got {
		d += n - 1
	}
	return d
}

// retainedNow reads every retained message under crash/r/ with a new
// clean session: the retained messages of a subscription are queued
// before its SUBACK, so they have all arrived once a message published
// after the SUBACK (the marker) arrives.
func retainedNow(t *testing.T, addr string, round int) map[string]string {
	t.Helper()
	marker := fmt.Sprintf("verify/%d", round)
	var mu sync.Mutex
	got := map[string]string{}
	done := make(chan struct{})
	var once sync.Once
	c, _, err := crashV3(addr, "crash-verify", true, func(topic, payload string) {
		if topic == marker {
			once.Do(func() { close(done) })
			return
		}
		mu.Lock()
		got[topic] = payload
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("verifier: %v", err)
	}
	defer c.Disconnect(0)
	if tok := c.SubscribeMultiple(map[string]byte{"crash/r/#": 1, marker: 1}, nil); !tok.WaitTimeout(crashWait) || tok.Error() != nil {
		t.Fatalf("verifier subscribe: %v", tok.Error())
	}
	if tok := c.Publish(marker, 1, false, "marker"); !tok.WaitTimeout(crashWait) || tok.Error() != nil {
		t.Fatalf("verifier publish: %v", tok.Error())
	}
	select {
	case <-done:
	case <-time.After(crashWait):
		t.Fatal("verifier: marker not received")
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(got)
}

// TestCrashUnderLoad runs the real binary with durability on, kills it
// with SIGKILL at random points while 4 publishers send QoS 1 messages to
// two offline persistent sessions (MQTT 3.1.1 and 5) and to retained
// topics, restarts it on the same data directory and checks, after every
// restart: each message whose PUBACK a publisher received reaches both
// persistent sessions (duplicates allowed, loss not), and each retained
// topic holds its newest acknowledged value or a value that was in flight
// at a kill, never an older one.
func TestCrashUnderLoad(t *testing.T) {
	bin := gantryBinary(t)
	const kills = 20
	n := &crashNode{t: t, bin: bin, ip: loopbackIP(), dataDir: t.TempDir()}
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			t.Logf("gantry stderr:\n%s", n.stderr())
		}
	})
	began := time.Now()
	n.start()

	subs := []*crashSubscriber{newCrashSubscriber("crash-sub-v3", false), newCrashSubscriber("crash-sub-v5", true)}
	for _, s := range subs {
		s.connect(t, n.addr(), true)()
	}
	pubs := []*crashPublisher{{name: "p0"}, {name: "p1"}, {name: "p2", v5: true}, {name: "p3", v5: true}}
	for _, p := range pubs {
		p.retained = map[string]*crashRetained{}
		for i := range crashRetainedPerPublisher {
			p.retained[fmt.Sprintf("crash/r/%s/%d", p.name, i)] = &crashRetained{floor: -1}
		}
	}

	var rst retainedStats
	for round := range kills {
		// Load, then kill -9 at a random point of it.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range pubs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.run(n.addr(), stop)
			}()
		}
		<-time.After(time.Duration(50+mrand.IntN(251)) * time.Millisecond) // pacing the kill point
		n.kill()
		close(stop)
		wg.Wait()

		n.start()
		var acked []string
		for _, p := range pubs {
			acked = append(acked, p.acked...)
		}
		for _, s := range subs {
			disconnect := s.connect(t, n.addr(), false)
			s.await(t, round, acked)
			disconnect()
		}
		checkRetained(t, round, pubs, retainedNow(t, n.addr(), round), &rst)
	}

	total, sent, dups := 0, 0, 0
	for _, p := range pubs {
		total += len(p.acked)
		sent += p.sent
	}
	for _, s := range subs {
		dups += s.duplicates()
	}
	t.Logf("%d kills in %v: %d messages sent, %d acknowledged, all delivered to %d persistent sessions; "+
		"%d duplicate deliveries; %d retained values checked, %d of them in flight at the kill",
		kills, time.Since(began).Round(time.Millisecond), sent, total, len(subs), dups, rst.checked, rst.inflightKept)
	if total == 0 {
		t.Fatal("no message was acknowledged: the load never ran")
	}
}

// retainedStats counts the retained values checked, and those that were
// in flight (not acknowledged) at the kill and were kept.
type retainedStats struct{ checked, inflightKept int }

// checkRetained checks each retained topic's value after a restart
// against what its publisher sent and had acknowledged, then takes the
// value seen as the new floor.
func checkRetained(t *testing.T, round int, pubs []*crashPublisher, got map[string]string, st *retainedStats) {
	t.Helper()
	known := 0
	for _, p := range pubs {
		for topic, rt := range p.retained {
			v, ok := got[topic]
			if !ok {
				if rt.floor >= 0 {
					t.Fatalf("kill %d: retained %s lost; it held acknowledged %s-%d", round+1, topic, p.name, rt.floor)
				}
				rt.pending = nil
				continue
			}
			known++
			name, num, _ := strings.Cut(v, "-")
			seq, err := strconv.Atoi(num)
			if err != nil || name != p.name {
				t.Fatalf("kill %d: retained %s = %q, never sent to it", round+1, topic, v)
			}
			if tp, _ := p.topic(seq); tp != topic {
				t.Fatalf("kill %d: retained %s = %q, sent to %s", round+1, topic, v, tp)
			}
			if seq != rt.floor && !slices.Contains(rt.pending, seq) {
				t.Fatalf("kill %d: retained %s = %q; want %s-%d (newest acknowledged) or one in flight at a kill %v",
					round+1, topic, v, p.name, rt.floor, rt.pending)
			}
			if seq != rt.floor {
				st.inflightKept++
			}
			st.checked++
			rt.floor, rt.pending = seq, nil
		}
	}
	if len(got) != known {
		t.Fatalf("kill %d: %d retained topics, %d of them known: %v", round+1, len(got), known, got)
	}
}

// ---- a damaged store ----

// A store file that is not a readable Gantry store stops the node at
// start: it exits non-zero, its log names the file and says what to do,
// and the file is left as it was.
func TestCorruptStoreRefused(t *testing.T) {
	bin := gantryBinary(t)
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			rand.Read(b)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage text", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"another bbolt database", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("accounts"))
				if err != nil {
					return err
				}
				return b.Put([]byte("alice"), []byte("42"))
			}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gantry.db")
			tc.write(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			stderr := refusedStart(t, bin, dir)
			if !strings.Contains(stderr, path) {
				t.Errorf("stderr does not name %s:\n%s", path, stderr)
			}
			if !strings.Contains(stderr, "restore it from a backup or move it away") {
				t.Errorf("stderr does not say what to do:\n%s", stderr)
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Errorf("the refused file was changed (%v)", err)
			}
		})
	}
}

// A Gantry store with a record that does not decode stops the node at
// start the same way: the message names the file, the record, and what
// to do.
func TestCorruptRecordRefused(t *testing.T) {
	bin := gantryBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gantry.db")
	// A real store, written by the node itself.
	n := &crashNode{t: t, bin: bin, ip: loopbackIP(), dataDir: dir}
	t.Cleanup(n.kill)
	n.start()
	n.kill()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("sessions")) // doc.go: on-disk layout
		if b == nil {
			return errors.New("no sessions bucket")
		}
		return b.Put([]byte("broken"), []byte{0xff, 0xff, 0xff})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	stderr := refusedStart(t, bin, dir)
	for _, want := range []string{path, "broken", "restore it from a backup or move it away"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr)
		}
	}
}

// refusedStart runs the binary on dataDir, expects it to exit non-zero
// on its own, and returns the error lines of its log (stderr).
func refusedStart(t *testing.T, bin, dataDir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-dev")
	n := &crashNode{ip: loopbackIP(), dataDir: dataDir}
	cmd.Env = n.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gantry still running after %v on a damaged store:\n%s", crashWait, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("gantry exit: %v, want a non-zero exit code\n%s", err, stderr.String())
	}
	// The error itself, not the informational lines before it (which
	// name the file too).
	var errs []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			errs = append(errs, line)
		}
	}
	if len(errs) == 0 {
		t.Fatalf("no error logged:\n%s", stderr.String())
	}
	return strings.Join(errs, "\n")
}
