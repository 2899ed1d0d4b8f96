// Command crossnode measures what the cluster's data plane costs: the same
// closed-loop load (build/bench/load) against one node without clustering,
// and against three clustered loopback nodes with the publishers on one
// node and the subscribers on another, rounds alternating side by side.
// It prints a Markdown table of deliveries/s and the cross-node ratio.
//
// With -quorum it measures the quorum write instead (durability on every
// node): QoS 1 publishes acknowledged per second on the three nodes, each
// stored on a majority of its partition's copies, against one durable
// node; and one publishing connection with 1 against 100 publishes in
// flight (its PUBACK window, up to the broker's Receive Maximum).
//
//	go run ./build/bench/crossnode -gantry bin/gantry [-rounds 2] [-duration 2s] [-durable] [-quorum]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gantry/build/bench/load"
)

func main() {
	bin := flag.String("gantry", "bin/gantry", "the gantry binary")
	rounds := flag.Int("rounds", 2, "rounds per variant, single node and cluster alternating")
	duration := flag.Duration("duration", 2*time.Second, "measurement window per run")
	warmup := flag.Duration("warmup", time.Second, "load before the window")
	durable := flag.Bool("durable", false, "durability on every node (QoS 1 acknowledged after fsync)")
	quorum := flag.Bool("quorum", false, "measure the quorum write (acknowledged publishes/s; implies -durable)")
	profile = flag.Bool("pprof", false, "serve the cluster nodes' profiles on 127.0.0.1:6060, 6061, 6062 and the single node's on 6063 (GANTRY_PPROF)")
	flag.StringVar(&only, "only", "", "run only this scenario and QoS (fanin:0, fanin:1, pairs:0, pairs:1), e.g. to profile it with -pprof")
	flag.DurationVar(&drain, "drain", 2*time.Second, "how long the offline subscriber's collection waits without progress before the rest counts as lost")
	flag.Parse()
	if *quorum {
		*durable = true
	}
	if err := run(*bin, *rounds, *duration, *warmup, *durable, *quorum); err != nil {
		fmt.Fprintln(os.Stderr, "crossnode:", err)
		os.Exit(1)
	}
}

var profile *bool

// only, when set, names the one scenario and QoS to run (-only).
var only string

// drain is how long the offline subscriber's collection waits without
// progress before the rest counts as lost (load.Config.Drain).
var drain time.Duration

type node struct {
	ip   string
	dir  string
	cmd  *exec.Cmd
	name string
}

func (n *node) mqtt() string { return net.JoinHostPort(n.ip, "1883") }

func run(bin string, rounds int, duration, warmup time.Duration, durable, quorum bool) error {
	root, err := os.MkdirTemp("", "gantry-crossnode-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	single := &node{ip: "127.0.91.1", dir: filepath.Join(root, "single"), name: "single"}
	var cluster []*node
	var seeds []string
	for i := range 3 {
		n := &node{ip: fmt.Sprintf("127.0.92.%d", i+1), dir: filepath.Join(root, fmt.Sprint("node-", i)), name: fmt.Sprint("broker-", i)}
		cluster = append(cluster, n)
		seeds = append(seeds, n.ip+":9200")
	}
	queued := 100000
	if quorum {
		queued = 10_000_000 // the offline subscriber holds every acknowledged publish of the run
	}
	base := func(n *node) []string {
		return append(os.Environ(), "COREFLUX_DATA_DIR="+n.dir, "COREFLUX_MQTT_BIND_IP="+n.ip,
			"COREFLUX_MQTT_WEBSOCKET_PORT=0", "COREFLUX_OPS_PORT=9100", "COREFLUX_OPS_SYS_INTERVAL_SECONDS=0",
			"COREFLUX_LOG_LEVEL=warn", fmt.Sprint("COREFLUX_DURABILITY_ENABLED=", durable),
			fmt.Sprint("COREFLUX_MQTT_MAX_QUEUED_MESSAGES=", queued))
	}
	defer func() {
		for _, n := range append(cluster, single) {
			if n.cmd != nil {
				n.cmd.Process.Kill()
				n.cmd.Wait()
			}
		}
	}()
	singleEnv := base(single)
	if *profile {
		singleEnv = append(singleEnv, "GANTRY_PPROF=127.0.0.1:6063")
	}
	if err := start(bin, single, singleEnv); err != nil {
		return err
	}
	for i, n := range cluster {
		env := append(base(n), "COREFLUX_CLUSTER_ENABLED=true", "COREFLUX_CLUSTER_ID=bench",
			"COREFLUX_CLUSTER_NODE_NAME="+n.name, "COREFLUX_CLUSTER_DISCOVERY=seeds",
			"COREFLUX_CLUSTER_SEEDS="+strings.Join(seeds, ","), "COREFLUX_CLUSTER_SHARED_SECRET=bench-secret",
			"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS=1", "COREFLUX_CLUSTER_DATAPLANE_USERNAME=cluster",
			// Every publish of the closed loop in flight at once may wait for its
			// majority (100 publishers x 64): beyond the window a publish is refused.
			"COREFLUX_CLUSTER_REPLICATION_WINDOW=65536")
		if *profile {
			env = append(env, fmt.Sprintf("GANTRY_PPROF=127.0.0.1:%d", 6060+i)) // go tool pprof http://127.0.0.1:6060/debug/pprof/profile
		}
		add := exec.Command(bin, "-addUser", "cluster", "bench-password")
		add.Env = env
		if out, err := add.CombinedOutput(); err != nil {
			return fmt.Errorf("-addUser: %v %s", err, out)
		}
		if err := start(bin, n, env); err != nil {
			return err
		}
	}
	if err := linksUp(cluster, 60*time.Second); err != nil {
		return err
	}
	if quorum {
		return runQuorum(single, cluster, rounds, duration, warmup)
	}
	scenarios := []load.Scenario{
		{Name: "fanin", Topology: load.FanIn, Clients: 100, Window: 64},
		{Name: "pairs", Topology: load.Pairs, Clients: 100, Window: 64},
	}
	// Deliveries per CPU second of the brokers (the three nodes summed)
	// too: on a shared machine the rates swing with other work, what a
	// message costs much less.
	fmt.Printf("| scenario | QoS | one node (deliveries/s) | cross-node (deliveries/s) | cross-node / one node | one node (per CPU s) | cross-node (per CPU s, 3 nodes) | per CPU / one node | lost |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scenarios {
		for _, qos := range []byte{0, 1} {
			if only != "" && only != fmt.Sprintf("%s:%d", sc.Name, qos) {
				continue
			}
			var one, cross, oneCPU, crossCPU []float64
			lost := uint64(0)
			for range rounds {
				for _, cross3 := range []bool{false, true} {
					cfg := load.Config{QoS: qos, PayloadSize: 16, Warmup: warmup, Duration: duration, Addr: single.mqtt()}
					procs := []*node{single}
					if cross3 {
						cfg.Addr, cfg.SubAddr = cluster[0].mqtt(), cluster[1].mqtt()
						procs = cluster
					}
					cfg.Probe = func() (load.Usage, error) { return cpuOf(procs) }
					ctx, cancel := context.WithTimeout(context.Background(), duration+warmup+30*time.Second)
					res, err := load.Run(ctx, sc, cfg)
					cancel()
					if err != nil {
						return fmt.Errorf("%s qos %d cross=%v: %w", sc.Name, qos, cross3, err)
					}
					lost += res.Lost
					perCPU := 0.0
					if res.BrokerCPU > 0 {
						perCPU = res.OutRate * res.Elapsed.Seconds() / res.BrokerCPU.Seconds()
					}
					if cross3 {
						cross, crossCPU = append(cross, res.OutRate), append(crossCPU, perCPU)
					} else {
						one, oneCPU = append(one, res.OutRate), append(oneCPU, perCPU)
					}
				}
			}
			o, c, oc, cc := median(one), median(cross), median(oneCPU), median(crossCPU)
			fmt.Printf("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %d |\n", sc.Name, qos, o, c, c/o, oc, cc, cc/oc, lost)
		}
	}
	return nil
}

func start(bin string, n *node, env []string) error {
	n.cmd = exec.Command(bin, "-dev")
	n.cmd.Env = env
	if err := n.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", n.mqtt(), 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond) // a process starting: nothing to wait on but its port
	}
	return fmt.Errorf("%s does not listen on %s", n.name, n.mqtt())
}

// linksUp waits until every node reports a link to each other node.
func linksUp(nodes []*node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for _, n := range nodes {
			var v struct {
				DataPlane *struct {
					Peers []struct {
						Connected bool `json:"connected"`
					} `json:"peers"`
				} `json:"dataPlane"`
			}
			resp, err := http.Get("http://" + n.ip + ":9100/cluster")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
			}
			up := 0
			if err == nil && v.DataPlane != nil {
				for _, p := range v.DataPlane.Peers {
					if p.Connected {
						up++
					}
				}
			}
			if err != nil || up != len(nodes)-1 {
				last = fmt.Errorf("%s: %d links up (%v)", n.name, up, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// runQuorum prints the quorum write's two tables.
func runQuorum(single *node, cluster []*node, rounds int, duration, warmup time.Duration) error {
	// Per variant (one node; three with the subscriber on the publishers'
	// node; three with it on another node): acknowledged per CPU second of
	// the broker processes, and of the busiest one.
	var perCPU, perBusy [3][]float64
	variant := 0
	measure := func(sc load.Scenario, addr, subAddr string, procs ...*node) (float64, uint64, error) {
		cfg := load.Config{QoS: 1, PayloadSize: 16, Warmup: warmup, Duration: duration, Addr: addr, SubAddr: subAddr, Drain: drain}
		var snaps [][]time.Duration // each probe's CPU per process
		if len(procs) > 0 {
			cfg.Probe = func() (load.Usage, error) {
				var u load.Usage
				per := make([]time.Duration, len(procs))
				for i, n := range procs {
					pu, err := cpuOf([]*node{n})
					if err != nil {
						return u, err
					}
					per[i], u.CPU = pu.CPU, u.CPU+pu.CPU
				}
				snaps = append(snaps, per)
				return u, nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), duration+warmup+60*time.Second)
		defer cancel()
		res, err := load.Run(ctx, sc, cfg)
		if err != nil {
			return 0, 0, fmt.Errorf("%s on %s: %w", sc.Name, addr, err)
		}
		if len(procs) > 0 && res.BrokerCPU > 0 {
			i := variant
			perCPU[i] = append(perCPU[i], res.OutRate*res.Elapsed.Seconds()/res.BrokerCPU.Seconds())
			if len(snaps) >= 2 {
				var busiest time.Duration
				for j := range procs {
					busiest = max(busiest, snaps[len(snaps)-1][j]-snaps[0][j])
				}
				if busiest > 0 {
					perBusy[i] = append(perBusy[i], res.OutRate*res.Elapsed.Seconds()/busiest.Seconds())
				}
			}
		}
		return res.OutRate, res.Lost, nil
	}
	many := load.Scenario{Name: "durable", Topology: load.Offline, Clients: 50, Window: 16}
	var acked [3][]float64
	var lost [3]uint64 // per variant: an acknowledged publish the offline subscriber never got
	for range rounds {
		for v, at := range [][2]string{{single.mqtt(), ""}, {cluster[0].mqtt(), ""}, {cluster[0].mqtt(), cluster[1].mqtt()}} {
			procs := cluster
			if v == 0 {
				procs = []*node{single}
			}
			variant = v
			r, l, err := measure(many, at[0], at[1], procs...)
			if err != nil {
				return err
			}
			acked[v] = append(acked[v], r)
			lost[v] += l
		}
	}
	row := func(name string, xs [3][]float64, end string) {
		one := median(xs[0])
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %.0f | %.2f |%s\n", name, one, median(xs[1]), median(xs[1])/one,
			median(xs[2]), median(xs[2])/one, end)
	}
	fmt.Printf("| QoS 1, 50 publishers, 16 in flight each | one durable node | 3 nodes, quorum, subscriber on the publishers' node | / one node | 3 nodes, quorum, subscriber on another node | / one node | lost (one node / publishers' node / another node) |\n|---|---|---|---|---|---|---|\n")
	row("acknowledged/s", acked, fmt.Sprintf(" %d / %d / %d |", lost[0], lost[1], lost[2]))
	row("acknowledged per CPU second of the brokers (all three nodes' summed)", perCPU, " |")
	// With a core per node (gateways each have their own), the busiest
	// node bounds the cluster: this row is what the shared cores of one
	// test machine hide.
	row("acknowledged per CPU second of the busiest broker (a core per node)", perBusy, " |")
	fmt.Println()
	variant = 1
	var w1, w100 []float64
	var lostW uint64
	for range rounds {
		for _, w := range []int{1, 100} {
			r, l, err := measure(load.Scenario{Name: fmt.Sprint("window-", w), Topology: load.Offline, Clients: 1, Window: w}, cluster[0].mqtt(), "")
			if err != nil {
				return err
			}
			lostW += l
			if w == 1 {
				w1 = append(w1, r)
			} else {
				w100 = append(w100, r)
			}
		}
	}
	fmt.Printf("| one connection, 3 nodes, quorum | 1 in flight (acknowledged/s) | 100 in flight (acknowledged/s) | 100 / 1 | lost |\n|---|---|---|---|---|\n")
	fmt.Printf("| pipelining | %.0f | %.0f | %.1f | %d |\n", median(w1), median(w100), median(w100)/median(w1), lostW)
	return nil
}

// cpuOf sums the user and system time of the nodes' processes
// (/proc/PID/stat, clock ticks of 10 ms).
func cpuOf(nodes []*node) (load.Usage, error) {
	var u load.Usage
	for _, n := range nodes {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
		if err != nil {
			return u, err
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 13 {
			return u, fmt.Errorf("/proc/%d/stat: %d fields", n.cmd.Process.Pid, len(f))
		}
		var ut, st int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		u.CPU += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return u, nil
}
