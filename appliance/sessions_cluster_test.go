package appliance_test

// Sessions that follow the client, on real processes: takeover across
// nodes, a persistent session's handover with its queued and in-flight
// messages, its holder down (and returning, and killed in the middle of
// a handover), and an expiry that runs once.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"gantry/broker/packet"
	"gantry/cluster/dataplane"
)

// ordered records payloads in arrival order.
type ordered struct {
	mu  sync.Mutex
	got []string
}

func (o *ordered) add(_, payload string) {
	o.mu.Lock()
	o.got = append(o.got, payload)
	o.mu.Unlock()
}

func (o *ordered) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// hasAll reports the first of want not received.
func (o *ordered) hasAll(want []string) error {
	got := o.list()
	for _, w := range want {
		if !slices.Contains(got, w) {
			return fmt.Errorf("missing %q (have %d: %v)", w, len(got), got)
		}
	}
	return nil
}

func seqPayloads(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

func sessionsView(ip string) (dataplane.SessionsStatus, error) {
	var st dataplane.SessionsStatus
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + ip + ":9100" + dataplane.SessionsPath)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: GET %s: %s", ip, dataplane.SessionsPath, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// holds reports whether nd holds client's session.
func holds(t *testing.T, nd *crashNode, client string) bool {
	t.Helper()
	held, err := holdsErr(nd, client)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

func holdsErr(nd *crashNode, client string) (bool, error) {
	st, err := sessionsView(nd.ip)
	if err != nil {
		return false, err
	}
	for _, h := range st.Held {
		if h.Client == client {
			return true, nil
		}
	}
	return false, nil
}

// letGo waits until nd no longer holds client's session.
func letGo(t *testing.T, nd *crashNode, client string) {
	t.Helper()
	eventually(t, 15*time.Second, func() error {
		held, err := holdsErr(nd, client)
		if err == nil && held {
			err = fmt.Errorf("%s still holds %s", nd.ip, client)
		}
		return err
	})
}

// inDirectory waits until nd's directory lists client at holder.
func inDirectory(t *testing.T, nd *crashNode, holder, client string) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		st, err := sessionsView(nd.ip)
		if err != nil {
			return err
		}
		if !slices.Contains(st.Directory[holder], client) {
			return fmt.Errorf("%s's directory: %v, want %s at %s", nd.ip, st.Directory, client, holder)
		}
		return nil
	})
}

// backlogEmpty waits until from has nothing left for any peer: what it
// published is queued where it goes.
func backlogEmpty(t *testing.T, from *crashNode) {
	t.Helper()
	eventually(t, 15*time.Second, func() error {
		dp, err := dataPlaneView(from.ip)
		if err != nil {
			return err
		}
		for _, p := range dp.Peers {
			if p.Backlog != 0 {
				return fmt.Errorf("%s still holds %d for %s", from.ip, p.Backlog, p.Name)
			}
		}
		return nil
	})
}

// willClient connects an MQTT 5 client with a will on willTopic (delay
// seconds) and session expiry; disc receives the reason of a DISCONNECT
// from the server.
func willClient(t *testing.T, addr, id string, clean bool, expiry, delay uint32, willTopic string, disc chan<- byte) *paho.Client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnServerDisconnect: func(d *paho.Disconnect) { disc <- d.ReasonCode }})
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 30,
		WillMessage: &paho.WillMessage{Topic: willTopic, Payload: []byte("gone:" + id), QoS: 1}}
	if expiry > 0 {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	if delay > 0 {
		cp.WillProperties = &paho.WillProperties{WillDelayInterval: &delay}
	}
	if _, err := c.Connect(ctx, cp); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSessionTakeoverAcrossNodes: a client id connected on a that
// connects on b ends with b's connection only: a's gets DISCONNECT 0x8E,
// and its will is published as MQTT 5 says: at once without a delay; not
// at all when the client resumes its session (clean start 0) before the
// delay passed; at once when it starts clean (the session ends).
func TestSessionTakeoverAcrossNodes(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	var wills collector
	defer closeV5(subscribeV5(t, c.addr(), "will-watch", 0, "will/#", 1, &wills))
	interestKnown(t, a, "broker-c")
	interestKnown(t, b, "broker-c")
	for _, tc := range []struct {
		name          string
		expiry, delay uint32
		clean         bool // the second connection's clean start
		will          bool // published
	}{
		{"no delay", 0, 0, true, true},
		{"resumed within the delay", 3600, 60, false, false},
		{"clean start ends the session", 3600, 60, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "tk-" + strings.ReplaceAll(tc.name, " ", "-")
			topic := "will/" + id
			discA := make(chan byte, 1)
			onA := willClient(t, a.addr(), id, true, tc.expiry, tc.delay, topic, discA)
			discB := make(chan byte, 1)
			onB := willClient(t, b.addr(), id, tc.clean, tc.expiry, 0, topic+"-b", discB)
			select {
			case rc := <-discA:
				if rc != byte(packet.SessionTakenOver) {
					t.Fatalf("a's connection got DISCONNECT %#x, want 0x8E", rc)
				}
			case <-time.After(crashWait):
				t.Fatal("a's connection got no DISCONNECT")
			}
			select {
			case <-onA.Done():
			case <-time.After(crashWait):
				t.Fatal("a's connection stays open")
			}
			if tc.will {
				eventually(t, 10*time.Second, func() error { return wills.has("gone:" + id) })
			}
			// b's connection works, and is the only one: a publish through
			// it arrives, and no will of a's came meanwhile unless due.
			ctx, cancel := context.WithTimeout(context.Background(), crashWait)
			defer cancel()
			if _, err := onB.Publish(ctx, &paho.Publish{Topic: "will/marker-" + id, Payload: []byte("marker:" + id), QoS: 1}); err != nil {
				t.Fatalf("publish on b's connection: %v", err)
			}
			eventually(t, 10*time.Second, func() error { return wills.has("marker:" + id) })
			if n := wills.count("gone:" + id); (n == 1) != tc.will || n > 1 {
				t.Fatalf("a's will published %d times, want %v", n, tc.will)
			}
			select {
			case rc := <-discB:
				t.Fatalf("b's connection was closed too (%#x)", rc)
			default:
			}
			if holds(t, a, id) {
				t.Fatalf("a still holds %s's session", id)
			}
			closeV5(onB)
		})
	}
}

// rawSession connects clientID as a raw MQTT 5 client with clean start 0,
// an hour's session expiry and Receive Maximum recvMax.
func rawSession(t *testing.T, addr, clientID string, recvMax uint16) *rawV5 {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawV5{t: t, nc: nc, br: bufio.NewReader(nc), v: packet.V5}
	cp := packet.Connect{ProtocolName: "MQTT", Version: packet.V5, KeepAlive: 60, ClientID: clientID}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	cp.Props.ReceiveMaximum = recvMax
	cp.Props.Set(packet.PropReceiveMaximum)
	r.write(cp.Append(nil))
	if ack := r.read().(*packet.Connack); ack.ReasonCode.IsError() || !ack.SessionPresent {
		t.Fatalf("CONNACK %v, session present %v", ack.ReasonCode, ack.SessionPresent)
	}
	return r
}

// TestSessionHandoverBothNodesUp: a persistent session offline on a, with
// QoS 1 messages in flight (sent, not acknowledged) and queued, resumes on
// b: session present, every message in order (the in-flight ones first,
// sent again), none twice; a no longer holds it, and what is published
// afterwards reaches the client on b once.
func TestSessionHandoverBothNodesUp(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "mover"
	closeV5(subscribeV5(t, a.addr(), id, 3600, "line/#", 1, &collector{}))
	interestKnown(t, c, "broker-a")
	sent := seqPayloads("m", 0, 10)
	for _, p := range sent {
		publishV5(t, c.addr(), "line/1", p, 1)
	}
	backlogEmpty(t, c)
	// Three of them go out on a connection that never acknowledges them.
	raw := rawSession(t, a.addr(), id, 3)
	for i := range 3 {
		pub, ok := raw.read().(*packet.Publish)
		if !ok || string(pub.Payload) != sent[i] {
			t.Fatalf("in flight %d: %+v, want %s", i, pub, sent[i])
		}
	}
	raw.nc.Close()
	eventually(t, 10*time.Second, func() error {
		st, err := sessionsView(a.ip)
		if err != nil {
			return err
		}
		for _, h := range st.Held {
			if h.Client == id && !h.Connected {
				return nil
			}
		}
		return fmt.Errorf("a does not hold %s offline: %+v", id, st.Held)
	})
	more := seqPayloads("m", 10, 20)
	for _, p := range more {
		publishV5(t, c.addr(), "line/2", p, 1)
	}
	backlogEmpty(t, c)
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b")
	}
	want := append(slices.Clone(sent), more...)
	eventually(t, 15*time.Second, func() error { return got.hasAll(want) })
	if g := got.list(); !slices.Equal(g, want) {
		t.Fatalf("on b, got %v\nwant %v (in order, once each)", g, want)
	}
	if holds(t, a, id) {
		t.Fatal("a still holds the session")
	}
	if !holds(t, b, id) {
		t.Fatal("b does not hold the session")
	}
	if m := scrape(t, b.ip); m["coreflux_cluster_session_handovers_total"] != 1 || m["coreflux_cluster_sessions_held"] != 1 {
		t.Fatalf("b's session metrics: handovers %v, held %v, want 1 and 1",
			m["coreflux_cluster_session_handovers_total"], m["coreflux_cluster_sessions_held"])
	}
	// a lent it and b confirmed: settled, nothing taken back.
	m := scrape(t, a.ip)
	for name, want := range map[string]float64{"coreflux_cluster_session_handovers_total": 1, "coreflux_cluster_sessions_lent": 0,
		"coreflux_cluster_session_lends_taken_back_total": 0, "coreflux_cluster_session_returns_failed_total": 0} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("a's %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	publishV5(t, a.addr(), "line/3", "after", 1)
	eventually(t, 10*time.Second, func() error { return got.hasAll([]string{"after"}) })
	backlogEmpty(t, a)
	if g := got.list(); len(g) != len(want)+1 {
		t.Fatalf("on b, got %v, want %d messages", g, len(want)+1)
	}
}

// TestSessionHandoverInParts: a session with more queued messages than
// one part of the handover (1024) moves whole, in order, once each, each
// part stored on the new node before the next (durability on), and the
// old node deletes it only once the new node confirmed.
func TestSessionHandoverInParts(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b := nodes[0], nodes[1]
	const id = "bulky"
	closeV5(subscribeV5(t, a.addr(), id, 3600, "line/#", 1, &collector{}))
	pub, _, err := crashV5(a.addr(), "bulk-publisher", true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := seqPayloads("p", 0, 1300)
	for _, p := range want {
		ctx, cancel := context.WithTimeout(context.Background(), crashWait)
		_, err := pub.Publish(ctx, &paho.Publish{Topic: "line/1", Payload: []byte(p + strings.Repeat(".", 200)), QoS: 1})
		cancel()
		if err != nil {
			t.Fatalf("publish %s: %v", p, err)
		}
	}
	closeV5(pub)
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, func(topic, payload string) { got.add(topic, strings.TrimRight(payload, ".")) })
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b")
	}
	eventually(t, 30*time.Second, func() error { return got.hasAll(want) })
	if g := got.list(); !slices.Equal(g, want) {
		t.Fatalf("on b: %d messages, want %d in order, once each", len(g), len(want))
	}
	letGo(t, a, id)
	if st, err := sessionsView(a.ip); err != nil || st.Exported != 1 {
		t.Fatalf("a's sessions: %+v %v, want one exported", st, err)
	}
}

// TestSessionConnectWithFrozenMember: a member frozen with SIGSTOP (its
// connections stay open: its link looks up until it has been silent for
// 3 s) holds a CONNECT elsewhere only as long as it takes to see that it
// is silent: the session moves back and forth between a and b for 8 s
// after c froze, each CONNECT timed. Other subscribers of the same filter
// on a and b (as on a line's gateways) keep its announcement settled, so
// the claim's own steps are what is timed.
func TestSessionConnectWithFrozenMember(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "steady"
	closeV5(subscribeV5(t, a.addr(), id, 3600, "line/#", 1, &collector{}))
	defer closeV5(subscribeV5(t, a.addr(), "watch-a", 0, "line/#", 1, &collector{}))
	defer closeV5(subscribeV5(t, b.addr(), "watch-b", 0, "line/#", 1, &collector{}))
	interestKnown(t, c, "broker-a")
	interestKnown(t, c, "broker-b")
	inDirectory(t, b, "broker-a", id)
	signal(t, c, syscall.SIGSTOP)
	defer signal(t, c, syscall.SIGCONT)
	frozen := time.Now()
	var took []string
	var worst time.Duration
	for i := 0; time.Since(frozen) < 8*time.Second; i++ {
		nd := []*crashNode{b, a}[i%2]
		start := time.Now()
		cl, present, err := crashV5(nd.addr(), id, false, 3600, nil)
		d := time.Since(start)
		took = append(took, fmt.Sprintf("%.1fs:%v", start.Sub(frozen).Seconds(), d.Round(time.Millisecond)))
		if err != nil {
			t.Fatalf("CONNECT %d on %s: %v (%v)", i, nd.ip, err, took)
		}
		if !present {
			t.Fatalf("CONNECT %d on %s: session present = 0 (%v)", i, nd.ip, took)
		}
		closeV5(cl)
		worst = max(worst, d)
	}
	t.Logf("CONNECT times (seconds after the freeze: duration): %v", took)
	t.Logf("slow claims:\n%s\n%s", grepLines(a.stderr(), "claim was slow"), grepLines(b.stderr(), "claim was slow"))
	if worst > frozenConnectMax {
		t.Fatalf("a CONNECT took %v with a member frozen, want at most %v: %v", worst, frozenConnectMax, took)
	}
}

// frozenConnectMax bounds a CONNECT while a member is frozen: the claim
// waits up to liveSilence (1.5 s) for it to turn silent.
const frozenConnectMax = 2500 * time.Millisecond

// TestSessionDirectoryAfterRestart: a node that restarts learns the other
// nodes' sessions as soon as its links are up (not at their next whole
// push, up to 30 s later): a CONNECT on it right after, while the holder
// is down, gets the session from the directory.
func TestSessionDirectoryAfterRestart(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "remembered"
	offlineOnA(t, a, b, c, id, nil)
	b.kill()
	b.start()
	linksUp(t, nodes)
	eventually(t, 3*time.Second, func() error {
		st, err := sessionsView(b.ip)
		if err == nil && !slices.Contains(st.Directory["broker-a"], id) {
			err = fmt.Errorf("b's directory after its restart: %v, want %s at broker-a", st.Directory, id)
		}
		return err
	})
	a.kill()
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b: its directory did not list the session of the node that is down")
	}
	publishUntil(t, c.addr(), "line/1", "after-restart")
	eventually(t, 20*time.Second, func() error { return got.hasAll([]string{"after-restart"}) })
}

// publishUntil publishes one QoS 1 message on addr, again until it is
// acknowledged (a refusal while a killed node's partitions move).
func publishUntil(t *testing.T, addr, topic, payload string) {
	t.Helper()
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cl, _, err := crashV5(addr, fmt.Sprintf("pub-%d", time.Now().UnixNano()), true, 0, nil)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), crashWait)
			_, err = cl.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1})
			cancel()
			closeV5(cl)
			if err == nil {
				return
			}
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("publish %s on %s: %v", payload, addr, last)
}

// mapSettled waits until nd's partition map gives every partition a
// caught-up copy on each of the n nodes (none syncing).
func mapSettled(t *testing.T, nd *crashNode, n int) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		st, err := clusterView(nd.ip)
		if err != nil {
			return err
		}
		if len(st.Partitions.Partitions) == 0 {
			return fmt.Errorf("%s has no partition map yet", nd.ip)
		}
		for i, p := range st.Partitions.Partitions {
			if len(p.Replicas) != n || len(p.Syncing) > 0 {
				return fmt.Errorf("partition %d has copies %v, syncing %v (map %d)", i, p.Replicas, p.Syncing, st.Partitions.Version)
			}
		}
		return nil
	})
}

// offlineOnA leaves client's persistent session offline on a, subscribed
// to line/#, with the messages queued there (published on c), known to
// the directories of b and c. The partition map has settled first: a
// node serves a session whose holder is down from its own partition
// copies only, and a copy still being filled when the messages were
// published may lack them (sessions_copies.go). Under load the map of a
// cluster just formed took seconds to settle, and queued messages were
// missing from TestSessionHolderDownThenReturns in 2 of 6 runs with two
// busy loops beside it.
func offlineOnA(t *testing.T, a, b, c *crashNode, client string, queued []string) {
	t.Helper()
	mapSettled(t, a, 3)
	closeV5(subscribeV5(t, a.addr(), client, 3600, "line/#", 1, &collector{}))
	interestKnown(t, c, "broker-a")
	for _, p := range queued {
		publishV5(t, c.addr(), "line/1", p, 1)
	}
	backlogEmpty(t, c)
	inDirectory(t, b, "broker-a", client)
	inDirectory(t, c, "broker-a", client)
}

// TestSessionHolderDownThenReturns: the node holding an offline
// persistent session is killed; the client reconnects to another node and
// gets its subscriptions there (session present, and what is published
// now reaches it) and, from that node's partition copies, what the holder
// had queued; when the holder returns it hands its own queue over (those
// arrive twice) and keeps nothing.
func TestSessionHolderDownThenReturns(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "survivor"
	queued := seqPayloads("q", 0, 10)
	offlineOnA(t, a, b, c, id, queued)
	a.kill()
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b while its holder is down")
	}
	fresh := seqPayloads("n", 0, 5)
	for _, p := range fresh {
		publishUntil(t, c.addr(), "line/2", p)
	}
	eventually(t, 20*time.Second, func() error { return got.hasAll(fresh) })
	// What a had queued comes from b's partition copies meanwhile.
	eventually(t, 10*time.Second, func() error { return got.hasAll(queued) })
	if st, err := sessionsView(b.ip); err != nil || st.FromDirectory != 1 || st.FromCopies < uint64(len(queued)) {
		t.Fatalf("b's sessions: %+v %v, want one from the directory, its queue from the copies", st, err)
	}
	a.start()
	letGo(t, a, id)
	// Not held is not yet returned: a lends the session until b confirms.
	eventually(t, 15*time.Second, func() error {
		st, err := sessionsView(a.ip)
		if err == nil && st.Returned != 1 {
			err = fmt.Errorf("a returned %d sessions, want 1: %+v\na's log:\n%s", st.Returned, st, grepLines(a.stderr(), "session"))
		}
		return err
	})
}

// TestSessionHolderKilledDuringHandover: kill -9 of the holder while the
// client reconnects to another node, at whatever step of the handover it
// lands: the client gets its session there, and once the holder returns,
// every message it had queued.
func TestSessionHolderKilledDuringHandover(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "interrupted"
	queued := seqPayloads("k", 0, 200)
	offlineOnA(t, a, b, c, id, queued)
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		a.cmd.Process.Kill()
	}()
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b")
	}
	<-killed
	a.kill() // reaps it
	a.start()
	eventually(t, 30*time.Second, func() error { return got.hasAll(queued) })
	letGo(t, a, id)
}

// TestSessionExpiryOnceClusterWide: a session that moved from a to b
// expires on b, its holder, and no node keeps a copy: a reconnect on c
// after the expiry finds no session.
func TestSessionExpiryOnceClusterWide(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "short-lived"
	closeV5(subscribeV5(t, a.addr(), id, 4, "line/#", 1, &collector{}))
	cl, present, err := crashV5(b.addr(), id, false, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !present {
		t.Fatal("session present = 0 on b")
	}
	closeV5(cl)
	if holds(t, a, id) || !holds(t, b, id) {
		t.Fatal("the session is not on b alone")
	}
	inDirectory(t, c, "broker-b", id)
	for _, nd := range nodes {
		letGo(t, nd, id)
	}
	cl, present, err = crashV5(c.addr(), id, false, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeV5(cl)
	if present {
		t.Fatal("session present = 1 on c after the session expired")
	}
}

// TestSessionHolderDiesWhileConnected: the node a client is connected to
// is killed; what is published before the client reconnects elsewhere
// reaches it there, from that node's partition copies, without the dead
// node returning.
func TestSessionHolderDiesWhileConnected(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "orphan"
	var onA ordered
	clA, _, err := crashV5(a.addr(), id, false, 3600, onA.add)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	if _, err := clA.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "line/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	interestKnown(t, c, "broker-a")
	before := seqPayloads("p", 0, 5)
	for _, p := range before {
		publishV5(t, c.addr(), "line/1", p, 1)
	}
	eventually(t, 10*time.Second, func() error { return onA.hasAll(before) })
	inDirectory(t, b, "broker-a", id)
	a.kill()
	after := seqPayloads("d", 0, 10)
	for _, p := range after {
		publishUntil(t, c.addr(), "line/2", p)
	}
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b")
	}
	eventually(t, 15*time.Second, func() error { return got.hasAll(after) })
	// In order, each once (what came before the kill may come again).
	var ds []string
	for _, g := range got.list() {
		if strings.HasPrefix(g, "d-") {
			ds = append(ds, g)
		}
	}
	if !slices.Equal(ds, after) {
		t.Fatalf("on b: %v, want %v", ds, after)
	}
}

// TestSessionHandoverSurvivesRestart: a session taken over with its queue
// is on the new node's disk before the client gets it: after a kill -9
// of that node the client finds it there whole.
func TestSessionHandoverSurvivesRestart(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	const id = "kept"
	queued := seqPayloads("s", 0, 20)
	offlineOnA(t, a, b, c, id, queued)
	raw := rawSession(t, b.addr(), id, 1) // session present: it moved
	if pub, ok := raw.read().(*packet.Publish); !ok || string(pub.Payload) != queued[0] {
		t.Fatalf("first on b: %+v, want %s", pub, queued[0])
	}
	b.kill()
	b.start()
	var got ordered
	cl, present, err := crashV5(b.addr(), id, false, 3600, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	if !present {
		t.Fatal("session present = 0 on b after its restart")
	}
	eventually(t, 15*time.Second, func() error { return got.hasAll(queued) })
	if g := got.list(); !slices.Equal(g[:len(queued)], queued) {
		t.Fatalf("after b's restart: %v, want %v first", g, queued)
	}
}

// dupReceived records payloads in arrival order, and those that arrived
// again without the DUP flag: a QoS 1 message sent again because it was
// in flight (not acknowledged) when its client moved comes with DUP set,
// as MQTT allows; one without was queued twice.
type dupReceived struct {
	mu   sync.Mutex
	got  []string
	seen map[string]int
	dups []string
}

func (d *dupReceived) onPublish(pr paho.PublishReceived) (bool, error) {
	p := string(pr.Packet.Payload)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]int{}
	}
	d.got = append(d.got, p)
	if d.seen[p]++; d.seen[p] > 1 && !pr.Packet.Duplicate() {
		d.dups = append(d.dups, p)
	}
	return true, nil
}

// missing is how many of want have not arrived, and the first few.
func (d *dupReceived) missing(want []string) (int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	n := 0
	for _, w := range want {
		if d.seen[w] == 0 {
			if n++; len(out) < 5 {
				out = append(out, w)
			}
		}
	}
	return n, out
}

// connectReceiving resumes client id's session on addr, receiving into d.
func connectReceiving(addr, id string, d *dupReceived) (*paho.Client, bool, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, false, err
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){d.onPublish}})
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	expiry := uint32(3600)
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		nc.Close()
		return nil, false, err
	}
	return c, ca.SessionPresent, nil
}

// moveUnderLoad moves a subscriber's session between the three nodes,
// once per move, staying dwell on each, while a QoS 1 publisher on every
// node publishes without pause; then it resumes the session on the first
// node and waits until every acknowledged message arrived. It returns
// what was acknowledged and what arrived.
func moveUnderLoad(t *testing.T, moves int, dwell time.Duration) ([]string, *dupReceived) {
	t.Helper()
	nodes := dataPlaneCluster(t, 3)
	const id = "wanderer"
	closeV5(subscribeV5(t, nodes[0].addr(), id, 3600, "load/#", 1, &collector{}))
	for _, nd := range nodes[1:] {
		interestKnown(t, nd, "broker-a")
	}
	got := &dupReceived{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []string
	start := time.Now()
	ackedAt := map[string]time.Duration{}
	var moveLog []string
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, _, err := crashV5(nd.addr(), fmt.Sprintf("loader-%d", i), true, 0, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer closeV5(cl)
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("l%d-%05d", i, seq)
				ctx, cancel := context.WithTimeout(context.Background(), crashWait)
				_, err := cl.Publish(ctx, &paho.Publish{Topic: "load/x", Payload: []byte(p), QoS: 1})
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, p)
					ackedAt[p] = time.Since(start)
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	for move := range moves {
		nd := nodes[(move+1)%3]
		t0 := time.Since(start)
		cl, present, err := connectReceiving(nd.addr(), id, got)
		moveLog = append(moveLog, fmt.Sprintf("to %s %v-%v", nd.ip, t0, time.Since(start)))
		if err != nil {
			t.Fatal(err)
		}
		if !present {
			t.Fatalf("move %d to %s: session present = 0", move, nd.ip)
		}
		time.Sleep(dwell) // receive for a while, then move on
		closeV5(cl)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	want := slices.Clone(acked)
	mu.Unlock()
	cl, _, err := connectReceiving(nodes[0].addr(), id, got)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	eventually(t, 20*time.Second, func() error {
		n, first := got.missing(want)
		if n == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		var at []time.Duration
		for _, m := range first {
			at = append(at, ackedAt[m])
		}
		var handbacks []string
		for _, nd := range nodes {
			for _, l := range strings.Split(nd.stderr(), "\n") {
				if strings.Contains(l, "handed a session over") || strings.Contains(l, "stays on this node") ||
					strings.Contains(l, "lent session is back") {
					handbacks = append(handbacks, l)
				}
			}
		}
		return fmt.Errorf("%d of %d acknowledged messages missing, first %v acknowledged at %v; moves %v; sessions handed back: %v",
			n, len(want), first, at, moveLog, handbacks)
	})
	dropped := 0.0
	for _, nd := range nodes {
		dropped += scrape(t, nd.ip)["gantry_session_handover_duplicates_total"]
	}
	got.mu.Lock()
	t.Logf("%d acknowledged, %d received, %d twice without DUP (queued on both nodes), %v copies dropped, over %d moves: %v",
		len(want), len(got.got), len(got.dups), dropped, moves+1, moveLog)
	got.mu.Unlock()
	return want, got
}

// TestSessionMovesOnceEach: a subscriber's session moves between the
// nodes while QoS 1 messages are published on every node without pause:
// every acknowledged message arrives, and none twice (but for one in
// flight when its client moved, sent again with DUP). A message published
// in the window between the claiming node's announcement and the
// holder's export is queued on both nodes; the claiming node drops its
// own copy of each message the export carries (the same record of its
// origin's stream). Without that, 3 to 6 of some 60 messages per move
// arrived twice.
func TestSessionMovesOnceEach(t *testing.T) {
	_, got := moveUnderLoad(t, 3, 200*time.Millisecond)
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.dups) > 0 {
		t.Fatalf("%d messages arrived twice without DUP: %v", len(got.dups), got.dups)
	}
}

// TestSessionMovesUnderLoad: as TestSessionMovesOnceEach, longer, with
// more moves: every acknowledged message reaches the subscriber.
//
// It lost a message in about one run in six while a directory push of
// the old holder that reached the claiming node during its claim made
// that node hand the session back (docs/cluster.md); 0 in 10 runs since.
// It runs only with GANTRY_SESSION_LOAD=1, outside make test, until more
// runs confirm it.
func TestSessionMovesUnderLoad(t *testing.T) {
	if os.Getenv("GANTRY_SESSION_LOAD") == "" {
		t.Skip("set GANTRY_SESSION_LOAD=1: slow, and a rare loss fixed recently (see the comment)")
	}
	moveUnderLoad(t, 6, 300*time.Millisecond)
}
