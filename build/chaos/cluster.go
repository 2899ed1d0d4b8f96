package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clusterOptions says how to run one cluster.
type clusterOptions struct {
	Nodes int
	Bin   string // the gantry binary
	Dir   string // parent of the data directories
	// Netns runs every node in its own network namespace (root only), so
	// that partitions can be cut; otherwise loopback addresses.
	Netns bool
	// FullDiskNode is the index of the node whose data directory is a
	// tmpfs of TmpfsSize (root only), -1 for none.
	FullDiskNode int
	TmpfsSize    string
	Log          *slog.Logger
	Logs         string // a directory for every node's log, "" for none
}

// cluster is n gantry processes set up as the seed's quick start with
// seeds discovery: the cluster user on every node, durability on, one
// ClusterId and SharedSecret.
type cluster struct {
	nodes  []*node
	net    network
	mounts []string // tmpfs mount points, unmounted by close
	log    *slog.Logger
}

func newCluster(o clusterOptions) (c *cluster, err error) {
	tag := fmt.Sprintf("gch%04x", rand.IntN(1<<16))
	c = &cluster{log: o.Log}
	if o.Netns {
		nw, err := newNetnsNet(tag)
		if err != nil {
			return nil, err
		}
		c.net = nw
	} else {
		c.net = &loopbackNet{prefix: fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), 1+rand.IntN(250))}
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	var seeds []string
	for i := range o.Nodes {
		n := &node{name: "broker-" + string(rune('a'+i)), bin: o.Bin, dataDir: filepath.Join(o.Dir, tag, fmt.Sprint("node-", i+1))}
		if o.Logs != "" {
			if n.logFile, err = os.Create(filepath.Join(o.Logs, fmt.Sprintf("%s-%d-%s.log", tag, o.Nodes, n.name))); err != nil {
				return c, err
			}
		}
		if err := c.net.place(n, i); err != nil {
			return c, err
		}
		if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
			return c, err
		}
		if i == o.FullDiskNode {
			if err := c.mountTmpfs(n.dataDir, o.TmpfsSize); err != nil {
				return c, err
			}
		}
		seeds = append(seeds, n.ip+":9200")
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.env = []string{
			"COREFLUX_DURABILITY_ENABLED=true",
			"COREFLUX_DATA_DIR=" + n.dataDir,
			"COREFLUX_MQTT_BIND_IP=" + n.ip,
			"COREFLUX_MQTT_ANONYMOUS_LOOPBACK_ONLY=false", // the harness connects from the bridge
			"COREFLUX_OPS_SYS_INTERVAL_SECONDS=0",
			"COREFLUX_MQTT_WEBSOCKET_PORT=0",
			"COREFLUX_OPS_PORT=9100",
			"COREFLUX_CLUSTER_ENABLED=true",
			"COREFLUX_CLUSTER_ID=factory-floor",
			"COREFLUX_CLUSTER_NODE_NAME=" + n.name,
			"COREFLUX_CLUSTER_DISCOVERY=seeds",
			"COREFLUX_CLUSTER_SEEDS=" + strings.Join(seeds, ","),
			"COREFLUX_CLUSTER_SHARED_SECRET=a-long-random-secret",
			"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS=1",
		}
		if err := n.addClusterUser(); err != nil {
			return c, err
		}
		n.env = append(n.env, "COREFLUX_CLUSTER_DATAPLANE_USERNAME="+clusterUser)
	}
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return c, err
		}
	}
	return c, c.waitHealthy(90 * time.Second)
}

func (c *cluster) mountTmpfs(dir, size string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root to mount a tmpfs for the full-disk node")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	c.mounts = append(c.mounts, dir)
	return nil
}

// close kills every node, unmounts the tmpfs and deletes the namespaces.
func (c *cluster) close() error {
	var errs []error
	for _, n := range c.nodes {
		if n.running() {
			if err := n.kill(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	for _, m := range c.mounts {
		if out, err := exec.Command("umount", m).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("umount %s: %v: %s", m, err, out))
		}
	}
	errs = append(errs, c.net.close())
	for _, n := range c.nodes {
		if n.logFile != nil {
			n.logFile.Close()
		}
	}
	return errors.Join(errs...)
}

func (c *cluster) byName(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// view is what the harness reads of GET /cluster; raw keeps all of it for
// the fields read tolerantly (partitions).
type view struct {
	Enabled    bool   `json:"enabled"`
	NodeName   string `json:"nodeName"`
	Leadership struct {
		Leader   string `json:"leader"`
		IsLeader bool   `json:"isLeader"`
		Term     uint64 `json:"term"`
	} `json:"leadership"`
	MembersTotal int `json:"membersTotal"`
	MembersAlive int `json:"membersAlive"`
	Members      []struct {
		Name  string `json:"name"`
		Voter bool   `json:"voter"`
		State string `json:"state"`
	} `json:"members"`
	DataPlane *struct {
		Peers []struct {
			Name      string `json:"name"`
			Connected bool   `json:"connected"`
			Backlog   int    `json:"backlog"`
		} `json:"peers"`
	} `json:"dataPlane"`
	raw map[string]any
}

var opsClient = &http.Client{Timeout: 2 * time.Second}

func getView(ip string) (view, error) {
	var v view
	resp, err := opsClient.Get("http://" + ip + ":9100/cluster")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%s: GET /cluster: %w", ip, err)
	}
	return v, json.Unmarshal(body, &v.raw)
}

// healthy says why the running nodes of c do not form one healthy
// cluster yet: the same leader everywhere, every member listed and voting,
// every data-plane link up; nil once they do.
func (c *cluster) healthy() error {
	leader := ""
	for _, n := range c.nodes {
		if !n.running() {
			return fmt.Errorf("%s is not running", n.name)
		}
		v, err := getView(n.ip)
		if err != nil {
			return err
		}
		l := v.Leadership.Leader
		switch {
		case !v.Enabled:
			return fmt.Errorf("%s: clustering off", n.name)
		case l == "":
			return fmt.Errorf("%s has no leader", n.name)
		case leader != "" && l != leader:
			return fmt.Errorf("%s follows %s, another node %s", n.name, l, leader)
		case v.MembersTotal != len(c.nodes):
			return fmt.Errorf("%s lists %d members, want %d", n.name, v.MembersTotal, len(c.nodes))
		case v.Leadership.IsLeader && v.MembersAlive != len(c.nodes):
			return fmt.Errorf("leader %s sees %d alive", n.name, v.MembersAlive)
		case v.DataPlane == nil:
			return fmt.Errorf("%s: no dataPlane in GET /cluster", n.name)
		}
		for _, m := range v.Members {
			if v.Leadership.IsLeader && !m.Voter {
				return fmt.Errorf("%s does not vote yet", m.Name)
			}
		}
		up := 0
		for _, p := range v.DataPlane.Peers {
			if p.Connected {
				up++
			}
		}
		if up < len(c.nodes)-1 {
			return fmt.Errorf("%s has %d of %d links up", n.name, up, len(c.nodes)-1)
		}
		leader = l
	}
	return nil
}

func (c *cluster) waitHealthy(timeout time.Duration) error {
	return waitFor(timeout, 100*time.Millisecond, c.healthy)
}

// leader is the leader the running, unpaused nodes agree on.
func (c *cluster) leader() (*node, error) {
	var name string
	err := waitFor(30*time.Second, 50*time.Millisecond, func() error {
		name = ""
		for _, n := range c.nodes {
			if !n.running() {
				continue
			}
			v, err := getView(n.ip)
			if err != nil {
				return err
			}
			if l := v.Leadership.Leader; l == "" || (name != "" && l != name) {
				return fmt.Errorf("no agreed leader (%s follows %q, another %q)", n.name, l, name)
			}
			name = v.Leadership.Leader
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.byName(name), nil
}

// partitionOwner is the owner of partition p in the map n serves, ""
// when GET /cluster does not say.
func partitionOwner(n *node, p int) (string, error) {
	v, err := getView(n.ip)
	if err != nil {
		return "", err
	}
	for _, e := range ownersIn(v.raw) {
		if e.partition == p {
			return e.owner, nil
		}
	}
	return "", nil
}

// partitionCount is the number of partitions of the map, 0 when unknown.
func partitionCount(n *node) int {
	v, err := getView(n.ip)
	if err != nil {
		return 0
	}
	return len(ownersIn(v.raw))
}

// rollingRestart stops (SIGTERM) and starts every node in turn, waiting
// for a healthy cluster after each.
func (c *cluster) rollingRestart() error {
	for _, n := range c.nodes {
		if err := n.stop(); err != nil {
			c.log.Warn("rolling restart: stop", "node", n.name, "err", err)
		}
		if err := n.start(); err != nil {
			return err
		}
		if err := c.waitHealthy(90 * time.Second); err != nil {
			return fmt.Errorf("after restarting %s: %w", n.name, err)
		}
	}
	return nil
}

// restartAll kills every node with kill -9 at once and starts them all.
func (c *cluster) restartAll() error {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.signal(syscall.SIGKILL) }()
	}
	wg.Wait()
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.start() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitFor polls f every every until it returns nil or timeout passes.
func waitFor(timeout, every time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(every)
	}
}
