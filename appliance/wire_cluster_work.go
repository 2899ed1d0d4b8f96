package appliance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"gantry/cluster"
	"gantry/lot/runtime"
)

// This file places LoT's work that runs in one place (timers, ON START
// actions, exclusive connectors) on the owner the cluster's owner map
// names (cluster/lot_work.go). See docs/cluster.md, "Owners and failover".

const (
	// workEvery is how often a node compares what runs on it with the
	// owner map (and the leader plans the map).
	workEvery = 250 * time.Millisecond
	// workFence: an owner that has not heard from a leader for this long
	// stops its timers and connectors. With workEvery and the second a
	// connector takes to close, it is done within 4 s, before the leader
	// moves the work (after FailoverDelay, 6 s).
	workFence = 2500 * time.Millisecond
	// workConnector + name is an exclusive connector's work key.
	workConnector = "connector/"
)

// workPlacement is the LoT engine's runtime.Placement on a node with
// clustering on, and the loop that runs what this node owns.
type workPlacement struct {
	n  *Node
	me string
	// The fields below belong to the loop's goroutine (place).
	running map[string]bool   // exclusive connectors this node was told to Run
	started map[string]string // ON START actions run by this process without a cluster: name → code
	warned  time.Time
}

func newWorkPlacement(n *Node) *workPlacement {
	return &workPlacement{n: n, me: n.cfg.Cluster.NodeName, running: map[string]bool{}, started: map[string]string{}}
}

// RunsHere implements runtime.Placement: the work runs here while the
// owner map names this node and it is in contact with a leader. Until
// the cluster adopted definitions each node runs its own timers; a node
// whose clustering did not start runs everything.
func (p *workPlacement) RunsHere(key string) bool {
	cl := p.n.Cluster
	if cl == nil {
		return true
	}
	lot := cl.LoT()
	if lot.Version == 0 {
		return strings.HasPrefix(key, runtime.WorkTimer)
	}
	a, ok := lot.Work.Lookup(key)
	return ok && a.Owner == p.me && cl.InContact(workFence)
}

// startPlacement runs the loop until Shutdown.
func (n *Node) startPlacement() {
	p := n.placement
	if p == nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(workEvery)
		defer t.Stop()
		for {
			p.place()
			select {
			case <-n.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// place is one round: the leader plans the owner map; every node starts
// and stops its exclusive connectors and runs the ON START actions it
// owns.
func (p *workPlacement) place() {
	n := p.n
	if n.Cluster != nil {
		n.Cluster.InContact(workFence) // every round: a longer gap means this process was frozen
	}
	work := n.LoT.Work() // what this node deployed: on the leader, what the map must hold
	conns := n.drivers.Connectors()
	if cl := n.Cluster; cl != nil && cl.IsLeader() && cl.LoT().Version != 0 {
		items := make([]cluster.WorkItem, 0, len(work)+len(conns))
		for _, w := range work {
			items = append(items, cluster.WorkItem{Key: w.Key})
		}
		for _, c := range conns {
			if !c.Server {
				items = append(items, cluster.WorkItem{Key: workConnector + c.Name, Pin: c.ClusterNode})
			}
		}
		if _, err := cl.PlanWork(items); err != nil && time.Since(p.warned) > time.Minute {
			p.warned = time.Now()
			n.log.Warn("cannot commit the LoT work map", "component", "lot", "err", err)
		}
		if err := cl.KeepLoTSession(p.boots()); err != nil && time.Since(p.warned) > time.Minute {
			p.warned = time.Now()
			n.log.Warn("cannot commit the LoT session", "component", "lot", "err", err)
		}
	}
	for _, c := range conns {
		if c.Server {
			continue
		}
		key := workConnector + c.Name
		want := p.RunsHere(key)
		switch {
		case want && !p.running[c.Name]:
			if err := n.drivers.Run(c.Name); err == nil {
				p.running[c.Name] = true
				n.log.Info("connector runs on this node", "component", "lot", "connector", c.Name)
			}
		case !want && p.running[c.Name]:
			n.drivers.Stop(c.Name)
			delete(p.running, c.Name)
			a, _ := n.Cluster.LoT().Work.Lookup(key)
			n.log.Info("connector stopped on this node: another node owns it, or this one lost contact with the leader", "component", "lot",
				"connector", c.Name, "owner", a.Owner, "inContact", n.Cluster.InContact(workFence))
		}
	}
	for _, w := range work {
		if strings.HasPrefix(w.Key, runtime.WorkStart) {
			p.start(strings.TrimPrefix(w.Key, runtime.WorkStart), w.Code)
		}
	}
}

// start runs the ON START action name with code if this node owns it and
// the cluster has not run it with that code in this session: claimed
// through Raft first, so that it runs at most once.
func (p *workPlacement) start(name, code string) {
	n := p.n
	cl := n.Cluster
	if cl == nil {
		if p.started[name] != code && n.LoT.RunStart(name, code) {
			p.started[name] = code
		}
		return
	}
	lot := cl.LoT()
	if lot.Session.ID == "" || lot.Session.Boots[p.me] != n.boot {
		return // the leader has not counted this process into the session yet
	}
	if lot.Started[name] == code || !p.RunsHere(runtime.WorkStart+name) || !p.n.lotDefs.matches() {
		return
	}
	err := cl.ClaimStart(context.Background(), cluster.StartClaim{Action: name, Code: code})
	switch {
	case err == nil:
		n.log.Info("running ON START: this node owns it", "component", "lot", "action", name)
		n.LoT.RunStart(name, code)
	case errors.Is(err, cluster.ErrStartClaimed):
	default:
		n.log.Warn("cannot claim an ON START run; trying again", "component", "lot", "action", name, "err", err)
	}
}

// boots are the processes of the members that answered lately, this one
// included: name → boot.
func (p *workPlacement) boots() map[string]string {
	s := p.n.lotDefs
	out := map[string]string{p.me: p.n.boot}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, v := range s.peers {
		if v.Boot != "" {
			out[name] = v.Boot
		}
	}
	return out
}

// newBoot draws this process's boot.
func newBoot() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
