package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/clustertest"
)

// TestUsersThroughRaft: the leader's own users become the cluster's; a
// change made on a follower is committed through the leader (the peer
// protocol) and applied on every member; removing the last administrator
// is refused; without a majority a change is refused with the reason.
func TestUsersThroughRaft(t *testing.T) {
	c, leader := formed(t, 3, nil)
	for _, m := range c.Members {
		own := []cluster.User{{Name: "root", Hash: "hash-of-" + m.Name, Admin: true}}
		m.Node.SetLocalUsers(func() []cluster.User { return own })
	}
	version := func(want uint64) {
		t.Helper()
		clustertest.Eventually(t, 5*time.Second, func() error {
			for _, m := range c.Members {
				if m.Node == nil {
					continue
				}
				if u := m.Node.Users(); u.Version != want {
					return fmt.Errorf("%s has the users' version %d, want %d", m.Name, u.Version, want)
				}
			}
			return nil
		})
	}
	version(1)
	if u := c.Members[0].Node.Users(); u.List[0].Hash != "hash-of-"+leader.Name {
		t.Fatalf("the cluster's users %+v, want the leader %s's", u, leader.Name)
	}
	var follower *clustertest.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
		}
	}
	add := func(list []cluster.User) ([]cluster.User, error) {
		return append(list, cluster.User{Name: "alice", Hash: "h"}), nil
	}
	ctx := context.Background()
	if err := follower.Node.UpdateUsers(ctx, add); err != nil {
		t.Fatalf("UpdateUsers on follower %s: %v", follower.Name, err)
	}
	if u := follower.Node.Users(); u.Version != 2 || len(u.List) != 2 {
		t.Fatalf("follower %s after its change returned: %+v", follower.Name, u)
	}
	version(2)
	noAdmin := func(list []cluster.User) ([]cluster.User, error) {
		return []cluster.User{{Name: "alice", Hash: "h"}}, nil
	}
	if err := follower.Node.UpdateUsers(ctx, noAdmin); !errors.Is(err, cluster.ErrNoAdmin) {
		t.Fatalf("removing every administrator: %v, want ErrNoAdmin", err)
	}
	for i, m := range c.Members {
		if m != follower {
			c.Kill(i)
		}
	}
	err := follower.Node.UpdateUsers(ctx, add)
	if !errors.Is(err, cluster.ErrNoMajority) {
		t.Fatalf("a change without a majority: %v, want ErrNoMajority", err)
	}
	t.Logf("refused: %v", err)
}
