package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/clustertest"
)

// formed starts n members at once (opts, when not nil, adjusts each one's
// options) and waits until they form one cluster in which every member
// votes; it returns the cluster and its leader.
func formed(t *testing.T, n int, opts func(int, *cluster.Options)) (*clustertest.Cluster, *clustertest.Member) {
	t.Helper()
	c := clustertest.New(t, n)
	c.Options = opts
	c.StartAll()
	leader := c.WaitLeader(10 * time.Second)
	waitMembers(t, c, n, 10*time.Second)
	return c, leader
}

// waitMembers waits until every running member's status lists want
// members, all voting, and the leader sees them all alive.
func waitMembers(t *testing.T, c *clustertest.Cluster, want int, timeout time.Duration) {
	t.Helper()
	clustertest.Eventually(t, timeout, func() error {
		for _, m := range c.Members {
			if m.Node == nil {
				continue
			}
			st := m.Node.Status()
			if st.MembersTotal != want {
				return fmt.Errorf("%s lists %d members, want %d: %+v", m.Name, st.MembersTotal, want, st.Members)
			}
			if st.Leadership.IsLeader && st.MembersAlive != want {
				return fmt.Errorf("leader %s sees %d alive, want %d: %+v", m.Name, st.MembersAlive, want, st.Members)
			}
			for _, mm := range st.Members {
				if !mm.Voter {
					return fmt.Errorf("%s: %s does not vote yet", m.Name, mm.Name)
				}
			}
		}
		return nil
	})
}

// TestFreshNodesFormOneCluster starts three nodes without state at once:
// exactly one cluster forms, every node names the same leader, and the
// partition map spreads the owners evenly.
func TestFreshNodesFormOneCluster(t *testing.T) {
	c, leader := formed(t, 3, nil)
	if s := waitSession(t, leader); s.FormedBy != "node-1" {
		t.Errorf("session = %+v, want one formed by node-1 (first by name)", s)
	}
	clustertest.Eventually(t, 5*time.Second, func() error {
		owned := map[string]int{}
		pm := leader.Node.Partitions()
		if len(pm.Partitions) != 16 {
			return fmt.Errorf("%d partitions, want 16", len(pm.Partitions))
		}
		for _, p := range pm.Partitions {
			owned[p.Owner]++
			if len(p.Replicas) != 3 {
				return fmt.Errorf("partition %+v has %d copies, want 3", p, len(p.Replicas))
			}
		}
		for _, m := range c.Members {
			if n := owned[m.Name]; n < 5 || n > 6 {
				return fmt.Errorf("owners %v: not spread evenly", owned)
			}
		}
		return nil
	})
	for _, m := range c.Members { // every node applied the same map
		clustertest.Eventually(t, 5*time.Second, func() error {
			if got, want := m.Node.Partitions().Version, leader.Node.Partitions().Version; got != want {
				return fmt.Errorf("%s has map version %d, leader %d", m.Name, got, want)
			}
			return nil
		})
	}
}

// TestLeaderFailover kills the leader; the others elect a new one within
// a second of the failure.
func TestLeaderFailover(t *testing.T) {
	c, old := formed(t, 3, nil)
	var rest []int
	for i, m := range c.Members {
		if m != old {
			rest = append(rest, i)
		}
	}
	c.Kill(c.Index(old))
	start := time.Now() // Kill returns once the node is gone: the failure is detectable from here
	next := c.WaitLeader(5*time.Second, rest...)
	took := time.Since(start)
	t.Logf("leader %s killed; %s leads after %v", old.Name, next.Name, took)
	if took > time.Second {
		t.Errorf("new leader after %v, want under 1 s", took)
	}
}

// TestFrozenLeader isolates the leader so that its connections stall
// (as under SIGSTOP): a new leader within a second, and once the old one
// is back there is still exactly one leader.
func TestFrozenLeader(t *testing.T) {
	c, old := formed(t, 3, nil)
	var rest []int
	for i, m := range c.Members {
		if m != old {
			rest = append(rest, i)
		}
	}
	start := time.Now()
	c.Pause(c.Index(old))
	next := c.WaitLeader(5*time.Second, rest...)
	took := time.Since(start)
	t.Logf("leader %s frozen; %s leads after %v", old.Name, next.Name, took)
	if took > time.Second {
		t.Errorf("new leader after %v, want under 1 s", took)
	}
	// The isolated node lost its lease: it no longer claims to lead.
	clustertest.Eventually(t, 2*time.Second, func() error {
		if old.Node.IsLeader() {
			return fmt.Errorf("%s still leads while cut off", old.Name)
		}
		return nil
	})
	c.Resume(c.Index(old))
	c.WaitLeader(5 * time.Second)
	waitMembers(t, c, 3, 10*time.Second)
}

// TestMinorityPartition cuts one follower off: the majority keeps its
// leader, the minority elects none.
func TestMinorityPartition(t *testing.T) {
	c, leader := formed(t, 3, nil)
	li := c.Index(leader)
	minority := (li + 1) % 3
	majority := []int{li, (li + 2) % 3}
	c.Partition([]int{minority}, majority)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c.Members[minority].Node.IsLeader() {
			t.Fatalf("%s leads alone in the minority", c.Members[minority].Name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.WaitLeader(2*time.Second, majority...); got != leader {
		t.Errorf("majority leader = %s, want %s unchanged", got.Name, leader.Name)
	}
	c.Heal()
	c.WaitLeader(5 * time.Second)
}

// TestRestartAllTogether stops every node and starts them all again: they
// rejoin from their state at once, with the same membership and session.
func TestRestartAllTogether(t *testing.T) {
	c, leader := formed(t, 3, nil)
	session := waitSession(t, leader)
	for i := range c.Members {
		c.Kill(i)
	}
	c.StartAll()
	leader = c.WaitLeader(10 * time.Second)
	waitMembers(t, c, 3, 10*time.Second)
	clustertest.Eventually(t, 5*time.Second, func() error {
		for _, m := range c.Members {
			if got := m.Node.State().Session; got.ID != session.ID {
				return fmt.Errorf("%s: session after a full restart = %q, want %q (rejoined, not re-formed)", m.Name, got.ID, session.ID)
			}
		}
		return nil
	})
}

// TestNodeMovesToNewAddress restarts a follower on a new address, then
// another on the first one's old address: membership stays at three and
// lists each at its new address.
func TestNodeMovesToNewAddress(t *testing.T) {
	c, leader := formed(t, 3, nil)
	li := c.Index(leader)
	a, b := (li+1)%3, (li+2)%3
	oldA := c.Members[a].IP
	c.MoveTo(a, "")
	waitAddress(t, c, a)
	c.MoveTo(b, oldA) // b takes a's old address
	waitAddress(t, c, b)
	waitMembers(t, c, 3, 10*time.Second)
}

func waitAddress(t *testing.T, c *clustertest.Cluster, i int) {
	t.Helper()
	m := c.Members[i]
	clustertest.Eventually(t, 10*time.Second, func() error {
		for _, o := range c.Members {
			if o.Node == nil {
				continue
			}
			for _, mm := range o.Node.Status().Members {
				if mm.Name == m.Name && mm.Address != m.RaftAddr() {
					return fmt.Errorf("%s lists %s at %s, want %s", o.Name, m.Name, mm.Address, m.RaftAddr())
				}
			}
		}
		return nil
	})
}

// TestDeadMemberRemovedAndReadded kills a follower: after
// MemberRemovalGrace it leaves the membership and its partitions move to
// nodes that held copies; when it returns it is added back.
func TestDeadMemberRemovedAndReadded(t *testing.T) {
	c, leader := formed(t, 3, func(i int, o *cluster.Options) { o.MemberRemovalGrace = 2 * time.Second })
	victim := c.Members[(c.Index(leader)+1)%3]
	// The map settled first: every node a caught-up copy of every
	// partition (a map still converging may add a copy after the snapshot,
	// and the failover then rightly picks it).
	clustertest.Eventually(t, 5*time.Second, func() error {
		owns := false
		for p, a := range leader.Node.Partitions().Partitions {
			if len(a.Replicas) != 3 || len(a.Syncing) > 0 {
				return fmt.Errorf("partition %d has copies %v, syncing %v", p, a.Replicas, a.Syncing)
			}
			owns = owns || a.Owner == victim.Name
		}
		if !owns {
			return fmt.Errorf("%s owns no partition yet", victim.Name)
		}
		return nil
	})
	before := leader.Node.Partitions()
	c.Kill(c.Index(victim))
	// After FailoverDelay its partitions belong to nodes that held copies.
	clustertest.Eventually(t, 5*time.Second, func() error {
		after := leader.Node.Partitions()
		for p, a := range after.Partitions {
			if a.Owner == victim.Name {
				return fmt.Errorf("partition %d still owned by %s", p, victim.Name)
			}
			if b := before.Partitions[p]; b.Owner == victim.Name {
				if !contains(b.Replicas, a.Owner) {
					return fmt.Errorf("partition %d moved to %s, which held no copy (%v)", p, a.Owner, b.Replicas)
				}
				if a.Epoch <= b.Epoch {
					return fmt.Errorf("partition %d changed owner without a new epoch", p)
				}
			}
		}
		return nil
	})
	waitMembers(t, c, 2, 10*time.Second)
	c.Start(c.Index(victim))
	waitMembers(t, c, 3, 10*time.Second)
}

// TestFreshNodeJoinsRunningCluster starts a new node next to a running
// cluster: it joins instead of forming its own.
func TestFreshNodeJoinsRunningCluster(t *testing.T) {
	c := clustertest.New(t, 4)
	for i := range 3 {
		c.Start(i)
	}
	leader := c.WaitLeader(10*time.Second, 0, 1, 2)
	session := waitSession(t, leader)
	c.Start(3)
	waitMembers(t, c, 4, 10*time.Second)
	clustertest.Eventually(t, 5*time.Second, func() error {
		if got := c.Members[3].Node.State().Session; got.ID != session.ID {
			return fmt.Errorf("new node is in session %q, want the running cluster's %q", got.ID, session.ID)
		}
		return nil
	})
}

// waitSession waits until m has applied the cluster's session.
func waitSession(t *testing.T, m *clustertest.Member) cluster.Session {
	t.Helper()
	var s cluster.Session
	clustertest.Eventually(t, 5*time.Second, func() error {
		if s = m.Node.State().Session; s.ID == "" {
			return fmt.Errorf("%s has no session yet", m.Name)
		}
		return nil
	})
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// seedHealthy is the seed document's health check ("Check the cluster"):
// every running member names the same leader, every one lists want
// members, and the leader sees membersAlive equal to membersTotal.
func seedHealthy(c *clustertest.Cluster, want int) error {
	leader := ""
	for _, m := range c.Members {
		if m.Node == nil {
			continue
		}
		st := m.Node.Status()
		switch l := st.Leadership.Leader; {
		case l == "":
			return fmt.Errorf("%s names no leader", m.Name)
		case leader != "" && l != leader:
			return fmt.Errorf("%s follows %s, another member %s", m.Name, l, leader)
		case st.MembersTotal != want:
			return fmt.Errorf("%s lists %d members, want %d", m.Name, st.MembersTotal, want)
		case st.Leadership.IsLeader && st.MembersAlive != st.MembersTotal:
			return fmt.Errorf("leader %s sees %d of %d alive", m.Name, st.MembersAlive, st.MembersTotal)
		default:
			leader = l
		}
	}
	return nil
}

// TestKillLeaderOnceHealthy kills the leader the moment the seed's health
// check first passes on a cluster of three fresh nodes: the two others
// must already vote, so they elect a new leader.
func TestKillLeaderOnceHealthy(t *testing.T) {
	c := clustertest.New(t, 3)
	c.StartAll()
	deadline := time.Now().Add(15 * time.Second)
	for seedHealthy(c, 3) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not healthy after 15 s: %v", seedHealthy(c, 3))
		}
		time.Sleep(2 * time.Millisecond)
	}
	var old *clustertest.Member
	for _, m := range c.Members {
		if m.Node.IsLeader() {
			old = m
		}
	}
	if old == nil {
		t.Fatal("healthy, but no member leads")
	}
	for _, mm := range old.Node.Status().Members {
		if !mm.Voter {
			t.Errorf("healthy by the seed's check while %s does not vote: %+v", mm.Name, old.Node.Status().Members)
		}
	}
	var rest []int
	for i, m := range c.Members {
		if m != old {
			rest = append(rest, i)
		}
	}
	c.Kill(c.Index(old))
	next := c.WaitLeader(5*time.Second, rest...)
	t.Logf("leader %s killed as soon as the cluster looked healthy; %s leads", old.Name, next.Name)
}
