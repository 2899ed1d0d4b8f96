package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/clustertest"
)

// TestChangeRightAfterLeaderCrash: a user or LoT change made on a
// follower just after the leader's process died (the follower still
// names it: its election timeout has not run out) commits on the next
// leader instead of being refused for want of a majority while two of
// three members are up. It failed TestClusterLoTDefinitions when the
// node it killed was the leader: "no majority ... connection refused".
func TestChangeRightAfterLeaderCrash(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(context.Context, *cluster.Node) error
	}{
		{"users", func(ctx context.Context, n *cluster.Node) error {
			return n.UpdateUsers(ctx, func(list []cluster.User) ([]cluster.User, error) {
				return append(list, cluster.User{Name: "alice", Hash: "h"}), nil
			})
		}},
		{"lot", func(ctx context.Context, n *cluster.Node) error {
			_, err := n.ChangeLoT(ctx, n.LoT().Version, nil, []cluster.LoTDef{{Kind: "action", Name: "Echo", Source: "DEFINE ACTION Echo ..."}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Election timeouts of 0.5 to 1 s rather than 150 to 300 ms:
			// the two members left must keep the leader they elect on a
			// loaded machine (a leadership lost while committing leaves
			// the change's outcome unknown, and it is rightly refused),
			// and the follower names the crashed leader for longer.
			c, leader := formed(t, 3, func(_ int, o *cluster.Options) {
				o.ElectionTimeoutLower, o.ElectionTimeoutUpper = 500*time.Millisecond, time.Second
			})
			for _, m := range c.Members {
				m.Node.SetLocalUsers(func() []cluster.User { return []cluster.User{{Name: "root", Hash: "h", Admin: true}} })
			}
			clustertest.Eventually(t, 5*time.Second, func() error {
				for _, m := range c.Members {
					if m.Node.Users().Version == 0 {
						return fmt.Errorf("%s has no users yet", m.Name)
					}
				}
				return nil
			})
			var follower *cluster.Node
			for i, m := range c.Members {
				if m != leader {
					follower = m.Node
					continue
				}
				c.Crash(i)
			}
			named := follower.Leader()
			start := time.Now()
			if err := tc.change(context.Background(), follower); err != nil {
				t.Fatalf("a change on a follower right after the leader %s crashed (the follower named %q): %v", leader.Name, named, err)
			}
			t.Logf("committed %v after the crash, the follower then naming %q as the leader", time.Since(start).Round(time.Millisecond), named)
		})
	}
}
