package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"gantry/cluster/discovery"
)

// member is one server of the Raft configuration.
type member struct {
	addr  string
	voter bool
}

// members returns the Raft configuration by name, and its index.
func (n *Node) members() (map[string]member, uint64, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, 0, err
	}
	m := map[string]member{}
	for _, s := range f.Configuration().Servers {
		m[string(s.ID)] = member{string(s.Address), s.Suffrage == raft.Voter}
	}
	return m, f.Index(), nil
}

// reconcile is the leader's round: add the peers discovery finds, follow
// members to new addresses, remove the dead, resign when a reachable peer
// cannot be added, and keep the partition map in line with the live
// members.
func (n *Node) reconcile(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, n.peerTimeout())
	s := n.discover(dctx)
	cancel()
	n.learnAdvertise(s)
	members, _, err := n.members()
	if err != nil {
		return
	}
	for _, h := range s.foreign {
		n.warnEvery("foreign|"+h.RaftAddr, "peer answers for another cluster: not added",
			"peer", describe(h.RaftAddr, h.NodeName), "peerClusterId", h.ClusterID, "clusterId", n.opts.ClusterID)
	}
	for _, h := range s.hellos {
		if m, ok := members[h.NodeName]; !ok || m.addr != h.RaftAddr {
			if err := n.addMember(h); err != nil {
				n.log.Warn("cannot add a member", "member", h.NodeName, "addr", h.RaftAddr, "err", err)
			}
		}
	}
	n.promote(s)
	n.removeDead(ctx)
	n.resignIfStuck(s)
	n.recordSession()
	n.rebalance()
}

// addMember adds h as a non-voter, to be promoted once it has caught up
// (promote), or moves a member to its new address: a name that comes back
// elsewhere is the same member, and its old address is dropped at once.
// A peer whose Raft port cannot be reached therefore never counts toward
// the majority.
func (n *Node) addMember(h Hello) error {
	if h.NodeName == "" || h.RaftAddr == "" {
		return fmt.Errorf("cluster: join request without a name or address")
	}
	n.changeMu.Lock() // one membership change at a time: join requests race the reconcile round
	defer n.changeMu.Unlock()
	members, index, err := n.members()
	if err != nil {
		return err
	}
	old, known := members[h.NodeName]
	if known && old.addr == h.RaftAddr {
		return nil
	}
	n.mu.Lock()
	if _, ok := n.adding[h.NodeName]; !ok {
		n.adding[h.NodeName] = time.Now()
	}
	n.mu.Unlock()
	add := n.raft.AddNonvoter
	if known && old.voter {
		add = n.raft.AddVoter // a move keeps the member's vote
	}
	f := n.changeMembers(func() raft.IndexFuture {
		return add(raft.ServerID(h.NodeName), raft.ServerAddress(h.RaftAddr), index, applyTimeout)
	})
	if err := f.Error(); err != nil {
		return err
	}
	if known {
		n.log.Info("member moved to a new address", "member", h.NodeName, "from", old.addr, "to", h.RaftAddr)
	}
	if !known || !old.voter {
		if !known {
			n.log.Info("member added; it votes once it has caught up", "member", h.NodeName, "addr", h.RaftAddr)
		}
		n.watchCatchUp(h, f.Index())
	}
	return nil
}

// watchCatchUp starts, unless one runs already, the wait that gives h's
// member its vote the moment it has caught up with the entry at addIndex
// that added it, instead of on the next reconcile round: until then the
// cluster has a member that cannot vote, so it must not look complete.
func (n *Node) watchCatchUp(h Hello, addIndex uint64) {
	n.mu.Lock()
	if n.catchingUp[h.NodeName] {
		n.mu.Unlock()
		return
	}
	n.catchingUp[h.NodeName] = true
	n.mu.Unlock()
	if !n.goRun(func(ctx context.Context) { n.awaitCatchUp(ctx, h, addIndex) }) {
		n.mu.Lock()
		delete(n.catchingUp, h.NodeName)
		n.mu.Unlock()
	}
}

// awaitCatchUp asks h's member, every heartbeat interval for a second and
// then less and less often (down to once a ReconcileInterval), whether its
// configuration lists it and it knows the entry at addIndex that added it
// to be committed, which means it holds the leader's log up to there, and
// promotes it once it does and answers the leader's heartbeats. It ends
// when the member votes, leaves or moves, or this node stops leading (the
// next leader's rounds promote it).
func (n *Node) awaitCatchUp(ctx context.Context, h Hello, addIndex uint64) {
	defer func() {
		n.mu.Lock()
		delete(n.catchingUp, h.NodeName)
		n.mu.Unlock()
	}()
	wait := max(n.opts.ElectionTimeoutLower/10, 5*time.Millisecond)
	begun := time.Now()
	for ctx.Err() == nil && n.IsLeader() {
		members, _, err := n.members()
		if m, ok := members[h.NodeName]; err != nil || !ok || m.voter || m.addr != h.RaftAddr {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, n.peerTimeout())
		got, err := n.fetchHello(pctx, h.OpsAddr)
		cancel()
		if err == nil && got.NodeName == h.NodeName && got.Member && got.CommitIndex >= addIndex {
			got.RaftAddr = h.RaftAddr               // as the leader reaches it
			n.promote(survey{hellos: []Hello{got}}) // the next pass sees the vote and ends
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if time.Since(begun) > time.Second {
			wait = min(2*wait, n.opts.ReconcileInterval)
		}
	}
}

// promote gives a vote to each non-voter that has caught up: its own
// configuration lists it (it took the leader's entries) and it answers the
// leader's heartbeats.
func (n *Node) promote(s survey) {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	members, index, err := n.members()
	if err != nil {
		return
	}
	now := time.Now()
	for _, h := range s.hellos {
		m, ok := members[h.NodeName]
		if !ok || m.voter || !h.Member || m.addr != h.RaftAddr || n.live.silentFor(h.NodeName, now) > 0 {
			continue
		}
		f := n.changeMembers(func() raft.IndexFuture {
			return n.raft.AddVoter(raft.ServerID(h.NodeName), raft.ServerAddress(m.addr), index, applyTimeout)
		})
		if err := f.Error(); err != nil {
			n.log.Warn("cannot give a member its vote", "member", h.NodeName, "err", err)
			return
		}
		index = f.Index()
		n.log.Info("member votes", "member", h.NodeName)
	}
}

// changeMembers runs one change of the Raft configuration and waits until
// it is committed (or failed). Meanwhile the configuration GetConfiguration
// shows may still be lost with this leader, so Status counts no vote but
// this node's own (configCommitted).
func (n *Node) changeMembers(change func() raft.IndexFuture) raft.IndexFuture {
	n.changesPending.Add(1)
	defer n.changesPending.Add(-1)
	f := change()
	f.Error()
	return f
}

// configCommitted reports whether this leader knows its configuration to
// be committed: it committed an entry of its own term (the Barrier of run),
// which commits whatever configuration it inherited, and no change of its
// own is under way.
func (n *Node) configCommitted() bool {
	return n.readyTerm.Load() == n.raft.CurrentTerm() && n.changesPending.Load() == 0
}

// absentLister is the optional capability of a discovery source that can
// tell which addresses it stopped listing, and since when (Kubernetes).
type absentLister interface {
	AbsentSince(raftAddr string) (since time.Time, ok bool)
}

// removeDead removes members silent for MemberRemovalGrace, and members
// that Kubernetes discovery stopped listing for MemberAbsentFromDiscovery
// and that fail a TCP probe.
func (n *Node) removeDead(ctx context.Context) {
	members, _, err := n.members() // after this round's moves
	if err != nil {
		return
	}
	now := time.Now()
	al, _ := n.opts.Discovery.(absentLister)
	for name, m := range members {
		addr := m.addr
		if name == n.opts.NodeName {
			continue
		}
		why := ""
		if g := n.opts.MemberRemovalGrace; g > 0 && n.live.silentFor(name, now) >= g {
			why = "unreachable for " + g.String()
		} else if al != nil && n.absentAndSilent(ctx, al, addr, now) {
			why = "no longer listed by discovery and its cluster port does not answer"
		}
		if why == "" {
			continue
		}
		if err := n.changeMembers(func() raft.IndexFuture {
			return n.raft.RemoveServer(raft.ServerID(name), 0, applyTimeout)
		}).Error(); err != nil {
			n.log.Warn("cannot remove a member", "member", name, "err", err)
			continue
		}
		n.live.resumed(name)
		n.log.Warn("member removed", "member", name, "addr", addr, "why", why)
	}
}

// absentAndSilent reports whether discovery has not listed addr for
// MemberAbsentFromDiscovery and a TCP probe of it fails.
func (n *Node) absentAndSilent(ctx context.Context, al absentLister, addr string, now time.Time) bool {
	since, ok := al.AbsentSince(addr)
	return ok && now.Sub(since) >= n.opts.MemberAbsentFromDiscovery && discovery.Probe(ctx, addr) != nil
}

// resignIfStuck hands leadership over when this leader has tried for
// MemberAddResign to add a peer that answers but never joins: the next
// leader may succeed where this one cannot (a one-way network fault).
// A leader that finds such a peer already in the configuration, added
// by an earlier leader, tries too: its clock starts then (addMember,
// which starts it otherwise, has nothing to add). The clock is kept
// until a transfer succeeds: one refused because this node lost
// leadership during the round (a missed heartbeat under load) is tried
// again the next time it leads.
func (n *Node) resignIfStuck(s survey) {
	members, _, err := n.members()
	if err != nil {
		return
	}
	now := time.Now()
	answering := map[string]Hello{}
	for _, h := range s.hellos {
		answering[h.NodeName] = h
	}
	n.mu.Lock()
	for name, h := range answering {
		m, in := members[name]
		if _, timed := n.adding[name]; in && !timed && m.addr == h.RaftAddr && !(m.voter && h.Member) {
			n.adding[name] = now // in the configuration, not joined
		}
	}
	stuck := ""
	for name, since := range n.adding {
		h, ok := answering[name]
		m, in := members[name]
		switch {
		case !ok, in && m.voter && h.Member:
			// No longer a reachable candidate, or joined: it votes, and
			// its own configuration lists it.
			delete(n.adding, name)
		case n.opts.MemberAddResign > 0 && now.Sub(since) >= n.opts.MemberAddResign:
			stuck = name
		}
	}
	n.mu.Unlock()
	if stuck == "" {
		return
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.warnEvery("resign|"+stuck, "cannot resign leadership: the transfer failed; trying again next round",
			"member", stuck, "err", err)
		return
	}
	n.mu.Lock()
	clear(n.adding)
	n.mu.Unlock()
	n.log.Warn("resigned leadership: a reachable member did not join", "member", stuck,
		"after", n.opts.MemberAddResign.String())
}

// recordSession commits the cluster's session once, when it has none.
func (n *Node) recordSession() {
	if n.fsm.current().Session.ID != "" {
		return
	}
	var id [8]byte
	rand.Read(id[:])
	n.apply(command{Version: commandVersion, Op: opSession, Session: &Session{
		ID: hex.EncodeToString(id[:]), FormedAt: time.Now().UTC(), FormedBy: n.opts.NodeName}})
}

// apply commits c through Raft from the leader.
func (n *Node) apply(c command) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f := n.raft.Apply(data, applyTimeout)
	if err := f.Error(); err != nil {
		if err == raft.ErrNotLeader {
			return ErrNotLeader
		}
		return fmt.Errorf("cluster: commit %s: %w", c.Op, err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// liveMembers are the voting members that have answered within
// FailoverDelay, this node included, sorted: a member still catching up
// owns no partition.
func (n *Node) liveMembers(members map[string]member) []string {
	now := time.Now()
	var live []string
	for name, m := range members {
		if !m.voter {
			continue
		}
		if name == n.opts.NodeName || n.live.silentFor(name, now) < n.opts.FailoverDelay {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	return live
}
