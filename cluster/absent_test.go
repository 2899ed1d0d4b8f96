package cluster_test

import (
	"sync"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/clustertest"
)

// absentSource is discovery that, like Kubernetes discovery, can say
// which addresses it stopped listing and since when.
type absentSource struct {
	cluster.PeerSource
	mu     sync.Mutex
	absent map[string]time.Time
}

func (a *absentSource) AbsentSince(addr string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.absent[addr]
	return t, ok
}

func (a *absentSource) markAbsent(addr string) {
	a.mu.Lock()
	a.absent[addr] = time.Now()
	a.mu.Unlock()
}

// TestAbsentFromDiscoveryRemoved: a member that discovery stopped listing
// is removed after MemberAbsentFromDiscovery only once its cluster port
// fails a probe; a member still answering the probe stays.
func TestAbsentFromDiscoveryRemoved(t *testing.T) {
	c := clustertest.New(t, 3)
	var sources []*absentSource
	c.Options = func(i int, o *cluster.Options) {
		o.MemberRemovalGrace = 0 // never for silence alone
		o.MemberAbsentFromDiscovery = 500 * time.Millisecond
		s := &absentSource{PeerSource: o.Discovery, absent: map[string]time.Time{}}
		sources = append(sources, s)
		o.Discovery = s
	}
	c.StartAll()
	leader := c.WaitLeader(10 * time.Second)
	waitMembers(t, c, 3, 10*time.Second)
	li := c.Index(leader)
	alive, dead := c.Members[(li+1)%3], c.Members[(li+2)%3]

	// Unlisted but answering: stays a member.
	sources[li].markAbsent(alive.RaftAddr())
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if st := leader.Node.Status(); st.MembersTotal != 3 {
			t.Fatalf("%s removed while its cluster port answers: %+v", alive.Name, st.Members)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Unlisted and gone: removed.
	c.Kill(c.Index(dead))
	sources[li].markAbsent(dead.RaftAddr())
	waitMembers(t, c, 2, 10*time.Second)
}
