package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"gantry/cluster/discovery"
	"gantry/cluster/signing"
)

// Paths of the peer protocol on the operations port. Bodies are signed
// with the shared secret (cluster/signing).
const (
	PeerPath = "/cluster/peer" // GET ?nonce=N: who is this node, does it belong to a cluster
	JoinPath = "/cluster/join" // POST: add me (answered by the leader only)
)

// NonceParam is the query parameter of a GET PeerPath: the asker's fresh
// random value, which the signed answer carries back (Hello.Nonce), so an
// answer recorded earlier cannot be replayed as the answer to this
// question. maxNonce bounds it, in hex digits.
const (
	NonceParam = "nonce"
	maxNonce   = 64
)

// maxPeerBody bounds what a peer may send or answer.
const maxPeerBody = 64 << 10

// Hello is how a node describes itself to its peers.
type Hello struct {
	ClusterID string `json:"clusterId"`
	NodeName  string `json:"nodeName"`
	RaftAddr  string `json:"raftAddr"`
	OpsAddr   string `json:"opsAddr"`
	// HasState: the node holds Raft state, so it belongs (or belonged) to
	// a cluster; a node without state must not form a new one beside it.
	HasState bool `json:"hasState"`
	Member   bool `json:"member"` // its configuration lists it
	// CommitIndex is how far it knows the log to be committed: at or past
	// the entry that added it, it holds the leader's log up to there.
	CommitIndex uint64 `json:"commitIndex,omitempty"`
	Leader      string `json:"leader,omitempty"`
	Term        uint64 `json:"term"`
	// Observed is the address the answering node saw the request come
	// from: how the asking node is reached (see Options.AdvertiseLearn).
	Observed string `json:"observed,omitempty"`
	// Nonce is the asker's NonceParam, echoed inside the signature.
	Nonce string `json:"nonce,omitempty"`
}

// PeerSource is what the node needs of discovery (cluster/discovery).
type PeerSource interface {
	Peers(ctx context.Context) ([]discovery.Peer, error)
}

var (
	errForeign  = errors.New("cluster: peer answers for another cluster")
	errReplayed = errors.New("cluster: peer answer not bound to this request's nonce (replayed, or an older Gantry)")
)

func (n *Node) hello() Hello {
	_, leader := n.raft.LeaderWithID()
	member := n.isMember()
	return Hello{ClusterID: n.opts.ClusterID, NodeName: n.opts.NodeName, RaftAddr: n.advertise(),
		OpsAddr: n.opts.OpsAddr, HasState: n.hadState || member || n.raft.LastIndex() > 0, Member: member,
		CommitIndex: n.raft.CommitIndex(), Leader: string(leader), Term: n.raft.CurrentTerm()}
}

// PeerHandler serves the peer protocol; the appliance mounts it on the
// operations port.
func (n *Node) PeerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PeerPath, func(w http.ResponseWriter, r *http.Request) {
		nonce := r.URL.Query().Get(NonceParam)
		if err := checkNonce(nonce); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := n.hello()
		h.Observed, _, _ = net.SplitHostPort(r.RemoteAddr)
		h.Nonce = nonce
		n.writeSigned(w, http.StatusOK, h)
	})
	mux.HandleFunc("POST "+JoinPath, n.serveJoin)
	mux.HandleFunc("POST "+UsersPath, n.serveUsers)       // users.go
	mux.HandleFunc("POST "+LoTPath, n.serveLoT)           // lot.go
	mux.HandleFunc("POST "+CaughtUpPath, n.serveCaughtUp) // caughtup.go
	return mux
}

func (n *Node) writeSigned(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(status)
	w.Write(n.signer.Sign(data))
}

// readSigned verifies a signed answer to GET PeerPath (bound to its
// nonce by Hello.Nonce) and decodes it into v.
func (n *Node) readSigned(r io.Reader, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, maxPeerBody))
	if err != nil {
		return err
	}
	msg, err := n.signer.Verify(body)
	if err != nil {
		return err
	}
	return json.Unmarshal(msg.Payload, v)
}

// Requests signs and checks this node's requests to and from the other
// nodes (cluster/signing, "Requests"). The appliance shares it with the
// exchanges it serves itself (sessions, kept values), so that one replay
// cache, one bound on large bodies and one set of counters cover the
// node.
func (n *Node) Requests() *signing.Requests { return n.requests }

// readRequest verifies a request of the peer protocol for path, at most
// max bytes, and decodes it into v; it answers a refusal itself. The
// caller calls Done on the request once it answered.
func (n *Node) readRequest(w http.ResponseWriter, r *http.Request, path string, max int64, v any) (*signing.Request, bool) {
	req, err := n.requests.VerifyRequest(w, r, path, max)
	if err != nil {
		signing.WriteRefusal(w, err)
		return nil, false
	}
	if err := json.Unmarshal(req.Body, v); err != nil {
		req.Done()
		http.Error(w, "cluster: the request does not decode: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return req, true
}

// writeReply answers req with v, signed for it.
func (n *Node) writeReply(w http.ResponseWriter, req *signing.Request, status int, v any) {
	data, _ := json.Marshal(v)
	n.requests.WriteReply(w, status, req, data)
}

// postRequest sends v as a signed request to path on node to at opsAddr
// and decodes the reply signed for it into reply. It returns the answer's
// status and body (for an error message) and why its reply was not taken.
func postRequest(ctx context.Context, c *http.Client, q *signing.Requests, opsAddr, path, to string, v, reply any) (signing.Reply, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return signing.Reply{}, err
	}
	rep, err := q.Post(ctx, c, opsAddr, path, to, body, maxPeerReply)
	if err == nil && rep.Err == nil {
		rep.Err = json.Unmarshal(rep.Body, reply)
	}
	return rep, err
}

// maxPeerReply bounds an answer of the peer protocol.
const maxPeerReply = 1 << 20

// joinReply answers a join request.
type joinReply struct {
	Added  bool   `json:"added"`
	Leader string `json:"leader,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (n *Node) serveJoin(w http.ResponseWriter, r *http.Request) {
	var h Hello
	req, ok := n.readRequest(w, r, JoinPath, maxPeerBody, &h)
	if !ok {
		return
	}
	defer req.Done()
	if h.ClusterID != n.opts.ClusterID {
		n.writeReply(w, req, http.StatusConflict, joinReply{Error: errForeign.Error()})
		return
	}
	if n.raft.State() != raft.Leader {
		n.writeReply(w, req, http.StatusConflict, joinReply{Leader: n.Leader(), Error: ErrNotLeader.Error()})
		return
	}
	if err := n.addMember(h); err != nil {
		n.writeReply(w, req, http.StatusServiceUnavailable, joinReply{Error: err.Error()})
		return
	}
	n.writeReply(w, req, http.StatusOK, joinReply{Added: true})
}

// opsAddr is where a discovered peer answers the peer protocol.
func (n *Node) opsAddr(p discovery.Peer) string {
	if p.OpsAddr != "" {
		return p.OpsAddr
	}
	host, _, err := net.SplitHostPort(p.RaftAddr)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(n.opts.PeerOpsPort))
}

// checkNonce validates a NonceParam: 1 to maxNonce hex digits.
func checkNonce(nonce string) error {
	if nonce == "" || len(nonce) > maxNonce {
		return fmt.Errorf("cluster: %s %q: want 1..%d hex digits", NonceParam, nonce, maxNonce)
	}
	if _, err := hex.DecodeString(nonce); err != nil {
		return fmt.Errorf("cluster: %s %q: want an even number of hex digits", NonceParam, nonce)
	}
	return nil
}

// newNonce returns a fresh NonceParam.
func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fetchHello asks one peer who it is, with a fresh nonce: an answer that
// does not carry it back is refused (errReplayed).
func (n *Node) fetchHello(ctx context.Context, opsAddr string) (Hello, error) {
	var h Hello
	nonce := newNonce()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+opsAddr+PeerPath+"?"+NonceParam+"="+nonce, nil)
	if err != nil {
		return h, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("cluster: %s answered %s", opsAddr, resp.Status)
	}
	if err := n.readSigned(resp.Body, &h); err != nil {
		return h, fmt.Errorf("cluster: %s: %w", opsAddr, err)
	}
	if h.Nonce != nonce {
		return Hello{}, fmt.Errorf("%w: %s answered for nonce %q, asked with %q", errReplayed, opsAddr, h.Nonce, nonce)
	}
	if h.ClusterID != n.opts.ClusterID {
		return h, fmt.Errorf("%w: %s is in %q", errForeign, h.NodeName, h.ClusterID)
	}
	return h, nil
}

// survey is what discovery and the peer protocol found.
type survey struct {
	hellos     []Hello          // peers of this cluster that answered
	unanswered []discovery.Peer // peers that did not answer, or whose answer was refused
	foreign    []Hello          // peers that answered for another ClusterId
}

// describe names a peer for a person: its address and, when known, its name.
func describe(addr, name string) string {
	if name == "" {
		return addr
	}
	return addr + " (" + name + ")"
}

// discover lists the peers and asks each, concurrently, who it is.
func (n *Node) discover(ctx context.Context) survey {
	var s survey
	if n.opts.Discovery == nil {
		return s
	}
	peers, err := n.opts.Discovery.Peers(ctx)
	if err != nil {
		n.log.Warn("discovery failed", "err", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		// This node itself: by name when discovery knows names; by
		// address only when it does not (several gateways may advertise
		// the same address on a machine-cell interface).
		if p.NodeName == n.opts.NodeName || (p.NodeName == "" && p.RaftAddr == n.advertise()) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := n.opsAddr(p)
			h, err := n.fetchHello(ctx, addr)
			h.OpsAddr = addr // where it answered, whatever it advertises
			if p.RaftAddr != "" {
				h.RaftAddr = p.RaftAddr // where discovery found it: reachable from here
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errForeign):
				s.foreign = append(s.foreign, h)
			case err != nil:
				if errors.Is(err, errReplayed) || errors.Is(err, signing.ErrBadSignature) || errors.Is(err, signing.ErrUnsigned) ||
					errors.Is(err, signing.ErrUnexpectedSignature) || errors.Is(err, signing.ErrStale) {
					n.warnEvery("refused|"+addr, "peer answer refused", "peer", describe(p.RaftAddr, p.NodeName), "err", err)
				}
				s.unanswered = append(s.unanswered, p)
			case h.NodeName != n.opts.NodeName: // an address that reached this node is no peer
				s.hellos = append(s.hellos, h)
			}
		}()
	}
	wg.Wait()
	return s
}

// warnEvery logs a warning at most once a minute per key: the rounds repeat
// every ReconcileInterval, and so would their warnings.
func (n *Node) warnEvery(key, msg string, args ...any) {
	now := time.Now()
	n.mu.Lock()
	last, seen := n.warned[key]
	if !seen || now.Sub(last) >= time.Minute {
		if len(n.warned) > 1024 { // keys come from discovery: bound them
			clear(n.warned)
		}
		n.warned[key] = now
	}
	n.mu.Unlock()
	if !seen || now.Sub(last) >= time.Minute {
		n.log.Warn(msg, args...)
	}
}

// learnAdvertise adopts the address the peers see this node at, when
// Options.AdvertiseLearn allows it and every peer that answered agrees on
// one that differs from the advertised host. A leader also corrects its
// own entry in the configuration (the others' entries come from where
// discovery found them).
func (n *Node) learnAdvertise(s survey) {
	if !n.opts.AdvertiseLearn || len(s.hellos) == 0 {
		return
	}
	seen := s.hellos[0].Observed
	for _, h := range s.hellos {
		if h.Observed != seen {
			return // peers disagree (several networks): keep what we have
		}
	}
	host, port, err := net.SplitHostPort(n.advertise())
	if err != nil || seen == "" || seen == host {
		return
	}
	n.learned.Store(true)
	n.readvertise(net.JoinHostPort(seen, port), "peers reach this node at another address: advertising it")
}

// readvertise makes addr the address this node tells its peers; a leader
// also corrects its own entry in the configuration.
func (n *Node) readvertise(addr, why string) {
	n.log.Info(why, "was", n.advertise(), "now", addr)
	n.stream.setAdvertise(addr)
	if n.raft.State() == raft.Leader {
		if err := n.changeMembers(func() raft.IndexFuture {
			return n.raft.AddVoter(raft.ServerID(n.opts.NodeName), raft.ServerAddress(addr), 0, applyTimeout)
		}).Error(); err != nil {
			n.log.Warn("cannot record this node's new address", "err", err)
		}
	}
}

// requestJoin asks a peer that belongs to the cluster to add this node;
// only the leader acts on it.
func (n *Node) requestJoin(ctx context.Context, h Hello) (bool, error) {
	var rep joinReply
	ans, err := postRequest(ctx, n.http, n.requests, h.OpsAddr, JoinPath, h.NodeName, n.hello(), &rep)
	if err != nil {
		return false, err
	}
	if ans.Err != nil {
		return false, fmt.Errorf("cluster: join via %s: %d %s: %w", h.NodeName, ans.Status, bytes.TrimSpace(ans.Body), ans.Err)
	}
	if !rep.Added {
		return false, fmt.Errorf("cluster: join via %s: %s", h.NodeName, rep.Error)
	}
	return true, nil
}

// peerTimeout bounds one round of the peer protocol.
func (n *Node) peerTimeout() time.Duration { return n.opts.RPCTimeout + time.Second }
