package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
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

// withGhost is discovery that also lists the ghost, and notes in asked
// when its node first asked it for the peers: that node, as leader,
// begins to add the ghost, and so starts its MemberAddResign clock, only
// after its discovery listed the ghost.
type withGhost struct {
	cluster.PeerSource
	g     *ghost
	asked *atomic.Pointer[time.Time]
}

func (w withGhost) Peers(ctx context.Context) ([]discovery.Peer, error) {
	now := time.Now()
	w.asked.CompareAndSwap(nil, &now)
	ps, err := w.PeerSource.Peers(ctx)
	return append(ps, w.g.peer), err
}

// resignation is a node's log record that it resigned leadership.
type resignation struct {
	node int
	at   time.Time
}

// resignWatch passes its node's log records on, and sends on resigned
// those that say it resigned: under load a leader also loses leadership
// for other reasons (a missed heartbeat), which tell nothing of when it
// resigns.
type resignWatch struct {
	slog.Handler
	node     int
	resigned chan<- resignation
}

func (h resignWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "resigned leadership") {
		select {
		case h.resigned <- resignation{h.node, r.Time}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h resignWatch) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h resignWatch) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// TestLeaderResignsWhenAddFails: a peer that discovery lists and that
// answers, but never joins, makes the leader hand over leadership after
// MemberAddResign, so another leader can try.
func TestLeaderResignsWhenAddFails(t *testing.T) {
	c, first := formed(t, 3, nil)
	g := newGhost(t, first.IP[:len(first.IP)-1]+"99")
	// Restart every node with the ghost in its discovery and a short
	// resign time; the cluster keeps its state.
	asked := make([]atomic.Pointer[time.Time], len(c.Members))
	resigned := make(chan resignation, 1)
	c.Options = func(i int, o *cluster.Options) {
		o.MemberAddResign = time.Second
		o.MemberRemovalGrace = 0
		o.Discovery = withGhost{o.Discovery, g, &asked[i]}
		o.Logger = slog.New(resignWatch{o.Logger.Handler(), i, resigned})
	}
	for i := range c.Members {
		c.Restart(i)
	}
	// The first to resign may have led, and tried to add the ghost,
	// since an earlier restart, before any check here could see it lead:
	// its clock started no earlier than its discovery first listed the
	// ghost.
	var r resignation
	select {
	case r = <-resigned:
	case <-time.After(20 * time.Second):
		t.Fatal("no leader resigned in 20s")
	}
	m := c.Members[r.node]
	start := asked[r.node].Load()
	if start == nil {
		t.Fatalf("%s resigned before its discovery listed the ghost", m.Name)
	}
	took := r.at.Sub(*start)
	clustertest.Eventually(t, 10*time.Second, func() error {
		if m.Node.IsLeader() || m.Node.Leader() == "" {
			return errLeaderStays
		}
		return nil
	})
	t.Logf("%s resigned %v after its discovery listed the ghost; %s leads", m.Name, took, m.Node.Leader())
	if took < time.Second {
		t.Errorf("%s resigned %v after its discovery listed the ghost, before MemberAddResign (1s)", m.Name, took)
	}
}

var errLeaderStays = errors.New("the leader has not resigned")
