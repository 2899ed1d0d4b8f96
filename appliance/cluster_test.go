package appliance_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"gantry/cluster"
)

// clusterOf starts n gantry processes on 127.a.b.1..n with the default
// ports, configured as the seed document's "Seeds" example adapted to
// loopback addresses. setup, when given, runs on each node before it
// starts.
func clusterOf(t *testing.T, n int, setup ...func(*crashNode)) []*crashNode {
	bin := gantryBinary(t)
	prefix := fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), 1+rand.IntN(250))
	var seeds []string
	for i := range n {
		seeds = append(seeds, fmt.Sprintf("%s%d:9200", prefix, i+1))
	}
	nodes := make([]*crashNode, n)
	for i := range n {
		nodes[i] = &crashNode{t: t, bin: bin, ip: fmt.Sprintf("%s%d", prefix, i+1), dataDir: t.TempDir(),
			extra: []string{
				"COREFLUX_OPS_PORT=9100",
				"COREFLUX_CLUSTER_ENABLED=true",
				"COREFLUX_CLUSTER_ID=factory-floor",
				"COREFLUX_CLUSTER_NODE_NAME=broker-" + string(rune('a'+i)),
				"COREFLUX_CLUSTER_DISCOVERY=seeds",
				"COREFLUX_CLUSTER_SEEDS=" + strings.Join(seeds, ","),
				"COREFLUX_CLUSTER_SHARED_SECRET=a-long-random-secret",
				"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS=1",
			}}
	}
	for _, nd := range nodes {
		for _, f := range setup {
			f(nd)
		}
		if !nd.held {
			nd.start()
		}
		t.Cleanup(nd.kill)
	}
	return nodes
}

func clusterView(ip string) (cluster.Status, error) {
	var st cluster.Status
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get("http://" + ip + ":9100/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// agreeOnLeader waits until every node of nodes names the same leader,
// other than not, with want members, the leader seeing all alive (when
// it is among nodes).
func agreeOnLeader(t *testing.T, nodes []*crashNode, want int, timeout time.Duration, not string) string {
	t.Helper()
	var leader string
	eventuallyEvery(t, timeout, 10*time.Millisecond, func() error {
		leader = ""
		for _, nd := range nodes {
			st, err := clusterView(nd.ip)
			if err != nil {
				return err
			}
			l := st.Leadership.Leader
			switch {
			case !st.Enabled:
				return fmt.Errorf("%s: clustering off: %v", nd.ip, st.Problems)
			case l == "" || l == not:
				return fmt.Errorf("%s follows %q", st.NodeName, l)
			case leader != "" && l != leader:
				return fmt.Errorf("%s follows %s, another node %s", st.NodeName, l, leader)
			case st.MembersTotal != want:
				return fmt.Errorf("%s lists %d members, want %d", st.NodeName, st.MembersTotal, want)
			case st.Leadership.IsLeader && st.MembersAlive != want && not == "":
				return fmt.Errorf("leader %s sees %d alive, want %d", st.NodeName, st.MembersAlive, want)
			case st.Leadership.IsLeader && !allVote(st):
				return fmt.Errorf("leader %s: not every member votes yet: %+v", st.NodeName, st.Members)
			}
			leader = l
		}
		return nil
	})
	return leader
}

func allVote(st cluster.Status) bool {
	for _, m := range st.Members {
		if !m.Voter {
			return false
		}
	}
	return true
}

func eventuallyEvery(t *testing.T, timeout, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(every)
	}
}

func byName(nodes []*crashNode, name string) (*crashNode, []*crashNode) {
	var me *crashNode
	var rest []*crashNode
	for i, nd := range nodes {
		if "broker-"+string(rune('a'+i)) == name {
			me = nd
		} else {
			rest = append(rest, nd)
		}
	}
	return me, rest
}

// TestBinaryClusterFailover runs three gantry processes as the seed
// document's seeds example: they form one cluster; the leader killed with
// kill -9, and then a leader frozen with SIGSTOP, are each replaced within
// a second; the killed node rejoins on restart.
func TestBinaryClusterFailover(t *testing.T) {
	nodes := clusterOf(t, 3)
	leader := agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	t.Logf("formed: leader %s", leader)

	victim, rest := byName(nodes, leader)
	start := time.Now()
	victim.kill()
	next := agreeOnLeader(t, rest, 3, 5*time.Second, leader)
	took := time.Since(start)
	t.Logf("kill -9 of leader %s: %s leads after %v", leader, next, took)
	if took > time.Second {
		t.Errorf("new leader %v after kill -9, want under 1 s", took)
	}
	victim.start()
	agreeOnLeader(t, nodes, 3, 15*time.Second, "")

	frozen, rest := byName(nodes, next)
	start = time.Now()
	frozen.cmd.Process.Signal(syscall.SIGSTOP)
	third := agreeOnLeader(t, rest, 3, 5*time.Second, next)
	took = time.Since(start)
	t.Logf("SIGSTOP of leader %s: %s leads after %v", next, third, took)
	if took > time.Second {
		t.Errorf("new leader %v after SIGSTOP, want under 1 s", took)
	}
	frozen.cmd.Process.Signal(syscall.SIGCONT)
	t.Logf("after SIGCONT the leader is %s", agreeOnLeader(t, nodes, 3, 15*time.Second, ""))
}

// TestSingleNodeClusterOps runs one node with clustering on and only
// itself as seed: it forms a one-member cluster after the bootstrap grace,
// and /cluster, /info, /metrics and the retained $SYS/Coreflux/Cluster
// topics report it.
func TestSingleNodeClusterOps(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	ip := loopbackIP()
	startNodeAt(t, ip, map[string]string{
		"COREFLUX_CLUSTER_ENABLED":                 "true",
		"COREFLUX_CLUSTER_NODE_NAME":               "solo",
		"COREFLUX_CLUSTER_DISCOVERY":               "seeds",
		"COREFLUX_CLUSTER_SEEDS":                   ip + ":9200",
		"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS": "1",
	})
	agreeOnLeader(t, []*crashNode{{ip: ip}}, 1, 15*time.Second, "")
	var st cluster.Status
	eventually(t, 5*time.Second, func() (err error) {
		if st, err = clusterView(ip); err == nil && st.Partitions.Version == 0 {
			err = fmt.Errorf("no partition map yet")
		}
		return err
	})
	if st.ClusterID != "coreflux-cluster" || !st.Leadership.IsLeader || len(st.Partitions.Partitions) != 32 ||
		st.OwnedByMe != 32 || st.Members[0].Address != ip+":9200" {
		t.Errorf("/cluster = %+v", st)
	}
	resp, err := http.Get("http://" + ip + ":9100/info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Cluster map[string]any }
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.Cluster["role"] != "leader" || info.Cluster["leader"] != "solo" || info.Cluster["membersTotal"] != 1.0 {
		t.Errorf("/info cluster = %v", info.Cluster)
	}
	m := scrape(t, ip)
	for name, want := range map[string]float64{"coreflux_cluster_is_leader": 1, "coreflux_cluster_members_total": 1,
		"coreflux_partitions_total": 32, "coreflux_partitions_owned": 32} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
	eventually(t, 10*time.Second, func() error {
		out, err := exec.Command(sub, "-h", ip, "-t", "$SYS/Coreflux/Cluster/#", "-v", "-C", "6", "-W", "3").CombinedOutput()
		got := string(out)
		for _, want := range []string{"Cluster/Role leader", "Cluster/IsLeader true", "Cluster/Leader solo", "Cluster/Members 1", `"leader":"solo"`} {
			if !strings.Contains(got, want) {
				return fmt.Errorf("$SYS/Coreflux/Cluster/#: %v %q lacks %q", err, got, want)
			}
		}
		return nil
	})
}

// TestBadClusterValueKeepsNodeUp: a Cluster value out of range does not
// stop the node; clustering stays off and /cluster says why.
func TestBadClusterValueKeepsNodeUp(t *testing.T) {
	_, ip := startNode(t, map[string]string{
		"COREFLUX_CLUSTER_ENABLED":         "true",
		"COREFLUX_CLUSTER_PARTITION_COUNT": "0",
	})
	st, err := clusterView(ip)
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "Cluster.PartitionCount = 0, want 1..4096") {
		t.Errorf("/cluster = %+v, want enabled false naming Cluster.PartitionCount", st)
	}
}

// TestBusyClusterPortKeepsNodeUp: a cluster port already in use stops
// clustering, not the broker.
func TestBusyClusterPortKeepsNodeUp(t *testing.T) {
	ip := loopbackIP()
	l, err := net.Listen("tcp", ip+":9200")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startNodeAt(t, ip, map[string]string{"COREFLUX_CLUSTER_ENABLED": "true", "COREFLUX_CLUSTER_DISCOVERY": "seeds",
		"COREFLUX_CLUSTER_SEEDS": ip + ":9200"})
	st, err := clusterView(ip)
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "9200") {
		t.Errorf("/cluster = %+v, want enabled false naming the busy port", st)
	}
}

// TestBinaryKillLeaderOnceHealthy runs three fresh gantry processes and
// kills the leader with kill -9 the moment the seed document's health
// check first passes (the same leader on every node, membersTotal 3
// everywhere, membersAlive equal to membersTotal on the leader): every
// member votes by then, so the two others elect a new leader.
func TestBinaryKillLeaderOnceHealthy(t *testing.T) {
	nodes := clusterOf(t, 3)
	var leader string
	var leaderView cluster.Status
	eventuallyEvery(t, 30*time.Second, 2*time.Millisecond, func() error {
		leader = ""
		for _, nd := range nodes {
			st, err := clusterView(nd.ip)
			if err != nil {
				return err
			}
			switch l := st.Leadership.Leader; {
			case l == "" || (leader != "" && l != leader):
				return fmt.Errorf("%s follows %q, another node %q", st.NodeName, l, leader)
			case st.MembersTotal != 3:
				return fmt.Errorf("%s lists %d members", st.NodeName, st.MembersTotal)
			case st.Leadership.IsLeader && st.MembersAlive != st.MembersTotal:
				return fmt.Errorf("leader %s sees %d of %d alive", st.NodeName, st.MembersAlive, st.MembersTotal)
			case st.Leadership.IsLeader:
				leaderView = st
			}
			leader = st.Leadership.Leader
		}
		return nil
	})
	if leaderView.Voters != 3 || !allVote(leaderView) {
		t.Errorf("healthy by the seed's check, but the leader's /cluster shows voters %d: %+v", leaderView.Voters, leaderView.Members)
	}
	victim, rest := byName(nodes, leader)
	victim.kill()
	start := time.Now()
	next := agreeOnLeader(t, rest, 3, 5*time.Second, leader)
	t.Logf("kill -9 of leader %s as soon as the cluster looked healthy: %s leads after %v", leader, next, time.Since(start))
}
