package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/cluster/wire"
)

// Sessions that follow the client (see doc.go, "Sessions"): a persistent
// session is the cluster's. A CONNECT on this node first claims the
// client's session from the other nodes (ClaimSession): each closes its
// connection of that client (takeover) and says whether it holds the
// session; this node installs the holder's subscriptions and announces
// them, and only then asks the holder for the rest (export), which it
// takes over in order. A directory of every node's persistent sessions
// (sessions_directory.go) serves the client when the holder is down, and
// makes a returning holder hand over what it kept.

// Paths of the session exchange on the operations port. Every request and
// answer is signed with SharedSecret (the plane's Signer).
const (
	SessionsPath          = "/cluster/sessions"           // GET: this node's view (SessionsStatus)
	SessionsTakeoverPath  = "/cluster/sessions/takeover"  // POST: close the client's connection, report its session
	SessionsExportPath    = "/cluster/sessions/export"    // POST: hand the client's session over, whole
	SessionsHandoverPath  = "/cluster/sessions/handover"  // POST: take a session a returning holder kept
	SessionsDirectoryPath = "/cluster/sessions/directory" // POST: a node's persistent sessions
	SessionsFlushPath     = "/cluster/sessions/flush"     // POST: answer once From confirmed every record appended for it so far
)

// Session exchange timing.
const (
	claimWait     = 2 * time.Second        // a CONNECT waits this long for each step of a claim
	downWait      = 300 * time.Millisecond // and this long for a member whose link is down
	flushWait     = 3 * time.Second        // a flush waits this long for the peer's confirmation
	flushPoll     = 5 * time.Millisecond
	directoryPush = 2 * time.Second  // changes of the directory are pushed this often
	directoryFull = 30 * time.Second // and the whole directory this often regardless
	maxSessionMsg = 256 << 20        // the largest request or answer of the exchange
)

// SessionBroker is what the session exchange needs of the local broker:
// *broker.Server implements it.
type SessionBroker interface {
	TakeOver(clientID string) (*broker.SessionState, bool)
	ExportSession(clientID string, publishWill bool) (*broker.SessionState, bool)
	ImportSession(st *broker.SessionState) error
	PersistentSessions() []broker.SessionSummary
}

// SessionOptions configure the session exchange.
type SessionOptions struct {
	Broker SessionBroker
	// Members lists the other members of the cluster, by name.
	Members func() []string
	// PeerOps returns a member's operations address (host:port), "" when
	// it is not known.
	PeerOps func(ctx context.Context, member string) string
	// DataDir keeps when this node took each session (with durability);
	// "" keeps it in memory.
	DataDir string
	// HTTP is the client of the exchange; nil: one with claimWait.
	HTTP *http.Client
}

// Sessions is one node's part of the session exchange: the claimer of its
// broker's CONNECTs, the directory, and the handlers of the peers'
// requests (Handler).
type Sessions struct {
	p    *Plane
	opts SessionOptions
	log  *slog.Logger

	mu sync.Mutex // guards since, dir, version, pushed, savedSince
	// since is when this node took each session it holds (Unix ns): the
	// newer holder of a client wins.
	since map[string]int64
	dir   map[string]map[string]dirEntry // node → client → its session there
	heard map[string]time.Time           // node → when its last push arrived
	// version counts the changes of this node's sessions; pushed is the
	// version each member last took, and when.
	version    uint64
	pushed     map[string]pushMark
	savedSince bool // since is on disk as it is

	claims, tookOver, exported, imported, fromDirectory, returned, returnFailed, fromCopies atomic.Uint64

	wake chan struct{} // (capacity 1) a change to push
}

type pushMark struct {
	version uint64
	at      time.Time
}

// NewSessions builds the session exchange of p; Run pushes the directory.
func (p *Plane) NewSessions(opts SessionOptions) *Sessions {
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: flushWait + claimWait}
	}
	s := &Sessions{p: p, opts: opts, log: p.log.With("component", "sessions"), since: map[string]int64{},
		dir: map[string]map[string]dirEntry{}, heard: map[string]time.Time{}, pushed: map[string]pushMark{}, wake: make(chan struct{}, 1), savedSince: true}
	s.loadSince()
	return s
}

// sessionReq is a request of the exchange.
type sessionReq struct {
	ClusterID string     `json:"clusterId"`
	From      string     `json:"from"`
	Client    string     `json:"client,omitempty"`
	Clean     bool       `json:"clean,omitempty"`    // takeover: the new connection starts clean
	State     *wireState `json:"state,omitempty"`    // handover
	Sessions  []dirEntry `json:"sessions,omitempty"` // directory: every persistent session of From
}

// sessionReply is an answer of the exchange.
type sessionReply struct {
	Held  bool       `json:"held"`
	Since int64      `json:"since,omitempty"`
	State *wireState `json:"state,omitempty"` // takeover: subscriptions and expiry only
}

// wireState is a broker.SessionState between nodes; messages are in
// their wire encoding.
type wireState struct {
	Client      string                      `json:"client"`
	Expiry      uint32                      `json:"expiry"`
	Subs        []broker.SubscriptionRecord `json:"subs,omitempty"`
	Inflight    []wireEntry                 `json:"inflight,omitempty"`
	Queued      []wireEntry                 `json:"queued,omitempty"`
	InboundQoS2 []uint16                    `json:"inboundQoS2,omitempty"`
}

type wireEntry struct {
	Msg    []byte   `json:"m"`
	QoS    byte     `json:"q"`
	Retain bool     `json:"r,omitempty"`
	SubIDs []uint32 `json:"i,omitempty"`
	State  uint8    `json:"s,omitempty"`
	PID    uint16   `json:"p,omitempty"`
}

func encodeState(st *broker.SessionState) *wireState {
	if st == nil {
		return nil
	}
	w := &wireState{Client: st.ClientID, Expiry: st.Expiry, Subs: st.Subscriptions, InboundQoS2: st.InboundQoS2}
	enc := func(es []broker.EntryRecord) []wireEntry {
		out := make([]wireEntry, 0, len(es))
		for _, e := range es {
			out = append(out, wireEntry{Msg: wire.AppendMessage(nil, e.Msg), QoS: e.QoS, Retain: e.Retain, SubIDs: e.SubIDs,
				State: e.State, PID: e.PID})
		}
		return out
	}
	w.Inflight, w.Queued = enc(st.Inflight), enc(st.Queued)
	return w
}

func decodeState(w *wireState) (*broker.SessionState, error) {
	if w == nil || w.Client == "" {
		return nil, errors.New("dataplane: a session without a client id")
	}
	st := &broker.SessionState{ClientID: w.Client, Expiry: w.Expiry, Subscriptions: w.Subs, InboundQoS2: w.InboundQoS2}
	dec := func(ws []wireEntry) ([]broker.EntryRecord, error) {
		out := make([]broker.EntryRecord, 0, len(ws))
		for _, e := range ws {
			d, err := wire.DecodeMessage(e.Msg)
			if err != nil {
				return nil, err
			}
			if e.QoS == 0 || e.QoS > 2 {
				return nil, fmt.Errorf("%w: a queued message at QoS %d", wire.ErrCorrupt, e.QoS)
			}
			out = append(out, broker.EntryRecord{Msg: d.Msg, QoS: e.QoS, Retain: e.Retain, SubIDs: e.SubIDs, State: e.State, PID: e.PID})
		}
		return out, nil
	}
	var err error
	if st.Inflight, err = dec(w.Inflight); err != nil {
		return nil, err
	}
	if st.Queued, err = dec(w.Queued); err != nil {
		return nil, err
	}
	return st, nil
}

// ClaimSession implements broker.SessionClaimer: before a client's
// connection attaches here, every other member closes its connection of
// that client (takeover) and says whether it holds the session. With a
// clean start they discard it. Otherwise this node takes the holder's
// subscriptions, announces them (so that what is published from now on
// reaches this node too), then takes the rest of the session; when no
// member that answered holds it, the directory's entry of a member that
// did not answer (down) gives the subscriptions, and that member hands the
// messages over when it returns.
func (s *Sessions) ClaimSession(info *broker.ConnInfo, cleanStart bool, expiry uint32) {
	if strings.HasPrefix(info.ClientID, linkClientPrefix) && info.Username == s.p.opts.Username {
		return // a peer's link
	}
	members := s.opts.Members()
	if len(members) == 0 {
		return
	}
	s.claims.Add(1)
	client := info.ClientID
	replies := s.askAll(members, SessionsTakeoverPath, sessionReq{Client: client, Clean: cleanStart})
	if cleanStart {
		s.forget(client)
		if expiry > 0 {
			s.took(client)
		}
		return
	}
	var holders []string
	answered := map[string]bool{}
	for _, m := range members {
		r, ok := replies[m]
		if !ok {
			continue
		}
		answered[m] = true
		if r.Held {
			holders = append(holders, m)
		}
	}
	// The newest holder's messages go last: each import goes ahead of
	// what the session holds here.
	slices.SortFunc(holders, func(a, b string) int { return -cmpInt64(replies[a].Since, replies[b].Since) })
	if len(holders) > 0 {
		s.claimFrom(client, holders, replies)
	} else if e, node, ok := s.lookup(client, answered); ok {
		// Its holder is down: the subscriptions are known; the messages
		// follow when it returns (it sees this node's newer claim).
		st := &broker.SessionState{ClientID: client, Expiry: e.Expiry, Subscriptions: e.Subs}
		if err := s.opts.Broker.ImportSession(st); err == nil {
			s.announce(st.Subscriptions)
			s.fromDirectory.Add(1)
			n := s.redeliverFromCopies(client, e, s.heardFrom(node))
			s.fromCopies.Add(uint64(n))
			s.log.Info("session taken from the directory: its holder does not answer", "client", client, "holder", node,
				"redelivered_from_copies", n)
		}
	}
	if expiry > 0 || len(holders) > 0 {
		s.took(client)
	}
}

// claimFrom takes client's session from holders: subscriptions first,
// announced to every peer, then each holder's messages.
func (s *Sessions) claimFrom(client string, holders []string, replies map[string]sessionReply) {
	var subs []broker.SubscriptionRecord
	for _, h := range holders {
		r := replies[h]
		if r.State == nil {
			continue
		}
		st := &broker.SessionState{ClientID: client, Expiry: r.State.Expiry, Subscriptions: r.State.Subs}
		if err := s.opts.Broker.ImportSession(st); err != nil {
			s.log.Warn("session claim refused", "client", client, "err", err)
			return
		}
		subs = append(subs, r.State.Subs...)
	}
	s.announce(subs)
	for _, h := range holders {
		var r sessionReply
		if err := s.post(h, SessionsExportPath, sessionReq{Client: client}, &r); err != nil {
			// It went down in the middle: it holds the messages and hands
			// them over when it returns (this node's claim is newer).
			s.log.Warn("session handover interrupted: the holder hands the messages over when it returns", "client", client,
				"holder", h, "err", err)
			continue
		}
		if !r.Held {
			continue
		}
		st, err := decodeState(r.State)
		if err == nil {
			err = s.opts.Broker.ImportSession(st)
		}
		if err != nil {
			s.log.Error("session handover failed: its messages are lost", "client", client, "holder", h, "err", err)
			continue
		}
		s.imported.Add(1)
		s.log.Debug("session taken over", "client", client, "holder", h, "inflight", len(st.Inflight), "queued", len(st.Queued))
	}
}

// announce tells every peer whose link is up about the filters (as a
// SUBSCRIBE does) and waits for their confirmation, at most ackWait.
func (s *Sessions) announce(subs []broker.SubscriptionRecord) {
	filters := make([]string, 0, len(subs))
	for _, r := range subs {
		filters = append(filters, r.Filter)
	}
	done := make(chan struct{})
	if s.p.SubscriptionsAdded(filters, func() { close(done) }) {
		<-done // SubscriptionsAdded calls it once, within ackWait
	}
}

// askAll posts req to every member at once and returns the answers of
// those that answered.
func (s *Sessions) askAll(members []string, path string, req sessionReq) map[string]sessionReply {
	var mu sync.Mutex
	out := make(map[string]sessionReply, len(members))
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r sessionReply
			wait := claimWait
			if !s.linkUp(m) {
				wait = downWait // most likely down: a CONNECT does not wait long for it
			}
			if err := s.postWithin(wait, m, path, req, &r); err != nil {
				s.p.warn("sessions-"+m, "a member did not answer a session claim", fmt.Errorf("%s: %w", m, err))
				return
			}
			mu.Lock()
			out[m] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// linkUp reports whether this node's link to member is connected.
func (s *Sessions) linkUp(member string) bool {
	s.p.mu.RLock()
	defer s.p.mu.RUnlock()
	l := s.p.links[member]
	return l != nil && l.connected.Load()
}

// serveTakeover closes this node's connection of the client and reports
// its session (subscriptions and expiry); with Clean it ends the session
// here (its will is published: the session ended).
func (s *Sessions) serveTakeover(req *sessionReq) sessionReply {
	st, held := s.opts.Broker.TakeOver(req.Client)
	if held {
		s.tookOver.Add(1)
	}
	if !held || req.Clean {
		if held {
			s.opts.Broker.ExportSession(req.Client, true)
		}
		s.forget(req.Client)
		return sessionReply{}
	}
	return sessionReply{Held: true, Since: s.sinceOf(req.Client),
		State: &wireState{Client: st.ClientID, Expiry: st.Expiry, Subs: st.Subscriptions}}
}

// serveExport hands the client's session over whole and forgets it here.
// First every peer flushes its stream to this node: a record a peer
// passed over for the claiming node before it knew its new subscriptions
// is then delivered here, and exported, rather than arriving after the
// export and lost.
func (s *Sessions) serveExport(req *sessionReq) sessionReply {
	if _, held := s.opts.Broker.TakeOver(req.Client); !held {
		return sessionReply{}
	}
	s.flushAll()
	s.awaitOwnWrites()
	st, held := s.opts.Broker.ExportSession(req.Client, false)
	if !held {
		return sessionReply{}
	}
	s.forget(req.Client)
	s.exported.Add(1)
	return sessionReply{Held: true, State: encodeState(st)}
}

// flushAll asks every member whose link is up to flush its stream to this
// node, and waits for their answers.
func (s *Sessions) flushAll() {
	var up []string
	for _, m := range s.opts.Members() {
		if s.linkUp(m) {
			up = append(up, m)
		}
	}
	var wg sync.WaitGroup
	for _, m := range up {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r sessionReply
			err := s.postWithin(flushWait+claimWait, m, SessionsFlushPath, sessionReq{}, &r)
			if err == nil && !r.Held {
				err = errors.New("not confirmed in time")
			}
			if err != nil {
				s.p.warn("flush-"+m, "a member did not flush its stream before a session handover", fmt.Errorf("%s: %w", m, err))
			}
		}()
	}
	wg.Wait()
}

// awaitOwnWrites waits, at most flushWait, until the quorum writes of
// this node's publishes that wait for their majority now are decided: a
// publish reaches this node's subscribers only then, and one published
// here before the claim, decided after the export, would reach neither
// this node's copy of the session (gone) nor the claiming node's (which
// had it as a copy before it installed the subscriptions). The routing
// that follows a decision runs on the resolving goroutine right after it;
// a short wait covers it.
func (s *Sessions) awaitOwnWrites() {
	if s.p.gate == nil {
		return
	}
	o := s.p.out
	var pending []*quorumWrite
	o.mu.Lock()
	for i := range o.entries {
		if q := o.entries[i].rep.quorum(); q != nil && q.state.Load() == qPending {
			pending = append(pending, q)
		}
	}
	o.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	deadline := time.Now().Add(flushWait)
	for _, q := range pending {
		for q.state.Load() == qPending && time.Now().Before(deadline) {
			time.Sleep(flushPoll)
		}
	}
	time.Sleep(2 * flushPoll)
}

// serveFlush answers once peer has confirmed every reliable record this
// node appended so far (delivered them: its confirmation waits for that),
// or after flushWait.
func (s *Sessions) serveFlush(peer string) sessionReply {
	s.p.mu.RLock()
	l := s.p.links[peer]
	s.p.mu.RUnlock()
	if l == nil {
		return sessionReply{}
	}
	o := s.p.out
	o.mu.Lock()
	target := o.head()
	signal(l.ps)
	o.mu.Unlock()
	deadline := time.Now().Add(flushWait)
	for {
		o.mu.Lock()
		done := l.ps.cursor >= target || o.peers[peer] != l.ps
		o.mu.Unlock()
		if done {
			return sessionReply{Held: true}
		}
		if time.Now().After(deadline) {
			return sessionReply{}
		}
		time.Sleep(flushPoll)
	}
}

// serveHandover takes a session a returning holder kept, when this node
// holds the client's session now; otherwise it answers not held, and the
// sender keeps it.
func (s *Sessions) serveHandover(req *sessionReq) (sessionReply, error) {
	st, err := decodeState(req.State)
	if err != nil {
		return sessionReply{}, err
	}
	if s.sinceOf(st.ClientID) == 0 && !s.holds(st.ClientID) {
		return sessionReply{}, nil
	}
	if err := s.opts.Broker.ImportSession(st); err != nil {
		return sessionReply{}, err
	}
	s.imported.Add(1)
	s.log.Info("session messages handed over by a returning node", "client", st.ClientID, "from", req.From,
		"inflight", len(st.Inflight), "queued", len(st.Queued))
	return sessionReply{Held: true}, nil
}

// holds reports whether the broker has a persistent session of client.
func (s *Sessions) holds(client string) bool {
	for _, ss := range s.opts.Broker.PersistentSessions() {
		if ss.ClientID == client {
			return true
		}
	}
	return false
}

// returnSession hands client's session, which node holds now (a newer
// claim made while this node was away), over to it; on failure the
// session stays here and the next directory push tries again.
func (s *Sessions) returnSession(client, node string) {
	st, held := s.opts.Broker.ExportSession(client, false)
	if !held {
		return
	}
	var r sessionReply
	err := s.post(node, SessionsHandoverPath, sessionReq{State: encodeState(st)}, &r)
	if err == nil && r.Held {
		s.forget(client)
		s.returned.Add(1)
		s.log.Info("handed a session over to the node that holds it now", "client", client, "to", node,
			"inflight", len(st.Inflight), "queued", len(st.Queued))
		return
	}
	s.returnFailed.Add(1)
	if err == nil {
		err = errors.New("it does not hold the session")
	}
	s.p.warn("return-"+client, "a session stays on this node: its new holder did not take it", fmt.Errorf("%s to %s: %w", client, node, err))
	st.Inflight, st.Queued = append(st.Inflight, st.Queued...), nil // sent again as new deliveries is safer than lost
	for i := range st.Inflight {
		st.Inflight[i].PID = 0
	}
	if ierr := s.opts.Broker.ImportSession(st); ierr != nil {
		s.log.Error("a session could not be kept after a failed handover", "client", client, "err", ierr)
	}
}

// took records that this node holds client's session from now on.
func (s *Sessions) took(client string) {
	s.mu.Lock()
	s.since[client] = time.Now().UnixNano()
	s.changedLocked()
	s.mu.Unlock()
}

// forget records that this node no longer holds client's session.
func (s *Sessions) forget(client string) {
	s.mu.Lock()
	if _, ok := s.since[client]; ok {
		delete(s.since, client)
	}
	s.changedLocked()
	s.mu.Unlock()
}

func (s *Sessions) heardFrom(node string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard[node]
}

func (s *Sessions) sinceOf(client string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since[client]
}

// changedLocked counts a change of this node's sessions; the caller holds
// s.mu.
func (s *Sessions) changedLocked() {
	s.version++
	s.savedSince = false
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Observe implements broker.Observer: a client's connect, disconnect or
// subscription change is pushed to the directory.
func (s *Sessions) Observe(e broker.Event) {
	if strings.HasPrefix(e.ClientID, linkClientPrefix) && e.Username == s.p.opts.Username {
		return
	}
	s.mu.Lock()
	s.version++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
