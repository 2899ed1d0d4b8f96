package appliance_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"gantry/broker/packet"
	"gantry/cluster"
	"gantry/cluster/dataplane"
)

// publishCode publishes one QoS 1 message on addr and returns the PUBACK's
// reason code and reason string (0 and "" for success).
func publishCode(t *testing.T, addr, client, topic, payload string) (byte, string) {
	t.Helper()
	cl, _, err := crashV5(addr, client, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeV5(cl)
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	pr, err := cl.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1})
	if pr == nil {
		t.Fatalf("publish %s on %s: %v", topic, addr, err)
	}
	text := ""
	if pr.Properties != nil {
		text = pr.Properties.ReasonString
	}
	return pr.ReasonCode, text
}

func replicationView(t *testing.T, ip string) *dataplane.ReplicationStatus {
	t.Helper()
	dp, err := dataPlaneView(ip)
	if err != nil {
		t.Fatal(err)
	}
	if dp.Replication == nil {
		t.Fatalf("%s: no dataPlane.replication in GET /cluster", ip)
	}
	return dp.Replication
}

// TestQuorumRefusesWithoutMajority: with both other nodes killed, a QoS 1
// publish is refused with 0x97 (reason text naming the copies), is not
// delivered to the node's own subscriber, and is counted; once a second
// node is back, publishes are acknowledged again.
func TestQuorumRefusesWithoutMajority(t *testing.T) {
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_REPLICATION_TRACE=true")
	})
	a, b, c := nodes[0], nodes[1], nodes[2]
	var got collector
	defer closeV5(subscribeV5(t, a.addr(), "local-sub", 0, "quorum/#", 1, &got))
	if code, text := publishCode(t, a.addr(), "pub-q", "quorum/1", "with-majority"); code != 0 {
		t.Fatalf("publish with every node up: reason %#x %q", code, text)
	}
	eventually(t, 10*time.Second, func() error { return got.has("with-majority") })
	b.kill()
	c.kill()
	// Refused at once when the links are seen down, or after
	// ReplicationTimeoutMs while they are not yet.
	eventually(t, 30*time.Second, func() error {
		code, text := publishCode(t, a.addr(), "pub-q", "quorum/1", "without-majority")
		if code != 0x97 {
			return fmt.Errorf("publish without a majority: reason %#x %q, want 0x97", code, text)
		}
		if !strings.Contains(text, "partition") {
			t.Fatalf("0x97 without a reason string naming the partition: %q", text)
		}
		return nil
	})
	// An MQTT 3.1.1 publisher cannot be told: its connection is closed
	// instead of acknowledging, so that it sends the message again.
	r311 := dialRaw(t, a.addr(), "pub-311", packet.V311)
	pub := packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("quorum/1"), Payload: []byte("without-majority-311")}
	r311.write(pub.Append(nil, packet.V311))
	if p, err := r311.next(); err == nil {
		t.Fatalf("a 3.1.1 publish without a majority was answered with %+v, want the connection closed", p)
	}
	rs := replicationView(t, a.ip)
	if n := rs.Failures["noMajority"] + rs.Failures["timeout"]; n == 0 {
		t.Fatalf("refusals not counted: %+v", rs.Failures)
	}
	b.start()
	eventually(t, 60*time.Second, func() error {
		if code, text := publishCode(t, a.addr(), "pub-q", "quorum/1", "majority-back"); code != 0 {
			return fmt.Errorf("publish with b back: reason %#x %q", code, text)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error { return got.has("majority-back") })
	if n := got.count("without-majority") + got.count("without-majority-311"); n != 0 {
		t.Fatalf("a refused publish was delivered %d times", n)
	}
	// The trace tells the story of pub-q's publishes on a.
	eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + a.ip + ":9100/cluster/trace?client=pub-q")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		seen := map[string]int{}
		dec := json.NewDecoder(resp.Body)
		for {
			var e dataplane.TraceEvent
			if err := dec.Decode(&e); err != nil {
				break
			}
			if e.Client != "pub-q" {
				return fmt.Errorf("filter by client let through %+v", e)
			}
			seen[e.Event]++
		}
		if seen["publish"] == 0 || seen["acknowledged"] < 2 || seen["refused"] == 0 {
			return fmt.Errorf("trace of pub-q on a: %v", seen)
		}
		return nil
	})
}

// TestQuorumAcknowledgedSurvivesLossOfItsNode: a publish acknowledged by
// a (stored on a and b) while c is down reaches c's persistent subscriber
// even though a is killed before c returns: b, a copy, re-delivers what
// a accepted once a leaves the partition map.
func TestQuorumAcknowledgedSurvivesLossOfItsNode(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	var first collector
	closeV5(subscribeV5(t, c.addr(), "persistent-c", 3600, "line/#", 1, &first))
	c.kill()
	var sent []string
	for i := range 20 {
		p := fmt.Sprintf("acked-by-a-%d", i)
		if code, text := publishCode(t, a.addr(), fmt.Sprintf("pub-%d", i), "line/1", p); code != 0 {
			t.Fatalf("publish %d with a and b up: reason %#x %q", i, code, text)
		}
		sent = append(sent, p)
	}
	a.kill()
	c.start()
	var back collector
	defer closeV5(subscribeV5(t, c.addr(), "persistent-c", 3600, "line/#", 1, &back))
	eventually(t, 90*time.Second, func() error { return back.has(sent...) })
	for _, p := range sent {
		if n := back.count(p); n > 1 {
			t.Errorf("%s delivered %d times to one subscriber", p, n)
		}
	}
	if rs := replicationView(t, b.ip); rs.ReplayedOut == 0 {
		t.Errorf("b replayed nothing: %+v", rs)
	}
}

// TestQuorumNewCopyFilled: a fourth node that joins gets copies of
// partitions as syncing replicas; their owners fill them with what was
// written before it joined and report them caught up through the leader,
// so the map settles (nothing syncing, the new node owns partitions) and
// the new node holds every record of the partitions it is a copy of.
func TestQuorumNewCopyFilled(t *testing.T) {
	nodes := dataPlaneCluster(t, 4, func(nd *crashNode) {
		nd.held = strings.HasSuffix(nd.ip, ".4")
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_BOOTSTRAP_PEER_CHECK=false") // three of four form it
	})
	a, d := nodes[0], nodes[3]
	for i := range 40 {
		if code, text := publishCode(t, a.addr(), fmt.Sprintf("early-%d", i), "fill/x", fmt.Sprint("early-", i)); code != 0 {
			t.Fatalf("publish %d on three nodes: reason %#x %q", i, code, text)
		}
	}
	written := replicationView(t, a.ip).Copies // a is a copy of every partition now
	d.start()
	var last cluster.Status
	eventually(t, 90*time.Second, func() error {
		st, err := clusterView(d.ip)
		if err != nil {
			return err
		}
		owned := 0
		for i, p := range st.Partitions.Partitions {
			if len(p.Syncing) > 0 {
				return fmt.Errorf("partition %d still syncing %v (map %d)", i, p.Syncing, st.Partitions.Version)
			}
			if p.Owner == "broker-d" {
				owned++
			}
		}
		if owned == 0 {
			return fmt.Errorf("broker-d owns nothing yet (map %d)", st.Partitions.Version)
		}
		last = st
		return nil
	})
	held := replicationView(t, d.ip).Copies
	checked := 0
	for i, p := range last.Partitions.Partitions {
		if !slices.Contains(p.Replicas, "broker-d") || written[uint32(i)] == 0 {
			continue
		}
		checked++
		if held[uint32(i)] < written[uint32(i)] {
			t.Errorf("partition %d: d holds %d records, a held %d before d joined", i, held[uint32(i)], written[uint32(i)])
		}
	}
	if checked == 0 {
		t.Fatalf("d is a copy of no partition that had records: %v", held)
	}
}

// dashboardSeries are the series the Grafana dashboard in docs/grafana
// queries, without histogram suffixes.
func dashboardSeries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "gantry-cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("docs/grafana/gantry-cluster.json: %v", err)
	}
	re := regexp.MustCompile(`\b(?:gantry|coreflux)_[a-z_]+`)
	var names []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range re.FindAllString(tg.Expr, -1) {
				n = strings.TrimSuffix(n, "_bucket")
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// TestGrafanaDashboardSeriesExist: every series the operator's dashboard
// queries is exported by a clustered node with durability.
func TestGrafanaDashboardSeriesExist(t *testing.T) {
	nodes := dataPlaneCluster(t, 3)
	a := nodes[0]
	publishCode(t, a.addr(), "dash-pub", "dash/x", "one")
	resp, err := http.Get("http://" + a.ip + ":9100/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			exported[strings.Fields(line)[2]] = true
		}
	}
	for _, n := range dashboardSeries(t) {
		if !exported[n] {
			t.Errorf("the dashboard queries %s, which /metrics does not export", n)
		}
	}
}

// rawV5 is a bare MQTT 5 connection, for packets a client library will
// not send on demand (a QoS 2 resend with DUP on another node).
type rawV5 struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	v  packet.Version
}

func dialRawV5(t *testing.T, addr, clientID string) *rawV5 {
	return dialRaw(t, addr, clientID, packet.V5)
}

func dialRaw(t *testing.T, addr, clientID string, v packet.Version) *rawV5 {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawV5{t: t, nc: nc, br: bufio.NewReader(nc), v: v}
	c := packet.Connect{ProtocolName: "MQTT", Version: v, KeepAlive: 60, ClientID: clientID, CleanStart: true}
	r.write(c.Append(nil))
	if ack := r.read(); ack.(*packet.Connack).ReasonCode.IsError() {
		t.Fatalf("CONNACK %v", ack.(*packet.Connack).ReasonCode)
	}
	return r
}

func (r *rawV5) write(b []byte) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawV5) read() any {
	r.t.Helper()
	p, err := r.next()
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// next reads the next packet, or the error that ended the connection.
func (r *rawV5) next() (any, error) {
	r.nc.SetReadDeadline(time.Now().Add(crashWait))
	var hdr []byte
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		hdr = append(hdr, b)
		if len(hdr) >= 2 && (b&0x80 == 0 || len(hdr) == 5) {
			break
		}
	}
	h, _, err := packet.DecodeFixedHeader(hdr)
	if err != nil {
		return nil, err
	}
	body := make([]byte, h.Remaining)
	if _, err := io.ReadFull(r.br, body); err != nil {
		return nil, err
	}
	return packet.Decode(h, body, r.v)
}

// expectAck reads the next packet, which must be an acknowledgement of
// type want for pid, and returns its reason code.
func (r *rawV5) expectAck(want packet.Type, pid uint16) packet.ReasonCode {
	r.t.Helper()
	a, ok := r.read().(*packet.Ack)
	if !ok || a.Type != want || a.PacketID != pid {
		r.t.Fatalf("got %+v, want %v for packet %d", a, want, pid)
	}
	return a.ReasonCode
}

// TestQuorumQoS2ResentAfterFailoverDeliveredOnce: a QoS 2 message
// acknowledged (PUBREC) by a, whose node is then killed before PUBREL,
// and sent again with DUP on b, is recognised there from b's copy of the
// partition: b answers PUBREC and PUBCOMP and does not deliver it again.
func TestQuorumQoS2ResentAfterFailoverDeliveredOnce(t *testing.T) { qos2ResentAfterFailover(t, false) }

// TestQuorumQoS2ResentAfterCopyRestartDeliveredOnce: the same when b was
// killed and restarted between the PUBREC and the failover: b recognises
// the resend from its copy on disk (the QoS 2 index is stored with it).
func TestQuorumQoS2ResentAfterCopyRestartDeliveredOnce(t *testing.T) {
	qos2ResentAfterFailover(t, true)
}

func qos2ResentAfterFailover(t *testing.T, restartB bool) {
	nodes := dataPlaneCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	var got collector
	defer closeV5(subscribeV5(t, c.addr(), "sub-c", 0, "exactly/#", 2, &got))
	interestKnown(t, a, "broker-c") // a SUBACK waits at most 2 s for the peers
	pub := packet.Publish{QoS: 2, PacketID: 7, Topic: []byte("exactly/once"), Payload: []byte("only-once")}
	copiedOnB := replicationView(t, b.ip).Copied
	ra := dialRawV5(t, a.addr(), "qos2-publisher")
	ra.write(pub.Append(nil, packet.V5))
	if rc := ra.expectAck(packet.PUBREC, 7); rc != packet.Success {
		t.Fatalf("PUBREC on a: %v", rc)
	}
	eventually(t, 10*time.Second, func() error { return got.has("only-once") })
	// The PUBREC needs a and one other copy: wait until b is one of them
	// (the case under test: the node the publisher resends on holds it).
	eventually(t, 10*time.Second, func() error {
		if n := replicationView(t, b.ip).Copied; n <= copiedOnB {
			return fmt.Errorf("b stored no copy of the message yet (%d)", n)
		}
		return nil
	})
	if restartB {
		b.kill()
		b.start()
		linksUp(t, nodes)
	}
	// b may hold the copy before it applied a partition map of its own
	// (a write it got as a replica of a's map): without one it cannot
	// tell the resend's partition and refuses it, "Cluster starting".
	eventually(t, 10*time.Second, func() error {
		if v := replicationView(t, b.ip).MapVersion; v == 0 {
			return errors.New("b has no partition map yet")
		}
		return nil
	})
	a.kill() // before PUBREL: the publisher resends on another node
	rb := dialRawV5(t, b.addr(), "qos2-publisher")
	pub.Dup = true
	rb.write(pub.Append(nil, packet.V5))
	if rc := rb.expectAck(packet.PUBREC, 7); rc != packet.Success {
		dp, _ := dataPlaneView(b.ip)
		t.Fatalf("PUBREC of the resend on b: %v %+v %+v", rc, dp.Replication, dp.Peers)
	}
	rel := packet.Ack{Type: packet.PUBREL, PacketID: 7}
	rb.write(rel.Append(nil, packet.V5))
	if rc := rb.expectAck(packet.PUBCOMP, 7); rc != packet.Success {
		t.Fatalf("PUBCOMP on b: %v", rc)
	}
	// A marker published after the resend: once it arrived, so would
	// have a second copy.
	publishV5(t, b.addr(), "exactly/marker", "marker", 2)
	eventually(t, 10*time.Second, func() error { return got.has("marker") })
	if n := got.count("only-once"); n != 1 {
		// Which side missed it: b not recognising the resend (a new write
		// there), or c not dropping it under its first identity.
		rb, rc := replicationView(t, b.ip), replicationView(t, c.ip)
		t.Fatalf("the QoS 2 message reached the subscriber %d times, want once (b: %d resends recognised, map %d; c: %d replay copies dropped, map %d)",
			n, rb.QoS2Resent, rb.MapVersion, rc.ReplayDuplicates, rc.MapVersion)
	}
}

// TestQuorumClusterStarting: a node whose cluster has not formed yet (its
// seeds do not answer, bootstrap still waits) refuses QoS 1 with 0x97
// "Cluster starting", and QoS 0 goes through.
func TestQuorumClusterStarting(t *testing.T) {
	nodes := clusterOf(t, 2, func(nd *crashNode) {
		nd.held = strings.HasSuffix(nd.ip, ".2")
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS=600")
		add := exec.Command(nd.bin, "-addUser", "cluster", clusterUserPassword)
		add.Env = nd.env()
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("-addUser cluster: %v\n%s", err, out)
		}
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_DATAPLANE_USERNAME=cluster")
	})
	a := nodes[0]
	r := dialRawV5(t, a.addr(), "early-bird")
	pub := packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("start/x"), Payload: []byte("too-early")}
	r.write(pub.Append(nil, packet.V5))
	ack, ok := r.read().(*packet.Ack)
	if !ok || ack.ReasonCode != packet.QuotaExceeded || ack.Props.ReasonString != "Cluster starting" {
		t.Fatalf("QoS 1 before the cluster formed: %+v, want PUBACK 0x97 \"Cluster starting\"", ack)
	}
	publishV5(t, a.addr(), "start/x", "qos0", 0)
}

// TestQuorumGateOff: with QuorumGateEnabled false a publish is
// acknowledged once the receiving node has it, majority or not.
func TestQuorumGateOff(t *testing.T) {
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_QUORUM_GATE=false")
	})
	a, b, c := nodes[0], nodes[1], nodes[2]
	var got collector
	defer closeV5(subscribeV5(t, a.addr(), "local-sub", 0, "nogate/#", 1, &got))
	b.kill()
	c.kill()
	if code, text := publishCode(t, a.addr(), "pub-nogate", "nogate/1", "alone"); code != 0 {
		t.Fatalf("ungated publish on a node alone: reason %#x %q", code, text)
	}
	eventually(t, 10*time.Second, func() error { return got.has("alone") })
}

// TestQuorumInMemory: without durability the copies are in memory and a
// QoS 1 publish is acknowledged and delivered across nodes all the same.
func TestQuorumInMemory(t *testing.T) {
	nodes := dataPlaneCluster(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_DURABILITY_ENABLED=false")
	})
	a, b := nodes[0], nodes[1]
	var got collector
	defer closeV5(subscribeV5(t, b.addr(), "sub-b", 0, "mem/#", 1, &got))
	for i := range 5 {
		if code, text := publishCode(t, a.addr(), fmt.Sprint("mem-pub-", i), "mem/x", fmt.Sprint("in-memory-", i)); code != 0 {
			t.Fatalf("publish %d without durability: reason %#x %q", i, code, text)
		}
	}
	eventually(t, 10*time.Second, func() error { return got.has("in-memory-0", "in-memory-4") })
}

// interestKnown waits until nd knows peer's subscriptions (its announced
// filters reached nd), which a SUBACK under load does not wait for beyond
// its bound.
func interestKnown(t *testing.T, nd *crashNode, peer string) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		dp, err := dataPlaneView(nd.ip)
		if err != nil {
			return err
		}
		for _, p := range dp.Peers {
			if p.Name == peer && p.InterestFresh && p.InterestFilters > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s does not know %s's filters yet: %+v", nd.ip, peer, dp.Peers)
	})
}
