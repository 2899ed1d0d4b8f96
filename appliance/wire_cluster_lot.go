package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gantry/cluster"
	"gantry/cluster/signing"
	"gantry/lot/defs"
)

// This file joins LoT's definitions store (lot/defs) to the cluster: on a
// clustered node every change commits through the Raft leader
// (cluster/lot.go) and the local store follows what the cluster
// committed; the runtime sees the local store change as on a single node.
// See docs/cluster.md, "LoT in a cluster".

// Files of LoT in a cluster, under the data directory.
const (
	lotClusterFile = "lot-cluster.json" // the cluster version this node's definitions match
	lotBackupDir   = "lot-backup"       // definitions the cluster's replaced: lot-backup/<time>/<kind>/<name>.lot
)

// lotAdoptAfter is how long a leader of a cluster without definitions
// waits, stable, before it makes its own the cluster's.
const lotAdoptAfter = 3 * time.Second

// lotApplyWait bounds how long a change waits for this node to apply what
// the cluster committed.
const lotApplyWait = 10 * time.Second

// clusterDefs is the runtime's definitions store. Without a cluster it is
// the local store. With one, Apply commits through the leader and returns
// once this node has applied the change; follow applies what the cluster
// committed to the local store (watchers, hence the runtime, see it as a
// local change).
type clusterDefs struct {
	*defs.Local
	dataDir string
	log     *slog.Logger
	cluster *cluster.Node // nil on a single node; set before Start
	kick    chan struct{} // (capacity 1) the cluster's state changed

	mu       sync.Mutex               // guards the fields below
	applied  uint64                   // the cluster version the local store matches (0: none)
	session  string                   // the cluster session of applied
	inSync   bool                     // this process has followed the cluster once: later changes are not backed up
	behind   string                   // why the local store does not match the cluster's version, "" when it does
	progress chan struct{}            // closed and replaced whenever applied or behind changes
	peers    map[string]lotNodeStatus // the other members' parts of lot, as last asked (refreshLoTPeers)
}

// lotClusterMark is lotClusterFile.
type lotClusterMark struct {
	Session string `json:"session"`
	Version uint64 `json:"version"`
}

func newClusterDefs(local *defs.Local, dataDir string, log *slog.Logger) *clusterDefs {
	s := &clusterDefs{Local: local, dataDir: dataDir, log: log.With("component", "lot"),
		kick: make(chan struct{}, 1), progress: make(chan struct{})}
	if data, err := os.ReadFile(filepath.Join(dataDir, lotClusterFile)); err == nil {
		var m lotClusterMark
		if json.Unmarshal(data, &m) == nil {
			s.applied, s.session = m.Version, m.Session
		}
	}
	return s
}

// Apply implements defs.Store.
func (s *clusterDefs) Apply(ctx context.Context, c defs.Change) (defs.Applied, error) {
	cl := s.cluster
	if cl == nil {
		return s.Local.Apply(ctx, c)
	}
	s.mu.Lock()
	base := s.applied
	if s.session != cl.State().Session.ID {
		base = 0
	}
	old := ""
	for name, p := range s.peers {
		if p.mixed {
			old = name
		}
	}
	s.mu.Unlock()
	if old != "" {
		return defs.Applied{}, fmt.Errorf("cluster: member %s runs a version of Gantry that does not replicate LoT (lot.mixedMode in GET /cluster): upgrade every node before you change LoT; change refused", old)
	}
	if base == 0 && cl.LoT().Version == 0 && cl.Leader() == "" {
		// No cluster has adopted definitions yet, and none is formed:
		// the node runs its own LoT (the seed rules of a new node).
		return s.Local.Apply(ctx, c)
	}
	var deletes []cluster.LoTDelete
	for _, d := range c.Deletes {
		deletes = append(deletes, cluster.LoTDelete{Kind: string(d.Kind), Name: d.Name})
	}
	var puts []cluster.LoTDef
	for _, p := range c.Puts {
		puts = append(puts, cluster.LoTDef{Kind: string(p.Kind), Name: p.Name, Source: p.Source})
	}
	v, err := cl.ChangeLoT(ctx, base, deletes, puts)
	var conflict *cluster.LoTConflictError
	switch {
	case errors.As(err, &conflict):
		// Checked on definitions the cluster has moved past: wait for
		// the newer ones here, for the runtime to check again.
		if err := s.await(ctx, conflict.Current); err != nil {
			return defs.Applied{}, err
		}
		return defs.Applied{}, fmt.Errorf("%w: %v", defs.ErrConflict, err)
	case errors.Is(err, cluster.ErrLoTNotFound):
		return defs.Applied{}, fmt.Errorf("%w: %v", defs.ErrNotFound, err)
	case err != nil:
		return defs.Applied{}, err
	}
	if err := s.await(ctx, v); err != nil {
		return defs.Applied{}, err
	}
	return defs.Applied{Version: v}, nil
}

// await waits until the local store matches cluster version v (or a
// later one).
func (s *clusterDefs) await(ctx context.Context, v uint64) error {
	s.poke()
	ctx, cancel := context.WithTimeout(ctx, lotApplyWait)
	defer cancel()
	for {
		s.mu.Lock()
		applied, behind, progress := s.applied, s.behind, s.progress
		s.mu.Unlock()
		if applied >= v {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			why := "it is still applying earlier changes"
			if behind != "" {
				why = behind
			}
			return fmt.Errorf("cluster: the change is committed (version %d), but this node has not applied it yet: %s", v, why)
		}
	}
}

func (s *clusterDefs) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// follow runs until stop closes: it applies the cluster's definitions to
// the local store whenever they change, and, on a leader of a cluster
// without definitions, makes this node's the cluster's after
// lotAdoptAfter.
func (s *clusterDefs) follow(stop <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var leaderSince time.Time
	for {
		cl := s.cluster
		if cl.IsLeader() && cl.LoT().Version == 0 {
			if leaderSince.IsZero() {
				leaderSince = time.Now()
			}
			if time.Since(leaderSince) >= lotAdoptAfter {
				if _, err := cl.AdoptLoT(); err != nil {
					s.log.Warn("cannot make this node's LoT definitions the cluster's", "err", err)
				}
			}
		} else {
			leaderSince = time.Time{}
		}
		s.catchUp(cl.State())
		select {
		case <-stop:
			return
		case <-s.kick:
		case <-t.C:
		}
	}
}

// catchUp applies the cluster's definitions of st to the local store
// when it does not match them yet.
func (s *clusterDefs) catchUp(st cluster.State) {
	lot := st.LoT
	if lot.Version == 0 {
		return // the cluster has not adopted definitions: the node runs its own
	}
	s.mu.Lock()
	done := s.session == st.Session.ID && s.applied >= lot.Version
	backup := !s.inSync
	s.mu.Unlock()
	if done {
		return
	}
	change, dropped := diffDefs(s.Local.List(""), lot.Defs)
	if backup && len(dropped) > 0 {
		dir, err := s.backUp(dropped)
		if err != nil {
			s.setBehind(fmt.Sprintf("cannot back up the definitions the cluster's replace: %v", err))
			return
		}
		s.log.Warn("this node's LoT definitions were not the cluster's: the cluster's replace them",
			"backup", dir, "definitions", len(dropped), "clusterVersion", lot.Version)
	}
	if len(change.Deletes)+len(change.Puts) > 0 {
		if _, err := s.Local.Apply(context.Background(), change); err != nil {
			s.setBehind(fmt.Sprintf("cannot apply the cluster's definitions (version %d): %v", lot.Version, err))
			s.log.Error("cannot apply the cluster's LoT definitions", "clusterVersion", lot.Version, "err", err)
			return
		}
	}
	mark, _ := json.Marshal(lotClusterMark{Session: st.Session.ID, Version: lot.Version})
	if err := writeFileSync(filepath.Join(s.dataDir, lotClusterFile), mark); err != nil {
		s.log.Warn("cannot record the cluster's LoT version", "err", err)
	}
	s.mu.Lock()
	s.applied, s.session, s.inSync, s.behind = lot.Version, st.Session.ID, true, ""
	close(s.progress)
	s.progress = make(chan struct{})
	s.mu.Unlock()
	if len(change.Deletes)+len(change.Puts) > 0 {
		s.log.Info("applied the cluster's LoT definitions", "clusterVersion", lot.Version,
			"removed", len(change.Deletes), "written", len(change.Puts))
	}
}

// matches reports whether the local store holds the cluster's latest
// definitions, applied without error.
func (s *clusterDefs) matches() bool {
	v := s.cluster.LoT().Version
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.behind == "" && s.applied >= v && v != 0
}

func (s *clusterDefs) setBehind(why string) {
	s.mu.Lock()
	if s.behind != why {
		s.behind = why
		close(s.progress)
		s.progress = make(chan struct{})
	}
	s.mu.Unlock()
}

// diffDefs is the change that turns local into cluster, and the local
// definitions it removes or replaces.
func diffDefs(local []defs.Definition, clusterDefs []cluster.LoTDef) (defs.Change, []defs.Definition) {
	want := map[[2]string]string{}
	for _, d := range clusterDefs {
		want[[2]string{d.Kind, d.Name}] = d.Source
	}
	var c defs.Change
	var dropped []defs.Definition
	have := map[[2]string]bool{}
	for _, d := range local {
		k := [2]string{string(d.Kind), d.Name}
		have[k] = true
		src, ok := want[k]
		switch {
		case !ok:
			c.Deletes = append(c.Deletes, defs.Delete{Kind: d.Kind, Name: d.Name})
			dropped = append(dropped, d)
		case src != d.Source:
			c.Puts = append(c.Puts, defs.Put{Kind: d.Kind, Name: d.Name, Source: src})
			dropped = append(dropped, d)
		}
	}
	for _, d := range clusterDefs {
		if !have[[2]string{d.Kind, d.Name}] {
			c.Puts = append(c.Puts, defs.Put{Kind: defs.Kind(d.Kind), Name: d.Name, Source: d.Source})
		}
	}
	return c, dropped
}

// backUp writes each definition under lot-backup/<time>/<kind>/<name>.lot.
func (s *clusterDefs) backUp(list []defs.Definition) (string, error) {
	dir := filepath.Join(s.dataDir, lotBackupDir, time.Now().UTC().Format("20060102T150405.000Z"))
	for _, d := range list {
		sub := filepath.Join(dir, string(d.Kind))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(sub, d.Name+".lot"), []byte(d.Source), 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeFileSync replaces path with data by an fsynced rename.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// openClusterLoT wires the definitions store to the cluster node, before
// it starts.
func (n *Node) openClusterLoT() {
	s := n.lotDefs
	s.cluster = n.Cluster
	n.Cluster.SetLocalLoT(func() []cluster.LoTDef {
		var out []cluster.LoTDef
		for _, d := range s.Local.List("") {
			out = append(out, cluster.LoTDef{Kind: string(d.Kind), Name: d.Name, Source: d.Source})
		}
		return out
	})
	n.Cluster.OnState(func(cluster.State) { s.poke() })
}

// startClusterLoT runs the store's follow-up of the cluster until
// Shutdown.
func (n *Node) startClusterLoT() {
	if n.Cluster == nil {
		return
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.lotDefs.follow(n.stop)
	}()
	go func() {
		defer n.wg.Done()
		n.refreshLoTPeers(n.stop)
	}()
}

// lotNodeStatus is one node's part of lot in GET /cluster.
type lotNodeStatus struct {
	Node    string `json:"node"`
	Applied uint64 `json:"applied"`          // the cluster version its definitions match
	Behind  bool   `json:"behind"`           // it has not applied the cluster's latest version
	Reason  string `json:"reason,omitempty"` // why it is behind, or why it did not answer
	// Boot identifies the node's process (drawn at start), for the LoT
	// session: "" when it did not answer.
	Boot  string `json:"boot,omitempty"`
	mixed bool   // it does not replicate LoT
}

// lotStatus is lot in GET /cluster.
type lotStatus struct {
	// Version is the latest committed version of the definitions this
	// node knows of (0: the cluster has not adopted any yet).
	Version     uint64 `json:"version"`
	Changes     uint64 `json:"changes"`
	AdoptedFrom string `json:"adoptedFrom,omitempty"`
	Definitions int    `json:"definitions"`
	// MixedMode: a member runs a version of Gantry that does not
	// replicate LoT (it does not answer GET /cluster/lot).
	MixedMode bool                     `json:"mixedMode"`
	Nodes     []lotNodeStatus          `json:"nodes"`
	Work      []cluster.WorkAssignment `json:"work"`
	// Session is the LoT session ON START counts in, and the ON START
	// actions run in it (action → code version).
	Session string            `json:"session"`
	Started map[string]string `json:"started,omitempty"`
}

// selfLoTStatus is this node's part.
func (n *Node) selfLoTStatus() lotNodeStatus {
	s := n.lotDefs
	lot := n.Cluster.LoT()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := lotNodeStatus{Node: n.cfg.Cluster.NodeName, Applied: s.applied, Reason: s.behind, Boot: n.boot}
	if lot.Version != 0 && s.applied < lot.Version {
		st.Behind = true
		if st.Reason == "" {
			st.Reason = fmt.Sprintf("applying version %d", lot.Version)
		}
	}
	return st
}

// serveLoTSelf is GET /cluster/lot: this node's part of lot, for the
// other members (askLoTPeer). It is signed both ways like the requests
// between nodes: its reason may quote what applying the definitions
// said, and its boot decides whether the LoT session, and so ON START,
// goes on, which an answer forged by another host must not.
func (n *Node) serveLoTSelf(w http.ResponseWriter, r *http.Request) {
	q := n.Cluster.Requests()
	req, err := q.VerifyRequest(w, r, cluster.LoTPath, 0)
	if err != nil {
		signing.WriteRefusal(w, err)
		return
	}
	defer req.Done()
	data, _ := json.Marshal(n.selfLoTStatus())
	q.WriteReply(w, http.StatusOK, req, data)
}

// lotClusterStatus is lot in GET /cluster: the cluster's definitions as
// this node applied them, each member's part as last asked
// (refreshLoTPeers), and the owner map.
func (n *Node) lotClusterStatus() *lotStatus {
	if n.Cluster == nil {
		return nil
	}
	lot := n.Cluster.LoT()
	out := &lotStatus{Version: lot.Version, Changes: lot.Changes, AdoptedFrom: lot.AdoptedFrom,
		Definitions: len(lot.Defs), Work: lot.Work.Items, Session: lot.Session.ID, Started: lot.Started}
	s := n.lotDefs
	s.mu.Lock()
	peers := s.peers
	s.mu.Unlock()
	for _, m := range n.Cluster.Status().Members {
		if m.Self {
			out.Nodes = append(out.Nodes, n.selfLoTStatus())
			continue
		}
		ns, ok := peers[m.Name]
		if !ok {
			ns = lotNodeStatus{Node: m.Name, Behind: true, Reason: "not asked yet"}
		}
		ns.Behind = ns.Behind || (lot.Version != 0 && ns.Applied < lot.Version)
		out.MixedMode = out.MixedMode || ns.mixed
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}

// lotPeersEvery is how often a node asks the other members for their part
// of lot in GET /cluster.
const lotPeersEvery = time.Second

// refreshLoTPeers asks every other member for its part of lot (GET
// /cluster/lot on its operations port, signed, in parallel, briefly), until stop
// closes: GET /cluster answers from what they said, without waiting for a
// frozen peer.
func (n *Node) refreshLoTPeers(stop <-chan struct{}) {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	t := time.NewTicker(lotPeersEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		members := n.Cluster.Status().Members
		views := make(map[string]lotNodeStatus, len(members))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, m := range members {
			if m.Self {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ns := n.askLoTPeer(hc, m.Name)
				mu.Lock()
				views[m.Name] = ns
				mu.Unlock()
			}()
		}
		wg.Wait()
		n.lotDefs.mu.Lock()
		n.lotDefs.peers = views
		n.lotDefs.mu.Unlock()
	}
}

func (n *Node) askLoTPeer(hc *http.Client, name string) lotNodeStatus {
	ns := lotNodeStatus{Node: name, Behind: true}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	ops := n.Cluster.PeerOps(ctx, name)
	if ops == "" {
		ns.Reason = "its operations address is not known"
		return ns
	}
	rep, err := n.Cluster.Requests().Get(ctx, hc, ops, cluster.LoTPath, name, 64<<10)
	if err != nil {
		ns.Reason = "does not answer: " + err.Error()
		return ns
	}
	if rep.Status == http.StatusNotFound {
		ns.mixed, ns.Reason = true, "runs a version of Gantry without replicated LoT"
		return ns
	}
	if rep.Err != nil {
		text := strings.TrimSpace(string(rep.Body))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		ns.Reason = fmt.Sprintf("answer not taken (%d %q): %v", rep.Status, text, rep.Err)
		return ns
	}
	var got lotNodeStatus
	if err := json.Unmarshal(rep.Body, &got); err != nil {
		ns.Reason = "bad answer: " + err.Error()
		return ns
	}
	got.Node = name
	return got
}

// lotCollector serves LoT in a cluster on /metrics.
type lotCollector struct{ n *Node }

var (
	lotVersionDesc = prometheus.NewDesc("coreflux_cluster_lot_version", "Committed version of the cluster's LoT definitions (0: none adopted yet).", nil, nil)
	lotAppliedDesc = prometheus.NewDesc("coreflux_cluster_lot_applied_version", "Version of the cluster's LoT definitions this node's match.", nil, nil)
	lotBehindDesc  = prometheus.NewDesc("coreflux_cluster_lot_behind", "1 while this node has not applied the cluster's latest LoT definitions.", nil, nil)
	lotOwnedDesc   = prometheus.NewDesc("coreflux_cluster_lot_work_owned", "Timers, ON START actions and exclusive connectors the owner map gives this node.", nil, nil)
	lotRunsDesc    = prometheus.NewDesc("coreflux_cluster_lot_work_runs", "1 while this node runs the work it owns (0: fenced, out of contact with a leader).", nil, nil)
)

func (c lotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lotVersionDesc, lotAppliedDesc, lotBehindDesc, lotOwnedDesc, lotRunsDesc} {
		ch <- d
	}
}

func (c lotCollector) Collect(ch chan<- prometheus.Metric) {
	lot := c.n.Cluster.LoT()
	self := c.n.selfLoTStatus()
	owned := 0
	for _, a := range lot.Work.Items {
		if a.Owner == self.Node {
			owned++
		}
	}
	ch <- prometheus.MustNewConstMetric(lotVersionDesc, prometheus.GaugeValue, float64(lot.Version))
	ch <- prometheus.MustNewConstMetric(lotAppliedDesc, prometheus.GaugeValue, float64(self.Applied))
	ch <- prometheus.MustNewConstMetric(lotBehindDesc, prometheus.GaugeValue, b2f(self.Behind))
	ch <- prometheus.MustNewConstMetric(lotOwnedDesc, prometheus.GaugeValue, float64(owned))
	ch <- prometheus.MustNewConstMetric(lotRunsDesc, prometheus.GaugeValue, b2f(c.n.Cluster.InContact(workFence)))
}
