package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"gantry/cluster/signing"
	"gantry/lot/runtime"
)

// This file sends the values of KEEP TOPIC to every node's topic cache
// (docs/cluster.md, "ON START and KEEP"): each value kept on this node is
// pushed, signed, to every other member (POST /cluster/kept), coalesced
// per topic and retried while a member does not answer; a node that
// starts asks every member for all its kept values once (POST
// /cluster/kept/all). The receiving node merges them into its cache, the
// later write winning: they reach no subscriber and trigger nothing there.

// Paths of the kept values' exchange on the operations port.
const (
	keptPath    = "/cluster/kept"     // POST a signed keptPush
	keptAllPath = "/cluster/kept/all" // POST a signed keptAsk: answered with a signed keptPush of every value
)

const (
	keptSendEvery   = 100 * time.Millisecond // batching of pushes
	keptBatch       = 2000                   // values per push at most
	keptRetryAfter  = time.Second            // wait after a member did not answer
	keptMaxPending  = 100_000                // values held for one member (per topic): the cache's own bound
	maxKeptPushBody = 64 << 20
)

// keptPush carries kept values between nodes.
type keptPush struct {
	ClusterID string              `json:"clusterId"`
	From      string              `json:"from"`
	Values    []runtime.KeptValue `json:"values"`
}

// keptAsk asks a member for every value it keeps.
type keptAsk struct {
	ClusterID string `json:"clusterId"`
	From      string `json:"from"`
}

// keptSync is the LoT engine's runtime.KeptReplicator on a clustered
// node, and the loop that sends.
type keptSync struct {
	n      *Node
	signer *signing.Signer // whether a secret is set; the requests are the cluster node's (Node.Cluster.Requests)
	http   *http.Client
	wake   chan struct{} // (capacity 1) something to send

	mu      sync.Mutex                              // guards the fields below
	members []string                                // the other members, as last seen by the loop
	pending map[string]map[string]runtime.KeptValue // member → topic → latest value not yet sent
	retryAt map[string]time.Time                    // member → when to try again
	dropped uint64                                  // values not held for a member beyond keptMaxPending
}

func newKeptSync(n *Node) *keptSync {
	return &keptSync{n: n, signer: signing.New([]byte(n.cfg.Cluster.SharedSecret), nil),
		http: &http.Client{Timeout: 5 * time.Second}, wake: make(chan struct{}, 1),
		pending: map[string]map[string]runtime.KeptValue{}, retryAt: map[string]time.Time{}}
}

// Kept implements runtime.KeptReplicator.
func (k *keptSync) Kept(topic string, payload []byte, at time.Time) {
	v := runtime.KeptValue{Topic: topic, Payload: bytes.Clone(payload), At: at}
	k.mu.Lock()
	for _, m := range k.members {
		k.queue(m, v)
	}
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// queue holds v for member (mu held), coalesced with what waits there.
func (k *keptSync) queue(member string, v runtime.KeptValue) {
	p := k.pending[member]
	if p == nil {
		p = map[string]runtime.KeptValue{}
		k.pending[member] = p
	}
	if old, ok := p[v.Topic]; ok && old.At.After(v.At) {
		return
	}
	if _, ok := p[v.Topic]; !ok && len(p) >= keptMaxPending {
		k.dropped++
		return
	}
	p[v.Topic] = v
}

// run sends until stop closes; first it asks every member for what it
// keeps (a node that was down, or is new, gets the values).
func (k *keptSync) run(stop <-chan struct{}) {
	t := time.NewTicker(keptSendEvery)
	defer t.Stop()
	asked := map[string]bool{}
	for {
		k.refreshMembers()
		for _, m := range k.memberList() {
			if !asked[m] && k.askAll(m) {
				asked[m] = true
			}
			k.send(m)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		case <-k.wake:
		}
	}
}

func (k *keptSync) refreshMembers() {
	var others []string
	for _, m := range k.n.Cluster.Status().Members {
		if !m.Self {
			others = append(others, m.Name)
		}
	}
	k.mu.Lock()
	k.members = others
	k.mu.Unlock()
}

func (k *keptSync) memberList() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.members...)
}

// send pushes what waits for member, a batch at a time.
func (k *keptSync) send(member string) {
	k.mu.Lock()
	p := k.pending[member]
	if len(p) == 0 || time.Now().Before(k.retryAt[member]) {
		k.mu.Unlock()
		return
	}
	batch := make([]runtime.KeptValue, 0, min(len(p), keptBatch))
	for tp, v := range p {
		batch = append(batch, v)
		delete(p, tp)
		if len(batch) == keptBatch {
			break
		}
	}
	k.mu.Unlock()
	err := k.post(member, keptPath, keptPush{ClusterID: k.n.cfg.Cluster.ClusterId, From: k.n.cfg.Cluster.NodeName, Values: batch}, nil)
	if err == nil {
		return
	}
	k.mu.Lock()
	for _, v := range batch {
		k.queue(member, v) // unless a newer one waits meanwhile
	}
	k.retryAt[member] = time.Now().Add(keptRetryAfter)
	k.mu.Unlock()
}

// askAll merges every value member keeps; it reports whether it answered.
func (k *keptSync) askAll(member string) bool {
	var got keptPush
	if err := k.post(member, keptAllPath, keptAsk{ClusterID: k.n.cfg.Cluster.ClusterId, From: k.n.cfg.Cluster.NodeName}, &got); err != nil {
		return false
	}
	merged := 0
	for _, v := range got.Values {
		if ok, _ := k.n.LoT.MergeKept(v); ok {
			merged++
		}
	}
	if merged > 0 {
		k.n.log.Info("kept values taken from another node", "component", "lot", "from", member, "values", merged)
	}
	// And the other way: what this node kept while member was away and
	// this node restarted (its queue for member did not survive).
	own := k.n.LoT.KeptValues()
	k.mu.Lock()
	for _, v := range own {
		k.queue(member, v)
	}
	k.mu.Unlock()
	return true
}

// post sends body, signed, to member's operations endpoint at path and
// decodes the signed answer into reply (when not nil).
func (k *keptSync) post(member, path string, body, reply any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops := k.n.Cluster.PeerOps(ctx, member)
	if ops == "" {
		return fmt.Errorf("the operations address of %s is not known", member)
	}
	data, _ := json.Marshal(body)
	_, maxReply := keptLimits(path)
	ans, err := k.n.Cluster.Requests().Post(ctx, k.http, ops, path, member, data, maxReply)
	if err != nil {
		return err
	}
	if ans.Status != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", member, ans.Status, bytes.TrimSpace(ans.Body))
	}
	if ans.Err != nil {
		return fmt.Errorf("%s: %w", member, ans.Err)
	}
	if reply == nil {
		return nil
	}
	return json.Unmarshal(ans.Body, reply)
}

// keptLimits bounds a path's request and reply: values travel in a push
// and in the answer to an ask only.
func keptLimits(path string) (request, reply int64) {
	if path == keptPath {
		return maxKeptPushBody, 64 << 10
	}
	return 64 << 10, maxKeptPushBody
}

// serveKept merges a member's push.
func (k *keptSync) serveKept(w http.ResponseWriter, r *http.Request) {
	var p keptPush
	req, ok := k.readSigned(w, r, keptPath, &p)
	if !ok {
		return
	}
	defer req.Done()
	for _, v := range p.Values {
		k.n.LoT.MergeKept(v)
	}
	k.n.Cluster.Requests().WriteReply(w, http.StatusOK, req, nil)
}

// serveKeptAll answers a member's ask with every kept value.
func (k *keptSync) serveKeptAll(w http.ResponseWriter, r *http.Request) {
	var a keptAsk
	req, ok := k.readSigned(w, r, keptAllPath, &a)
	if !ok {
		return
	}
	defer req.Done()
	data, _ := json.Marshal(keptPush{ClusterID: k.n.cfg.Cluster.ClusterId, From: k.n.cfg.Cluster.NodeName, Values: k.n.LoT.KeptValues()})
	k.n.Cluster.Requests().WriteReply(w, http.StatusOK, req, data)
}

// readSigned verifies a request for path and decodes its body, answering
// a refusal itself; the cluster's id must be this node's. The caller
// calls Done on the request once it answered.
func (k *keptSync) readSigned(w http.ResponseWriter, r *http.Request, path string, v any) (*signing.Request, bool) {
	if !k.signer.Enabled() {
		http.Error(w, "kept values between nodes need Cluster.SharedSecret", http.StatusForbidden)
		return nil, false
	}
	max, _ := keptLimits(path)
	req, err := k.n.Cluster.Requests().VerifyRequest(w, r, path, max)
	if err != nil {
		signing.WriteRefusal(w, err)
		return nil, false
	}
	if err := json.Unmarshal(req.Body, v); err != nil {
		req.Done()
		http.Error(w, "the request does not decode", http.StatusBadRequest)
		return nil, false
	}
	var id string
	switch x := v.(type) {
	case *keptPush:
		id = x.ClusterID
	case *keptAsk:
		id = x.ClusterID
	}
	if id != k.n.cfg.Cluster.ClusterId {
		req.Done()
		http.Error(w, "another cluster", http.StatusConflict)
		return nil, false
	}
	return req, true
}

// startKeptSync runs the sender until Shutdown.
func (n *Node) startKeptSync() {
	if n.keptSync == nil || n.Cluster == nil {
		return
	}
	if !n.keptSync.signer.Enabled() {
		n.log.Warn("KEEP TOPIC values stay on their node: exchanging them between nodes needs Cluster.SharedSecret", "component", "lot")
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.keptSync.run(n.stop)
	}()
}
