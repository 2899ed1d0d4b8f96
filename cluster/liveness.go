package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// liveness is the leader's view of which members answer: hashicorp/raft
// reports each failed and resumed heartbeat to a member, and this keeps,
// per silent member, when it was last heard from. Only the leader
// heartbeats, so a follower knows nothing here ("unknown").
type liveness struct {
	mu   sync.Mutex           // guards down
	down map[string]time.Time // silent member → last contact
}

func newLiveness() *liveness { return &liveness{down: map[string]time.Time{}} }

func (l *liveness) failed(id string, lastContact time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.down[id]; ok {
		return
	}
	if lastContact.IsZero() {
		lastContact = time.Now()
	}
	l.down[id] = lastContact
}

func (l *liveness) resumed(id string) {
	l.mu.Lock()
	delete(l.down, id)
	l.mu.Unlock()
}

func (l *liveness) reset() {
	l.mu.Lock()
	clear(l.down)
	l.mu.Unlock()
}

// silentFor is how long id has not answered the leader's heartbeats, 0
// while it answers.
func (l *liveness) silentFor(id string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.down[id]; ok {
		return now.Sub(t)
	}
	return 0
}

// observe follows Raft's observations: leadership changes and heartbeats.
func (n *Node) observe(ctx context.Context) {
	lastLeader := ""
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-n.obsCh:
			switch d := o.Data.(type) {
			case raft.LeaderObservation:
				if leader := string(d.LeaderID); leader != lastLeader {
					lastLeader = leader
					n.live.reset()
					if leader == n.opts.NodeName {
						select { // reconcile now: commit the session and map without waiting a round
						case n.nudge <- struct{}{}:
						default:
						}
					}
					if leader != "" {
						n.leaderChanges.Add(1)
						n.log.Info("leader elected", "leader", leader, "term", n.raft.CurrentTerm(),
							"isLeader", leader == n.opts.NodeName)
					} else {
						n.log.Info("no leader: election in progress")
					}
				}
			case raft.FailedHeartbeatObservation:
				n.live.failed(string(d.PeerID), d.LastContact)
			case raft.ResumedHeartbeatObservation:
				n.live.resumed(string(d.PeerID))
				n.log.Info("member answers again", "member", string(d.PeerID))
			case raft.PeerObservation:
				if d.Removed {
					n.live.resumed(string(d.Peer.ID))
				}
			}
		}
	}
}
