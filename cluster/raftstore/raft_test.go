package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// listFSM records the commands it applies, in order. A command equal to
// the one before it is a client's retry (raftCluster.apply retries an
// Apply that failed, and a failed Apply may still have been committed, so
// the log can hold it twice): it is applied once, as a client would
// deduplicate it, and deterministically on every node.
type listFSM struct {
	mu   sync.Mutex // guards cmds
	cmds []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.cmds); n > 0 && f.cmds[n-1] == string(l.Data) {
		return n
	}
	f.cmds = append(f.cmds, string(l.Data))
	return len(f.cmds)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) { return listSnapshot(f.list()), nil }

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var cmds []string
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

type listSnapshot []string

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (listSnapshot) Release() {}

// syncBuffer collects raft's log lines, shown when a test fails.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// raftNode is one member of the test cluster; its directory outlives
// restarts.
type raftNode struct {
	id    raft.ServerID
	dir   string
	store *Store
	trans *raft.InmemTransport
	fsm   *listFSM
	raft  *raft.Raft
}

type raftCluster struct {
	t     *testing.T
	logs  *syncBuffer
	nodes []*raftNode
}

func newRaftCluster(t *testing.T, n int) *raftCluster {
	c := &raftCluster{t: t, logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.logs.String())
		}
		for i := range c.nodes {
			c.stop(i)
		}
	})
	var servers []raft.Server
	for i := range n {
		id := raft.ServerID(fmt.Sprintf("node-%d", i))
		c.nodes = append(c.nodes, &raftNode{id: id, dir: t.TempDir()})
		servers = append(servers, raft.Server{ID: id, Address: raft.ServerAddress(id)})
	}
	for i := range n {
		c.start(i)
	}
	must(t, c.nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	return c
}

// start opens node i from its directory: the store, the snapshots, an
// empty FSM that raft restores from them.
func (c *raftCluster) start(i int) {
	t, nd := c.t, c.nodes[i]
	var err error
	nd.store, err = Open(filepath.Join(nd.dir, FileName), Options{})
	must(t, err)
	snaps, err := raft.NewFileSnapshotStore(nd.dir, 2, c.logs)
	must(t, err)
	_, nd.trans = raft.NewInmemTransport(raft.ServerAddress(nd.id))
	for _, other := range c.nodes {
		if other != nd && other.raft != nil {
			nd.trans.Connect(raft.ServerAddress(other.id), other.trans)
			other.trans.Connect(raft.ServerAddress(nd.id), nd.trans)
		}
	}
	conf := raft.DefaultConfig()
	conf.LocalID = nd.id
	conf.HeartbeatTimeout = 100 * time.Millisecond
	conf.ElectionTimeout = 100 * time.Millisecond
	conf.LeaderLeaseTimeout = 100 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 1 << 30 // snapshots only when the test asks
	conf.TrailingLogs = 10
	conf.LogOutput = c.logs
	conf.LogLevel = "DEBUG"
	nd.fsm = &listFSM{}
	nd.raft, err = raft.NewRaft(conf, nd.fsm, nd.store, nd.store, snaps, nd.trans)
	must(t, err)
}

// stop shuts node i down and closes its store, as a process exit would.
func (c *raftCluster) stop(i int) {
	nd := c.nodes[i]
	if nd.raft == nil {
		return
	}
	must(c.t, nd.raft.Shutdown().Error())
	for _, other := range c.nodes {
		if other != nd && other.trans != nil {
			other.trans.Disconnect(raft.ServerAddress(nd.id))
		}
	}
	must(c.t, nd.store.Close())
	nd.raft = nil
}

func (c *raftCluster) leader() (*raftNode, error) {
	for _, nd := range c.nodes {
		if nd.raft != nil && nd.raft.State() == raft.Leader {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("no leader")
}

// apply commits commands first..last through the leader.
func (c *raftCluster) apply(first, last int) {
	for i := first; i <= last; i++ {
		eventually(c.t, 10*time.Second, func() error {
			l, err := c.leader()
			if err != nil {
				return err
			}
			return l.raft.Apply(fmt.Appendf(nil, "cmd-%d", i), time.Second).Error()
		})
	}
}

// converged waits until every running node has applied exactly cmds.
func (c *raftCluster) converged(cmds []string) {
	eventually(c.t, 10*time.Second, func() error {
		for _, nd := range c.nodes {
			if nd.raft == nil {
				continue
			}
			if got := nd.fsm.list(); !slices.Equal(got, cmds) {
				return fmt.Errorf("%s applied %d commands, want %d", nd.id, len(got), len(cmds))
			}
		}
		return nil
	})
}

func commands(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("cmd-%d", i))
	}
	return out
}

func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRaftCluster runs hashicorp/raft on this store: a 3-node cluster
// applies commands, a follower restarted from its files catches up from
// the leader's log, another catches up by snapshot after the leader
// compacted its log (DeleteRange), and the whole cluster restarts at
// once and recovers its term, vote, log and state from disk.
func TestRaftCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Raft cluster")
	}
	c := newRaftCluster(t, 3)
	c.apply(1, 50)
	c.converged(commands(50))

	// A follower is down while the others commit; restarted from its
	// store, it catches up from the leader's log.
	l, err := c.leader()
	must(t, err)
	f := slices.IndexFunc(c.nodes, func(nd *raftNode) bool { return nd != l })
	c.stop(f)
	c.apply(51, 100)
	c.start(f)
	c.converged(commands(100))

	// Snapshots everywhere compact the logs down to TrailingLogs.
	for _, nd := range c.nodes {
		must(t, nd.raft.Snapshot().Error())
	}
	for _, nd := range c.nodes {
		first, _ := nd.store.FirstIndex()
		last, _ := nd.store.LastIndex()
		if last-first+1 > 11 {
			t.Errorf("%s keeps logs %d..%d after a snapshot, want at most TrailingLogs", nd.id, first, last)
		}
	}

	// A follower misses more than the leader keeps: it catches up by an
	// InstallSnapshot, then the log.
	l, err = c.leader()
	must(t, err)
	f = slices.IndexFunc(c.nodes, func(nd *raftNode) bool { return nd != l })
	c.stop(f)
	c.apply(101, 150)
	must(t, l.raft.Snapshot().Error())
	c.apply(151, 160)
	c.start(f)
	c.converged(commands(160))

	// Every node restarts at the same time: each recovers from its own
	// files, they elect a leader and keep committing.
	terms := map[raft.ServerID]uint64{}
	for i, nd := range c.nodes {
		c.stop(i)
		reopened, err := Open(filepath.Join(nd.dir, FileName), Options{})
		must(t, err)
		terms[nd.id], err = reopened.GetUint64([]byte("CurrentTerm"))
		must(t, err)
		must(t, reopened.Close())
		if terms[nd.id] == 0 {
			t.Errorf("%s stored no current term", nd.id)
		}
	}
	for i := range c.nodes {
		c.start(i)
	}
	c.converged(commands(160))
	c.apply(161, 170)
	c.converged(commands(170))
	for _, nd := range c.nodes {
		if term, _ := nd.store.GetUint64([]byte("CurrentTerm")); term <= terms[nd.id] {
			t.Errorf("%s: term %d after the restart, was %d", nd.id, term, terms[nd.id])
		}
	}
}
