package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// lotView is the lot part of GET /cluster.
type lotView struct {
	Version     uint64 `json:"version"`
	AdoptedFrom string `json:"adoptedFrom"`
	Definitions int    `json:"definitions"`
	MixedMode   bool   `json:"mixedMode"`
	Nodes       []struct {
		Node    string `json:"node"`
		Applied uint64 `json:"applied"`
		Behind  bool   `json:"behind"`
		Reason  string `json:"reason"`
	} `json:"nodes"`
	Session string            `json:"session"`
	Started map[string]string `json:"started"`
	Work    []struct {
		Key     string `json:"key"`
		Owner   string `json:"owner"`
		Standby string `json:"standby"`
		Pinned  bool   `json:"pinned"`
	} `json:"work"`
}

func lotOf(ip string) (lotView, error) {
	var v struct {
		LoT *lotView `json:"lot"`
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + ip + ":9100/cluster")
	if err != nil {
		return lotView{}, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return lotView{}, err
	}
	if v.LoT == nil {
		return lotView{}, fmt.Errorf("%s: no lot in GET /cluster", ip)
	}
	return *v.LoT, nil
}

// lotInSync waits until every node of nodes reports the same definitions
// version, applied by each of them (as seen from each), and returns it.
func lotInSync(t *testing.T, nodes []*crashNode, timeout time.Duration) uint64 {
	t.Helper()
	var version uint64
	eventually(t, timeout, func() error {
		version = 0
		for _, nd := range nodes {
			v, err := lotOf(nd.ip)
			if err != nil {
				return err
			}
			if v.Version == 0 || (version != 0 && v.Version != version) {
				return fmt.Errorf("%s at LoT version %d, another at %d", nd.ip, v.Version, version)
			}
			version = v.Version
			for _, ns := range v.Nodes {
				if ns.Behind {
					return fmt.Errorf("%s says %s is behind: %s", nd.ip, ns.Node, ns.Reason)
				}
			}
		}
		return nil
	})
	return version
}

var lotRequests atomic.Int64

// lotCommand sends one command to $SYS/Coreflux/Command on ip as root and
// returns the reply.
func lotCommand(t *testing.T, ip, rootPassword, line string) string {
	t.Helper()
	id := fmt.Sprintf("req-%d", lotRequests.Add(1))
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "1883"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	replies := make(chan string, 16)
	c := paho.NewClient(paho.ClientConfig{Conn: nc, PacketTimeout: 30 * time.Second, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			if strings.Contains(string(pr.Packet.Payload), `"`+id+`"`) {
				replies <- string(pr.Packet.Payload)
			}
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "lot-" + id, CleanStart: true, KeepAlive: 30,
		Username: "root", UsernameFlag: true, Password: []byte(rootPassword), PasswordFlag: true}); err != nil {
		t.Fatalf("connect to %s as root: %v", ip, err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: outputTopic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, &paho.Publish{Topic: commandTopic, QoS: 1, Payload: []byte(line + " -requestId " + id)}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-replies:
		return r
	case <-ctx.Done():
		t.Fatalf("no reply on %s to %q", ip, line)
	}
	return ""
}

func rootPassword(t *testing.T, nd *crashNode) string {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(nd.dataDir, "initial-root-password"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(pw))
}

func mustSucceed(t *testing.T, reply string) {
	t.Helper()
	if !strings.Contains(reply, `"success":true`) {
		t.Fatalf("command failed: %s", reply)
	}
}

// TestClusterLoTDefinitions: the leader's definitions become the
// cluster's; a definition sent to a follower is answered once that node
// applied it and reaches every node; a failing one changes nothing
// anywhere; a node with definitions of its own that joins backs them up
// and takes the cluster's; a node that was down catches up; without a
// majority a change is refused with the reason.
func TestClusterLoTDefinitions(t *testing.T) {
	nodes := clusterOf(t, 3, func(nd *crashNode) { nd.held = true })
	a, b, c := nodes[0], nodes[1], nodes[2]
	// c first runs alone, with a definition of its own.
	c.extra = append(c.extra, "COREFLUX_CLUSTER_ENABLED=false")
	c.start()
	mustSucceed(t, lotCommand(t, c.ip, rootPassword(t, c), `-addAction DEFINE ACTION Mine ON TOPIC "mine" DO PUBLISH TOPIC "mine/out" WITH PAYLOAD`))
	c.kill()
	c.extra = c.extra[:len(c.extra)-1]
	// a and b form the cluster and adopt definitions before c joins: with
	// the three started at once, c could lead for the 3 s adoption waits
	// on a loaded machine (elections while a process is not scheduled),
	// and the cluster rightly took c's definitions, leaving nothing of c's
	// to back up. Without the peer check a forms it with c not answering.
	for _, nd := range []*crashNode{a, b} {
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_BOOTSTRAP_PEER_CHECK=false")
		nd.start()
	}
	agreeOnLeader(t, nodes[:2], 2, 30*time.Second, "")
	v0 := lotInSync(t, nodes[:2], 20*time.Second)
	c.start()
	leader := agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	if v := lotInSync(t, nodes, 20*time.Second); v != v0 {
		t.Fatalf("LoT version %d after c joined, %d before", v, v0)
	}
	// Adopted from the leader of the time (which may no longer lead): only
	// a leader adopts, and says so.
	v, _ := lotOf(a.ip)
	adopter, _ := byName(nodes, v.AdoptedFrom)
	if adopter == nil || adopter == c || !strings.Contains(adopter.stderr(), "the cluster adopts this node's LoT definitions") {
		t.Fatalf("adopted from %q, want a leader of a and b that logged its adoption", v.AdoptedFrom)
	}
	// c joined with its own definition: backed up, replaced by the cluster's.
	backups, _ := filepath.Glob(filepath.Join(c.dataDir, "lot-backup", "*", "action", "Mine.lot"))
	if len(backups) != 1 {
		t.Fatalf("c's own action was not backed up under lot-backup/<time>/action/Mine.lot: %v\n%s", backups, grepLines(c.stderr(), "LoT"))
	}
	pw := rootPassword(t, a) // the cluster's root is the bootstrapping node's
	if r := lotCommand(t, c.ip, pw, "-listEntities"); strings.Contains(r, `"Mine"`) {
		t.Fatalf("c kept a definition the cluster does not have: %s", r)
	}
	follower := a
	if leader == "broker-a" {
		follower = b
	}

	// A definition sent to a follower: applied there when it answers.
	sent := time.Now()
	mustSucceed(t, lotCommand(t, follower.ip, pw, `-addAction DEFINE ACTION Echo ON TOPIC "in/#" DO PUBLISH TOPIC "out/" + TOPIC POSITION 2 WITH PAYLOAD`))
	t.Logf("-addAction on a follower answered after %v (connect, subscribe, commit through the leader, apply)", time.Since(sent).Round(time.Millisecond))
	if r := lotCommand(t, follower.ip, pw, "-listEntities"); !strings.Contains(r, `"Echo"`) {
		t.Fatalf("the follower answered before it applied the change: %s", r)
	}
	v1 := lotInSync(t, nodes, 10*time.Second)
	if v1 <= v0 {
		t.Fatalf("version %d after the change, %d before", v1, v0)
	}
	for _, nd := range nodes {
		if r := lotCommand(t, nd.ip, pw, "-listEntities"); !strings.Contains(r, `"Echo"`) {
			t.Fatalf("%s lacks Echo: %s", nd.ip, r)
		}
	}

	resp, err := http.Get("http://" + follower.ip + ":9100/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{fmt.Sprintf("coreflux_cluster_lot_version %d", v1), fmt.Sprintf("coreflux_cluster_lot_applied_version %d", v1), "coreflux_cluster_lot_behind 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// A failing definition changes nothing anywhere.
	if r := lotCommand(t, follower.ip, pw, `-addAction DEFINE ACTION Bad ON TOPIC "x" DO PUBLSH TOPIC "y" WITH "z"`); strings.Contains(r, `"success":true`) {
		t.Fatalf("a definition that does not parse was accepted: %s", r)
	}
	if r := lotCommand(t, follower.ip, pw, "-removeAction NoSuch"); strings.Contains(r, `"success":true`) {
		t.Fatalf("removing an unknown action succeeded: %s", r)
	}
	if v := lotInSync(t, nodes, 10*time.Second); v != v1 {
		t.Fatalf("failing commands moved the version from %d to %d", v1, v)
	}

	// c away while a change commits: it catches up when it returns.
	c.kill()
	mustSucceed(t, lotCommand(t, a.ip, pw, `-addAction DEFINE ACTION Later ON TOPIC "later" DO PUBLISH TOPIC "later/out" WITH PAYLOAD`))
	c.start()
	lotInSync(t, nodes, 20*time.Second)
	if r := lotCommand(t, c.ip, pw, "-listEntities"); !strings.Contains(r, `"Later"`) {
		t.Fatalf("c did not catch up: %s", r)
	}
	if b, _ := filepath.Glob(filepath.Join(c.dataDir, "lot-backup", "*")); len(b) != 1 {
		t.Fatalf("catching up on changes only added backed something up: %v", b)
	}

	// Without a majority: refused, with the reason.
	b.kill()
	c.kill()
	eventually(t, 10*time.Second, func() error {
		r := lotCommand(t, a.ip, pw, `-addAction DEFINE ACTION Lone ON TOPIC "lone" DO PUBLISH TOPIC "lone/out" WITH PAYLOAD`)
		if !strings.Contains(r, "no majority") {
			return fmt.Errorf("not refused for want of a majority: %s", r)
		}
		return nil
	})
	if r := lotCommand(t, a.ip, pw, "-listEntities"); strings.Contains(r, `"Lone"`) {
		t.Fatalf("a refused change was applied: %s", r)
	}
}

// lotHeard is every message a set of subscribers (one per node) received,
// with the node it was received on and when.
type lotHeard struct {
	mu   sync.Mutex
	msgs []heardMsg
}

type heardMsg struct {
	node, topic, payload string
	at                   time.Time
}

// listen subscribes as root on nd to filter, recording into h.
func (h *lotHeard) listen(t *testing.T, nd *crashNode, pw, filter string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(nd.ip, "1883"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, PacketTimeout: 30 * time.Second, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			h.mu.Lock()
			h.msgs = append(h.msgs, heardMsg{nd.ip, pr.Packet.Topic, string(pr.Packet.Payload), time.Now()})
			h.mu.Unlock()
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("heard-%d", lotRequests.Add(1)), CleanStart: true, KeepAlive: 30,
		Username: "root", UsernameFlag: true, Password: []byte(pw), PasswordFlag: true}); err != nil {
		t.Fatalf("connect to %s: %v", nd.ip, err)
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}); nc.Close() })
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 0}}}); err != nil {
		t.Fatal(err)
	}
}

// since returns the messages on topic received after from, by node.
func (h *lotHeard) since(topic string, from time.Time) map[string][]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]time.Time{}
	for _, m := range h.msgs {
		if m.topic == topic && m.at.After(from) {
			out[m.node] = append(out[m.node], m.at)
		}
	}
	return out
}

// workOwner waits until every node of nodes names the same owner of key
// in lot.work, other than not, and returns it.
func workOwner(t *testing.T, nodes []*crashNode, key, not string, timeout time.Duration) string {
	t.Helper()
	var owner string
	eventually(t, timeout, func() error {
		owner = ""
		for _, nd := range nodes {
			v, err := lotOf(nd.ip)
			if err != nil {
				return err
			}
			o := ""
			for _, w := range v.Work {
				if w.Key == key {
					o = w.Owner
				}
			}
			switch {
			case o == "" || o == not:
				return fmt.Errorf("%s: %s owned by %q", nd.ip, key, o)
			case owner != "" && o != owner:
				return fmt.Errorf("%s says %s is %s's, another node %s's", nd.ip, key, o, owner)
			}
			owner = o
		}
		return nil
	})
	return owner
}

// TestClusterLoTTimerFailover: an ON EVERY 1 SECOND timer deployed on a
// follower publishes once a second cluster-wide, from its owner only; an
// ON START action runs once; the owner killed with kill -9, the timer
// publishes again from its standby within about 10 s, from one node, and
// ON START does not run again.
func TestClusterLoTTimerFailover(t *testing.T) {
	nodes := clusterOf(t, 3)
	leader := agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	lotInSync(t, nodes, 20*time.Second)
	pw := rootPassword(t, nodes[0])
	var heard lotHeard
	for _, nd := range nodes {
		heard.listen(t, nd, pw, "lot/#")
	}
	follower := nodes[1]
	if leader == "broker-b" {
		follower = nodes[0]
	}
	start := time.Now()
	mustSucceed(t, lotCommand(t, follower.ip, pw, `-addAction DEFINE ACTION Tick ON EVERY 1 SECOND DO PUBLISH TOPIC "lot/tick" WITH "t"`))
	mustSucceed(t, lotCommand(t, follower.ip, pw, `-addAction DEFINE ACTION Boot ON START DO PUBLISH TOPIC "lot/boot" WITH "b"`))
	for _, nd := range nodes {
		heard.listen(t, nd, pw, "$SYS/Coreflux/Connectors/+/status")
	}
	heard.listen(t, nodes[2], pw, "$SYS/Coreflux/Cluster/Status")
	mustSucceed(t, lotCommand(t, follower.ip, pw, `-addConnector DEFINE CONNECTOR Line WITH TYPE MODBUS_TCP
    ADD MODBUS_CONFIG
        WITH HOST "127.0.0.1"
        WITH PORT '1'
        WITH SLAVE_ID '1'
    ADD MAPPING Poll
        WITH EVERY 1 SECONDS
        ADD TAG T
            WITH ADDRESS "0"
            WITH ADDRESS_TYPE "HOLDING_REGISTER"
            WITH DATA_TYPE "INT16"
            WITH SOURCE_TOPIC "line/t"`))
	owner := workOwner(t, nodes, "timer/Tick", "", 10*time.Second)
	ownerNode, _ := byName(nodes, owner)
	// Press is pinned to the timer's owner: it runs nowhere once that
	// node is killed.
	mustSucceed(t, lotCommand(t, follower.ip, pw, `-addConnector DEFINE CONNECTOR Press WITH TYPE MODBUS_TCP
    ADD MODBUS_CONFIG
        WITH HOST "127.0.0.1"
        WITH PORT '1'
        WITH SLAVE_ID '1'
    ADD CONNECTOR_CONFIG
        WITH CLUSTER_NODE "`+owner+`"
    ADD MAPPING Poll
        WITH EVERY 1 SECONDS
        ADD TAG T
            WITH ADDRESS "0"
            WITH ADDRESS_TYPE "HOLDING_REGISTER"
            WITH DATA_TYPE "INT16"
            WITH SOURCE_TOPIC "press/t"`))
	// An exclusive connector runs on one node; the others say Standby.
	runsOn := func(name string, on []*crashNode, want int) {
		t.Helper()
		eventually(t, 15*time.Second, func() error {
			var running []string
			for _, nd := range on {
				st := heard.last(nd.ip, "$SYS/Coreflux/Connectors/"+name+"/status")
				if st == "" {
					return fmt.Errorf("no status from %s", nd.ip)
				}
				if !strings.Contains(st, `"Standby"`) {
					running = append(running, nd.ip)
				}
			}
			if len(running) != want {
				return fmt.Errorf("%s runs on %v, want %d node(s)", name, running, want)
			}
			return nil
		})
	}
	runsOn("Line", nodes, 1)
	runsOn("Press", nodes, 1)
	if st := heard.last(ownerNode.ip, "$SYS/Coreflux/Connectors/Press/status"); strings.Contains(st, `"Standby"`) {
		t.Fatalf("Press is not running on %s, its CLUSTER_NODE: %s", owner, st)
	}
	eventually(t, 15*time.Second, func() error {
		if st := heard.last(nodes[2].ip, "$SYS/Coreflux/Cluster/Status"); !strings.Contains(st, `"timer/Tick"`) {
			return fmt.Errorf("$SYS/Coreflux/Cluster/Status lacks the owner map: %s", st)
		}
		return nil
	})

	// Once a second, from the owner only.
	from := time.Now()
	eventually(t, 10*time.Second, func() error {
		if n := len(heard.since("lot/tick", from)[ownerNode.ip]); n < 5 {
			return fmt.Errorf("%d ticks from the owner %s", n, owner)
		}
		return nil
	})
	got := heard.since("lot/tick", from)
	if len(got) != 1 || len(got[ownerNode.ip]) > 7 {
		t.Fatalf("ticks by node %v, want about one a second from the owner %s (%s) only", counts(got), owner, ownerNode.ip)
	}
	if n := len(flatten(heard.since("lot/boot", start))); n != 1 {
		t.Fatalf("ON START ran %d times, want once", n)
	}

	// The owner killed: its standby takes over within about 10 s.
	ownerNode.kill()
	killed := time.Now()
	var next string
	eventually(t, 15*time.Second, func() error {
		got := heard.since("lot/tick", killed)
		for ip := range got {
			next = ip
			return nil
		}
		return fmt.Errorf("no tick since %s was killed", owner)
	})
	took := heard.since("lot/tick", killed)[next][0].Sub(killed)
	t.Logf("timer owner %s killed: ticks again on %s after %v", owner, next, took.Round(10*time.Millisecond))
	if took > 12*time.Second {
		t.Errorf("the timer came back after %v, want about 10 s", took)
	}
	from = time.Now()
	eventually(t, 10*time.Second, func() error {
		if n := len(flatten(heard.since("lot/tick", from))); n < 4 {
			return fmt.Errorf("%d ticks since the takeover", n)
		}
		return nil
	})
	if got := heard.since("lot/tick", from); len(got) != 1 || len(flatten(got)) > 6 {
		t.Fatalf("after the takeover, ticks by node %v, want about one a second from one node", counts(got))
	}
	_, live := byName(nodes, owner)
	runsOn("Line", live, 1)
	runsOn("Press", live, 0) // pinned to the dead node: nowhere
	// Restarting one node runs nothing; restarting every node starts a
	// new session, in which ON START runs once more.
	startRuns := func() int {
		n := 0
		for _, nd := range nodes {
			n += strings.Count(nd.stderr(), `msg="running ON START: this node owns it" component=lot action=Boot`)
		}
		return n
	}
	session := func() (string, string) {
		v, err := lotOf(nodes[0].ip)
		if err != nil {
			t.Fatal(err)
		}
		return v.Session, v.Started["Boot"]
	}
	if n := startRuns(); n != 1 {
		t.Fatalf("the logs show %d ON START runs, want 1", n)
	}
	ownerNode.start()
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	lotInSync(t, nodes, 20*time.Second)
	// The new owner frozen (SIGSTOP) past the failover delay: the timer
	// moves; resumed, the frozen node does not run it again.
	heard.listen(t, ownerNode, pw, "lot/#")
	var frozen *crashNode
	for _, nd := range nodes {
		if nd.ip == next {
			frozen = nd
		}
	}
	frozen.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	var third string
	eventually(t, 20*time.Second, func() error {
		for ip := range heard.since("lot/tick", stopped) {
			if ip != frozen.ip {
				third = ip
				return nil
			}
		}
		return fmt.Errorf("no tick since %s was frozen", frozen.ip)
	})
	frozen.cmd.Process.Signal(syscall.SIGCONT)
	resumed := time.Now()
	t.Logf("timer owner %s frozen: ticks again on %s after %v", frozen.ip, third,
		heard.since("lot/tick", stopped)[third][0].Sub(stopped).Round(10*time.Millisecond))
	time.Sleep(3 * time.Second) // observation window after SIGCONT (not a wait for a condition)
	if got := heard.since("lot/tick", resumed); len(got[frozen.ip]) != 0 || len(got[third]) < 2 {
		t.Fatalf("after SIGCONT ticks by node %v, want them from %s only", counts(got), third)
	}
	if n := len(flatten(heard.since("lot/boot", start))); n != 1 {
		t.Fatalf("ON START ran %d times after the failover, want once", n)
	}

	s1, code := session()
	time.Sleep(2 * time.Second) // observation window: a restarted node must not run ON START (not a wait for a condition)
	if n := startRuns(); n != 1 || code == "" {
		t.Fatalf("after one node restarted: %d ON START runs, code %q, want 1 run", n, code)
	}
	for _, nd := range nodes {
		nd.kill()
	}
	for _, nd := range nodes {
		nd.start()
	}
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	eventually(t, 20*time.Second, func() error {
		if s2, c := session(); s2 == s1 || c != code {
			return fmt.Errorf("session %q (was %q), Boot's code %q", s2, s1, c)
		}
		if n := startRuns(); n != 2 {
			return fmt.Errorf("%d ON START runs after every node restarted, want 2", n)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // observation window: no second run in the new session (not a wait for a condition)
	if n := startRuns(); n != 2 {
		t.Fatalf("%d ON START runs after every node restarted, want 2", n)
	}
}

func flatten(m map[string][]time.Time) []time.Time {
	var out []time.Time
	for _, v := range m {
		out = append(out, v...)
	}
	return out
}

func counts(m map[string][]time.Time) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// last returns the last payload received on node for topic, "" if none.
func (h *lotHeard) last(node, topic string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.msgs) - 1; i >= 0; i-- {
		if m := h.msgs[i]; m.node == node && m.topic == topic {
			return m.payload
		}
	}
	return ""
}

// publishAs publishes one message on ip as root.
func publishAs(t *testing.T, ip, pw, topic, payload string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "1883"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := paho.NewClient(paho.ClientConfig{Conn: nc, PacketTimeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pub-%d", lotRequests.Add(1)), CleanStart: true, KeepAlive: 30,
		Username: "root", UsernameFlag: true, Password: []byte(pw), PasswordFlag: true}); err != nil {
		t.Fatalf("connect to %s: %v", ip, err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1}); err != nil {
		t.Fatalf("publish %s on %s: %v", topic, ip, err)
	}
}

// TestClusterLoTKeep: a value kept on one node is read with GET TOPIC on
// the others, never reaches a subscriber or triggers LoT there, the later
// of two writes wins everywhere, and a node that was down gets the values
// when it returns.
func TestClusterLoTKeep(t *testing.T) {
	nodes := clusterOf(t, 3)
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	lotInSync(t, nodes, 20*time.Second)
	a, b, c := nodes[0], nodes[1], nodes[2]
	pw := rootPassword(t, a)
	mustSucceed(t, lotCommand(t, a.ip, pw, `-addAction DEFINE ACTION Keeper ON TOPIC "keep/in" DO KEEP TOPIC "state/x" WITH PAYLOAD`))
	mustSucceed(t, lotCommand(t, a.ip, pw, `-addAction DEFINE ACTION Reader ON TOPIC "read/in" DO PUBLISH TOPIC "read/out" WITH GET TOPIC "state/x"`))
	mustSucceed(t, lotCommand(t, a.ip, pw, `-addAction DEFINE ACTION Watcher ON TOPIC "state/#" DO PUBLISH TOPIC "watch/out" WITH PAYLOAD`))
	lotInSync(t, nodes, 10*time.Second)
	var heard lotHeard
	for _, nd := range nodes {
		heard.listen(t, nd, pw, "read/out")
		heard.listen(t, nd, pw, "state/#")
		heard.listen(t, nd, pw, "watch/out")
	}
	reads := func(nd *crashNode, want string) {
		t.Helper()
		eventually(t, 10*time.Second, func() error {
			publishAs(t, nd.ip, pw, "read/in", "?")
			if got := heard.last(nd.ip, "read/out"); got != want {
				return fmt.Errorf("GET TOPIC on %s reads %q, want %q", nd.ip, got, want)
			}
			return nil
		})
	}
	publishAs(t, a.ip, pw, "keep/in", "v1")
	reads(b, "v1")
	reads(c, "v1")

	// The later write wins on every node.
	publishAs(t, a.ip, pw, "keep/in", "from-a")
	publishAs(t, b.ip, pw, "keep/in", "from-b")
	for _, nd := range nodes {
		reads(nd, "from-b")
	}

	// A node that was down gets what was kept meanwhile.
	c.kill()
	publishAs(t, a.ip, pw, "keep/in", "while-c-was-down")
	c.start()
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	heard.listen(t, c, pw, "read/out")
	reads(c, "while-c-was-down")

	if got := heard.since("state/x", time.Time{}); len(got) != 0 {
		t.Fatalf("kept values reached subscribers: %v", counts(got))
	}
	if got := heard.since("watch/out", time.Time{}); len(got) != 0 {
		t.Fatalf("kept values triggered LoT: %v", counts(got))
	}
}
