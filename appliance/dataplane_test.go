package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"gantry/broker"
	"gantry/cluster/dataplane"
	"gantry/cluster/signing"
	"gantry/cluster/wire"
)

const clusterUserPassword = "a-strong-password"

// dataPlaneCluster starts n nodes as the seed's quick start does: the
// cluster service user on every node, then the Cluster section with
// DataPlaneUsername. It returns once every node's links to every other
// node are up.
func dataPlaneCluster(t *testing.T, n int, setup ...func(*crashNode)) []*crashNode {
	nodes := clusterOf(t, n, append(setup, func(nd *crashNode) {
		add := exec.Command(nd.bin, "-addUser", "cluster", clusterUserPassword)
		add.Env = nd.env()
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("-addUser cluster: %v\n%s", err, out)
		}
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_DATAPLANE_USERNAME=cluster")
	})...)
	var up []*crashNode
	for _, nd := range nodes {
		if !nd.held {
			up = append(up, nd)
		}
	}
	agreeOnLeader(t, up, len(up), 30*time.Second, "")
	linksUp(t, up)
	return nodes
}

// linksUp waits until every node of nodes has a link up to each other.
func linksUp(t *testing.T, nodes []*crashNode) {
	t.Helper()
	n := len(nodes)
	eventually(t, 20*time.Second, func() error {
		for _, nd := range nodes {
			dp, err := dataPlaneView(nd.ip)
			if err != nil {
				return err
			}
			up := 0
			for _, p := range dp.Peers {
				if p.Connected {
					up++
				}
			}
			if up < n-1 {
				return fmt.Errorf("%s has %d of %d links up: %+v", nd.ip, up, n-1, dp.Peers)
			}
		}
		return nil
	})
}

func dataPlaneView(ip string) (dataplane.Status, error) {
	var v struct {
		DataPlane *dataplane.Status `json:"dataPlane"`
	}
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + ip + ":9100/cluster")
	if err != nil {
		return dataplane.Status{}, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return dataplane.Status{}, err
	}
	if v.DataPlane == nil {
		return dataplane.Status{}, fmt.Errorf("%s: no dataPlane in GET /cluster", ip)
	}
	return *v.DataPlane, nil
}

// collector records the payloads a subscriber received.
type collector struct {
	mu  sync.Mutex
	got []string
}

func (c *collector) add(_, payload string) {
	c.mu.Lock()
	c.got = append(c.got, payload)
	c.mu.Unlock()
}

func (c *collector) has(want ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, w := range want {
		if !slices.Contains(c.got, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %d of %d (first %q), have %d", len(missing), len(want), missing[0], len(c.got))
	}
	return nil
}

func (c *collector) count(want string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, g := range c.got {
		if g == want {
			n++
		}
	}
	return n
}

func subscribeV5(t *testing.T, addr, id string, expiry uint32, filter string, qos byte, c *collector) *paho.Client {
	t.Helper()
	cl, _, err := crashV5(addr, id, expiry == 0, expiry, c.add)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	if _, err := cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: qos}}}); err != nil {
		t.Fatal(err)
	}
	return cl
}

func publishV5(t *testing.T, addr, topic, payload string, qos byte) {
	t.Helper()
	cl, _, err := crashV5(addr, fmt.Sprintf("pub-%d", time.Now().UnixNano()), true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	if _, err := cl.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: qos}); err != nil {
		t.Fatalf("publish %s on %s: %v", topic, addr, err)
	}
}

// TestDataPlaneDelivery: a message published on one node reaches the
// subscribers of every node at QoS 0, 1 and 2, also when the subscription
// was made just before; a message from a peer is not forwarded again
// (each subscriber gets it once).
func TestDataPlaneDelivery(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	var onB, onC collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "plant/#", 2, &onB))
	defer closeV5(subscribeV5(t, c.addr(), "sub-c", 0, "plant/#", 2, &onC))
	for qos := byte(0); qos <= 2; qos++ {
		publishV5(t, a.addr(), "plant/line1/temp", fmt.Sprintf("from-a-qos%d", qos), qos)
	}
	want := []string{"from-a-qos0", "from-a-qos1", "from-a-qos2"}
	eventually(t, 10*time.Second, func() error {
		if err := onB.has(want...); err != nil {
			return fmt.Errorf("on b: %w", err)
		}
		return onC.has(want...)
	})
	// Subscribe on c, and at once after its SUBACK publish on a.
	var late collector
	defer closeV5(subscribeV5(t, c.addr(), "sub-c-late", 0, "late/#", 1, &late))
	publishV5(t, a.addr(), "late/x", "right-after-suback", 1)
	eventually(t, 10*time.Second, func() error { return late.has("right-after-suback") })
	// Nothing travels twice: b and c got each message once, and a
	// subscriber on a gets b's message once too.
	var onA collector
	defer closeV5(subscribeV5(t, a.addr(), "sub-a", 0, "plant/#", 1, &onA))
	publishV5(t, b.addr(), "plant/line2/temp", "from-b", 1)
	eventually(t, 10*time.Second, func() error { return onA.has("from-b") })
	eventually(t, 10*time.Second, func() error { return onC.has("from-b") })
	for name, col := range map[string]*collector{"b": &onB, "c": &onC} {
		for _, w := range want {
			if n := col.count(w); n != 1 {
				t.Errorf("subscriber on %s got %q %d times, want once", name, w, n)
			}
		}
	}
}

// TestDataPlaneNodeReturnsGetsBacklog: a node killed while QoS 1 messages
// are published elsewhere gets them when it returns, for its offline
// persistent session.
func TestDataPlaneNodeReturnsGetsBacklog(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	var first collector
	sub := subscribeV5(t, b.addr(), "persistent-b", 3600, "line/#", 1, &first)
	closeV5(sub) // offline persistent session on b
	b.kill()
	var sent []string
	for i := range 20 {
		p := fmt.Sprintf("while-b-down-%d", i)
		publishV5(t, a.addr(), "line/1", p, 1)
		sent = append(sent, p)
	}
	eventually(t, 10*time.Second, func() error {
		dp, err := dataPlaneView(a.ip)
		if err != nil {
			return err
		}
		for _, p := range dp.Peers {
			if p.Name == "broker-b" && p.Backlog >= len(sent) { // and what else waits for b (a failover replay, say)
				return nil
			}
		}
		return fmt.Errorf("a's backlog for b: %+v, want %d", dp.Peers, len(sent))
	})
	b.start()
	var back collector
	defer closeV5(subscribeV5(t, b.addr(), "persistent-b", 3600, "line/#", 1, &back))
	eventually(t, 20*time.Second, func() error { return back.has(sent...) })
	eventually(t, 10*time.Second, func() error {
		dp, err := dataPlaneView(a.ip)
		if err != nil {
			return err
		}
		for _, p := range dp.Peers {
			if p.Backlog != 0 {
				return fmt.Errorf("a still holds %d for %s", p.Backlog, p.Name)
			}
		}
		return nil
	})
}

// TestDataPlaneRefusesForgedFrames: a frame signed with another secret,
// a replayed frame and an internal publish by another user are dropped,
// delivered to nobody, and counted.
func TestDataPlaneRefusesForgedFrames(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	b := nodes[1]
	var onB collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "plant/#", 1, &onB))
	frame := func(secret string) []byte {
		f := wire.AppendHeader(nil, "broker-a", uint64(time.Now().UnixNano()), 1)
		f = wire.AppendRecord(f, 0, wire.AppendMessage(nil, &broker.Message{Topic: "plant/forged", Payload: []byte("forged")}), nil)
		return signing.New([]byte(secret), nil).Sign(f)
	}
	// As the cluster user, with its real password (a person who knows it
	// but not the SharedSecret).
	pubAs := func(user, pass string, payload []byte) error {
		args := []string{"-h", b.ip, "-V", "mqttv5", "-q", "1", "-t", "$cluster/v1/frames", "-s"}
		if user != "" {
			args = append(args, "-u", user, "-P", pass)
		}
		cmd := exec.Command(needTool(t, "mosquitto_pub"), args...)
		cmd.Stdin = strings.NewReader(string(payload))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	pubAs("cluster", clusterUserPassword, frame("another-secret"))
	pubAs("", "", frame("a-long-random-secret")) // anonymous: not the cluster user
	eventually(t, 10*time.Second, func() error {
		dp, err := dataPlaneView(b.ip)
		if err != nil {
			return err
		}
		if dp.Received.Forged < 1 || dp.Received.Refused < 1 {
			return fmt.Errorf("b counted %+v, want a forged and an unauthorized frame", dp.Received)
		}
		return nil
	})
	// A signed frame is delivered once; the same bytes again are a replay.
	good := frame("a-long-random-secret")
	pubAs("cluster", clusterUserPassword, good)
	eventually(t, 10*time.Second, func() error { return onB.has("forged") })
	pubAs("cluster", clusterUserPassword, good)
	eventually(t, 10*time.Second, func() error {
		dp, err := dataPlaneView(b.ip)
		if err != nil {
			return err
		}
		if dp.Received.Replayed < 1 {
			return fmt.Errorf("b counted %+v, want a replay", dp.Received)
		}
		return nil
	})
	if n := onB.count("forged"); n != 1 {
		t.Fatalf("the subscriber got the frame's message %d times, want once (the signed one)", n)
	}
	out, err := http.Get("http://" + b.ip + ":9100/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	metrics, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), `coreflux_cluster_dataplane_dropped_frames_total{reason="forged"} 1`) {
		t.Errorf("/metrics does not count the forged frame:\n%s", grepLines(string(metrics), "dataplane"))
	}
}

// TestDataPlaneMessageFromPeerDoesNotTriggerLoT: an action deployed on b
// (hence on every node) runs once for a message, on the node it entered:
// on b for one published on b, on a for one published on a, never on the
// node that receives the message from a peer; its output reaches every
// node's subscribers.
func TestDataPlaneMessageFromPeerDoesNotTriggerLoT(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	// The cluster's root is the bootstrapping node's (broker-a): b's own
	// was replaced, and its password file removed, when b joined.
	root, err := os.ReadFile(filepath.Join(a.dataDir, "initial-root-password"))
	if err != nil {
		t.Fatal(err)
	}
	action := `-addAction DEFINE ACTION Echo ON TOPIC "in/#" DO PUBLISH TOPIC "out/" + TOPIC POSITION 2 WITH PAYLOAD`
	cmd := exec.Command(needTool(t, "mosquitto_pub"), "-h", b.ip, "-u", "root", "-P", strings.TrimSpace(string(root)),
		"-t", "$SYS/Coreflux/Command", "-m", action, "-q", "1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy on b: %v %s", err, out)
	}
	var out collector
	defer closeV5(subscribeV5(t, a.addr(), "watch-a", 0, "out/#", 1, &out))
	// A message published on b: the action runs on b, and its output
	// reaches a. Deploying is asynchronous, so publish until it runs.
	eventually(t, 10*time.Second, func() error {
		publishV5(t, b.addr(), "in/on-b", "x", 1)
		return out.has("x")
	})
	// One published on a reaches b as a peer message: no run.
	var onB collector
	defer closeV5(subscribeV5(t, b.addr(), "watch-b", 0, "in/#", 1, &onB))
	publishV5(t, a.addr(), "in/on-a", "from-a", 1)
	eventually(t, 10*time.Second, func() error { return onB.has("from-a") })
	// A marker published on b after it runs the action again: once its
	// output arrived, any output of from-a would have arrived before it.
	publishV5(t, b.addr(), "in/on-b", "marker", 1)
	eventually(t, 10*time.Second, func() error { return out.has("marker") })
	// The definition is the cluster's: it ran once, on a, where the
	// message entered, and not again on b.
	if n := out.count("from-a"); n != 1 {
		t.Fatalf("the action ran %d times for a message published on a, want once", n)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// loadPublisher publishes numbered QoS 1 messages to one node until
// stopped, reconnecting while its node is down, and records what was
// acknowledged.
type loadPublisher struct {
	name  string
	addr  string
	mu    sync.Mutex
	acked []string
}

func (p *loadPublisher) ackedCopy() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.acked)
}

func (p *loadPublisher) run(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	seq := 0
	for {
		cl, _, err := crashV5(p.addr, p.name, true, 0, nil)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		for err == nil {
			select {
			case <-stop:
				closeV5(cl)
				return
			case <-time.After(5 * time.Millisecond):
			}
			seq++
			payload := fmt.Sprintf("%s-%d", p.name, seq)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var resp *paho.PublishResponse
			resp, err = cl.Publish(ctx, &paho.Publish{Topic: "load/" + p.name, Payload: []byte(payload), QoS: 1})
			cancel()
			if err == nil && resp.ReasonCode < 0x80 {
				p.mu.Lock()
				p.acked = append(p.acked, payload)
				p.mu.Unlock()
			}
		}
		cl.Disconnect(&paho.Disconnect{})
	}
}

// loadSubscriber is a persistent session on one node that reconnects
// after its node restarts.
type loadSubscriber struct {
	id   string
	addr string
	got  collector
}

func (s *loadSubscriber) run(t *testing.T, stop <-chan struct{}, done *sync.WaitGroup, subscribed chan<- struct{}) {
	defer done.Done()
	first := true
	for {
		cl, _, err := crashV5(s.addr, s.id, first, 3600, s.got.add)
		if err == nil && first {
			ctx, cancel := context.WithTimeout(context.Background(), crashWait)
			_, err = cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "load/#", QoS: 1}}})
			cancel()
			if err != nil {
				t.Errorf("subscribe %s: %v", s.id, err)
				return
			}
			first = false
			subscribed <- struct{}{}
		}
		if err == nil {
			select {
			case <-stop:
				closeV5(cl)
				return
			case <-cl.Done():
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestDataPlaneRollingRestart: three durable nodes under steady QoS 1
// load, with a publisher and a persistent subscriber on every node; each
// node in turn is killed (kill -9) and started again. Every message
// acknowledged to a publisher reaches every subscriber (duplicates
// allowed, loss not).
func TestDataPlaneRollingRestart(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	subscribed := make(chan struct{}, len(nodes))
	var subs []*loadSubscriber
	for i, nd := range nodes {
		s := &loadSubscriber{id: fmt.Sprintf("sub-%d", i), addr: nd.addr()}
		subs = append(subs, s)
		wg.Add(1)
		go s.run(t, stop, &wg, subscribed)
	}
	for range nodes {
		<-subscribed
	}
	var pubs []*loadPublisher
	for i, nd := range nodes {
		p := &loadPublisher{name: fmt.Sprintf("pub-%d", i), addr: nd.addr()}
		pubs = append(pubs, p)
		wg.Add(1)
		go p.run(stop, &wg)
	}
	progress := func(k int, more int) {
		t.Helper()
		before := 0
		for i, p := range pubs {
			if i != k {
				before += len(p.ackedCopy())
			}
		}
		eventually(t, 20*time.Second, func() error {
			now := 0
			for i, p := range pubs {
				if i != k {
					now += len(p.ackedCopy())
				}
			}
			if now < before+more {
				return fmt.Errorf("%d of %d more messages acknowledged", now-before, more)
			}
			return nil
		})
	}
	for k, nd := range nodes {
		progress(-1, 50)
		nd.kill()
		progress(k, 100) // published on the others while it is down
		nd.start()
		eventually(t, 30*time.Second, func() error {
			for _, other := range nodes {
				dp, err := dataPlaneView(other.ip)
				if err != nil {
					return err
				}
				for _, p := range dp.Peers {
					if !p.Connected {
						return fmt.Errorf("%s: link to %s down", other.ip, p.Name)
					}
				}
			}
			return nil
		})
	}
	progress(-1, 50)
	close(stop)
	wg.Wait()
	var acked []string
	for _, p := range pubs {
		acked = append(acked, p.ackedCopy()...)
	}
	// Reconnect every subscriber once more to collect what is still queued.
	for _, s := range subs {
		cl, _, err := crashV5(s.addr, s.id, false, 3600, s.got.add)
		if err != nil {
			t.Fatalf("reconnect %s: %v", s.id, err)
		}
		defer closeV5(cl)
	}
	for _, s := range subs {
		eventually(t, 30*time.Second, func() error {
			if err := s.got.has(acked...); err != nil {
				var views []string
				for _, nd := range nodes {
					dp, _ := dataPlaneView(nd.ip)
					views = append(views, fmt.Sprintf("%s: %+v", nd.ip, dp))
				}
				return fmt.Errorf("%s: %w\n%s", s.id, err, strings.Join(views, "\n"))
			}
			return nil
		})
	}
	t.Logf("%d messages acknowledged, each received by all %d subscribers", len(acked), len(subs))
}

// TestDataPlaneSenderRestartKeepsBacklog: messages acknowledged on a while
// c is down wait in a's stream on disk; a is killed and started again
// before c returns, and c still gets them.
func TestDataPlaneSenderRestartKeepsBacklog(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, c := nodes[0], nodes[2]
	var first collector
	closeV5(subscribeV5(t, c.addr(), "persistent-c", 3600, "line/#", 1, &first))
	c.kill()
	var sent []string
	for i := range 20 {
		p := fmt.Sprintf("queued-on-a-%d", i)
		publishV5(t, a.addr(), "line/1", p, 1)
		sent = append(sent, p)
	}
	a.kill()
	a.start()
	c.start()
	var back collector
	defer closeV5(subscribeV5(t, c.addr(), "persistent-c", 3600, "line/#", 1, &back))
	eventually(t, 30*time.Second, func() error {
		if err := back.has(sent...); err != nil {
			dp, _ := dataPlaneView(a.ip)
			dc, _ := dataPlaneView(c.ip)
			return fmt.Errorf("%w; a: %+v; c: %+v", err, dp, dc)
		}
		return nil
	})
}

// TestDataPlaneRoutesByInterest: a message crosses only to nodes with a
// subscriber for it (c, subscribed to nothing of it, receives none of it),
// retained messages go everywhere, and an interest added on c reaches a
// before c's SUBACK.
func TestDataPlaneRoutesByInterest(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	var onB collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "only-b/#", 1, &onB))
	before, err := dataPlaneView(c.ip)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		publishV5(t, a.addr(), "only-b/x", fmt.Sprint("qos0-", i), 0)
		publishV5(t, a.addr(), "only-b/x", fmt.Sprint("qos1-", i), 1)
	}
	eventually(t, 10*time.Second, func() error { return onB.has("qos0-9", "qos1-9") })
	publishV5(t, a.addr(), "config/x", "retained-everywhere", 1) // marker, and retained below
	cmd := exec.Command(needTool(t, "mosquitto_pub"), "-h", a.ip, "-t", "config/line", "-m", "v1", "-r", "-q", "1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("retained publish: %v %s", err, out)
	}
	eventually(t, 10*time.Second, func() error {
		out, err := exec.Command(needTool(t, "mosquitto_sub"), "-h", c.ip, "-t", "config/line", "-C", "1", "-W", "2").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "v1" {
			return fmt.Errorf("retained on c: %q %v", out, err)
		}
		return nil
	})
	after, err := dataPlaneView(c.ip)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Received.Messages - before.Received.Messages; got != 1 {
		t.Fatalf("c received %d messages from its peers, want only the retained one", got)
	}
	// c is one of the three copies of every partition: it stores the QoS 1
	// messages (11) without delivering them.
	if after.Replication != nil && before.Replication != nil {
		if got := after.Replication.Copied - before.Replication.Copied; got < 11 {
			t.Fatalf("c stored %d copies, want the 11 QoS 1 messages", got)
		}
	}
	// c subscribes; a message published on a at once after the SUBACK
	// reaches it (its interest reached a first).
	for i := range 5 {
		var late collector
		id := fmt.Sprint("late-", i)
		cl := subscribeV5(t, c.addr(), id, 0, "only-b/"+id, 1, &late)
		publishV5(t, a.addr(), "only-b/"+id, id, 0)
		eventually(t, 10*time.Second, func() error { return late.has(id) })
		closeV5(cl)
	}
}

// TestDataPlaneSharedGroupAcrossNodes: one shared group with members on
// two nodes gets each message published on a third node once, spread over
// both; once the publisher's node has a member too, it takes them.
func TestDataPlaneSharedGroupAcrossNodes(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const group = "$share/workers/jobs/#"
	var onB, onC, onA collector
	defer closeV5(subscribeV5(t, b.addr(), "member-b", 0, group, 1, &onB))
	defer closeV5(subscribeV5(t, c.addr(), "member-c", 0, group, 1, &onC))
	var want []string
	for i := range 20 {
		p := fmt.Sprint("job-", i)
		publishV5(t, a.addr(), "jobs/line1", p, 1)
		want = append(want, p)
	}
	total := func() []string {
		onB.mu.Lock()
		onC.mu.Lock()
		defer onB.mu.Unlock()
		defer onC.mu.Unlock()
		return append(slices.Clone(onB.got), onC.got...)
	}
	eventually(t, 10*time.Second, func() error {
		if got := total(); len(got) < len(want) {
			return fmt.Errorf("the group received %d of %d", len(got), len(want))
		}
		return nil
	})
	got := total()
	slices.Sort(got)
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	if !slices.Equal(got, sorted) {
		t.Fatalf("the group received %q, want each of %q once", got, sorted)
	}
	if len(onB.got) == 0 || len(onC.got) == 0 {
		t.Fatalf("one member took everything: b %d, c %d", len(onB.got), len(onC.got))
	}
	// A member on the publisher's node takes what is published there.
	defer closeV5(subscribeV5(t, a.addr(), "member-a", 0, group, 1, &onA))
	before := len(total())
	for i := range 10 {
		publishV5(t, a.addr(), "jobs/line1", fmt.Sprint("local-", i), 1)
	}
	eventually(t, 10*time.Second, func() error { return onA.has("local-9") })
	onA.mu.Lock()
	n := len(onA.got)
	onA.mu.Unlock()
	if n != 10 || len(total()) != before {
		t.Fatalf("with a member on the publisher's node: it got %d of 10, the others %d more", n, len(total())-before)
	}
}

// TestDataPlaneOverTLS: with Cluster.UseTls the links are TLS connections
// to the peers' TLS port, verified against the cluster's CA and
// presenting each node's own certificate (mutual TLS), and messages cross.
func TestDataPlaneOverTLS(t *testing.T) {
	pki := newPKI(t, "127.0.0.1")
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		cert, key := pki.issueFor(t, nd.ip)
		nd.extra = append(nd.extra, "COREFLUX_MQTT_CERT_FILE="+cert, "COREFLUX_MQTT_KEY_FILE="+key,
			"COREFLUX_MQTT_CLIENT_CA_FILE="+pki.caFile, "COREFLUX_CLUSTER_TLS=true")
	})
	a, b := nodes[0], nodes[1]
	dp, err := dataPlaneView(a.ip)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dp.Peers {
		if !strings.HasSuffix(p.Address, ":8883") {
			t.Fatalf("link to %s dials %s, want the TLS port", p.Name, p.Address)
		}
	}
	var onB collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "secure/#", 1, &onB))
	publishV5(t, a.addr(), "secure/x", "over-tls", 1)
	eventually(t, 10*time.Second, func() error { return onB.has("over-tls") })
}

// TestDataPlaneRetainedCatchUp: a node that joins after retained messages
// were published gets them (store-only, not delivered as new messages),
// and the newest value of a topic written on two nodes wins everywhere.
func TestDataPlaneRetainedCatchUp(t *testing.T) {
	nodes := dataPlaneCluster(t, 4, func(nd *crashNode) {
		nd.held = strings.HasSuffix(nd.ip, ".4")
		// Three of four seeds answer: without the check they form the
		// cluster, which the fourth joins later.
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_BOOTSTRAP_PEER_CHECK=false")
	})
	a, b, d := nodes[0], nodes[1], nodes[3]
	pub := needTool(t, "mosquitto_pub")
	retain := func(nd *crashNode, topic, value string) {
		t.Helper()
		if out, err := exec.Command(pub, "-h", nd.ip, "-t", topic, "-m", value, "-r", "-q", "1").CombinedOutput(); err != nil {
			t.Fatalf("retained publish: %v %s", err, out)
		}
	}
	retain(a, "config/line1", "from-a")
	retain(b, "config/line2", "from-b")
	retain(a, "config/shared", "first")
	retain(b, "config/shared", "second") // published later: the newer value
	read := func(nd *crashNode, topic string) string {
		out, _ := exec.Command(needTool(t, "mosquitto_sub"), "-h", nd.ip, "-t", topic, "-C", "1", "-W", "2").CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	eventually(t, 10*time.Second, func() error {
		if v := read(a, "config/shared"); v != "second" {
			return fmt.Errorf("a holds %q for config/shared, want second", v)
		}
		return nil
	})
	d.start()
	agreeOnLeader(t, nodes, 4, 30*time.Second, "")
	linksUp(t, nodes)
	want := map[string]string{"config/line1": "from-a", "config/line2": "from-b", "config/shared": "second"}
	eventually(t, 15*time.Second, func() error {
		for topic, v := range want {
			if got := read(d, topic); got != v {
				return fmt.Errorf("the new node holds %q for %s, want %q", got, topic, v)
			}
		}
		return nil
	})
	dp, err := dataPlaneView(d.ip)
	if err != nil {
		t.Fatal(err)
	}
	if dp.Received.CaughtUp < 3 {
		t.Fatalf("the new node counted %d retained messages caught up, want at least 3", dp.Received.CaughtUp)
	}
}
