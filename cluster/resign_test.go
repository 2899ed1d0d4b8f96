package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"gantry/cluster"
	"gantry/cluster/clustertest"
	"gantry/cluster/discovery"
	"gantry/cluster/signing"
)

// ghost is a peer that answers the peer protocol but whose cluster port
// accepts connections and never replies: the leader can add it to the
// configuration, yet it never joins.
type ghost struct {
	raft net.Listener
	ops  *http.Server
	peer discovery.Peer
}

func newGhost(t *testing.T, ip string) *ghost {
	raftL, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { // accept and hold: a port that answers a probe, not Raft
		var held []net.Conn
		for {
			c, err := raftL.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	opsL, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	g := &ghost{raft: raftL, peer: discovery.Peer{NodeName: "ghost", RaftAddr: raftL.Addr().String(),
		OpsAddr: opsL.Addr().String(), ClusterID: "test-cluster"}}
	signer := signing.New([]byte("clustertest-secret"), nil)
	g.ops = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(cluster.Hello{ClusterID: "test-cluster", NodeName: "ghost", RaftAddr: g.peer.RaftAddr,
			OpsAddr: g.peer.OpsAddr, Nonce: r.URL.Query().Get(cluster.NonceParam)})
		w.Write(signer.Sign(body))
	})}
	go g.ops.Serve(opsL)
	t.Cleanup(func() { raftL.Close(); g.ops.Close() })
	return g
}

// withGhost is discovery that also lists the ghost.
type withGhost struct {
	cluster.PeerSource
	g *ghost
}

func (w withGhost) Peers(ctx context.Context) ([]discovery.Peer, error) {
	ps, err := w.PeerSource.Peers(ctx)
	return append(ps, w.g.peer), err
}

// TestLeaderResignsWhenAddFails: a peer that discovery lists and that
// answers, but never joins, makes the leader hand over leadership after
// MemberAddResign, so another leader can try.
func TestLeaderResignsWhenAddFails(t *testing.T) {
	c, first := formed(t, 3, nil)
	g := newGhost(t, first.IP[:len(first.IP)-1]+"99")
	// Restart every node with the ghost in its discovery and a short
	// resign time; the cluster keeps its state.
	c.Options = func(i int, o *cluster.Options) {
		o.MemberAddResign = time.Second
		o.MemberRemovalGrace = 0
		o.Discovery = withGhost{o.Discovery, g}
	}
	for i := range c.Members {
		c.Restart(i)
	}
	leader := c.WaitLeader(10 * time.Second)
	start := time.Now()
	clustertest.Eventually(t, 10*time.Second, func() error {
		if leader.Node.IsLeader() || leader.Node.Leader() == "" {
			return errLeaderStays
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("leader %s resigned after %v; %s leads", leader.Name, took, leader.Node.Leader())
	if took < time.Second {
		t.Errorf("resigned after %v, before MemberAddResign (1s)", took)
	}
}

var errLeaderStays = errors.New("the leader has not resigned")
