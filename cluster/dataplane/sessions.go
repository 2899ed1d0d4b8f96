package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
// takes over in order, in bounded parts (sessions_export.go); the holder
// keeps the session until this node confirms it stored it. A directory of every node's persistent sessions
// (sessions_directory.go) serves the client when the holder is down, and
// makes a returning holder hand over what it kept.

// Paths of the session exchange on the operations port. Every request and
// answer is signed with SharedSecret (the plane's Signer).
const (
	SessionsPath          = "/cluster/sessions"             // GET: this node's view (SessionsStatus)
	SessionsTakeoverPath  = "/cluster/sessions/takeover"    // POST: close the client's connection, report its session
	SessionsExportPath    = "/cluster/sessions/export"      // POST: lend the client's session, answer its first part
	SessionsPartPath      = "/cluster/sessions/export/part" // POST: the next part of a lent session
	SessionsDonePath      = "/cluster/sessions/export/done" // POST: the borrower stored it (release) or not (take it back)
	SessionsHandoverPath  = "/cluster/sessions/handover"    // POST: a returning holder offers a session it kept (pulled in parts)
	SessionsDirectoryPath = "/cluster/sessions/directory"   // POST: a node's persistent sessions
	SessionsFlushPath     = "/cluster/sessions/flush"       // POST: answer once From confirmed every record appended for it so far
	// SessionsDirectorySyncPath: POST a node's persistent sessions, answered
	// with this node's (when a link comes up: sessions_links.go).
	SessionsDirectorySyncPath = "/cluster/sessions/directory/sync"
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
	slowClaim     = time.Second      // a claim that takes longer is logged, with its steps
	// liveSilence is how long a member whose link is up may have sent
	// nothing before a CONNECT stops waiting for it as if it were down:
	// the link pings every linkPingEvery, and a live peer answers at
	// once; a frozen one (SIGSTOP) keeps its connections open and
	// answers nothing.
	liveSilence = linkPingEvery + 500*time.Millisecond
)

// SessionBroker is what the session exchange needs of the local broker:
// *broker.Server implements it.
type SessionBroker interface {
	TakeOver(clientID string) (*broker.SessionState, bool)
	ExportSession(clientID string, publishWill bool) (*broker.SessionState, bool)
	LendSession(clientID string) (*broker.LentSession, bool)
	ImportSession(st *broker.SessionState) error
	ImportSessionAfter(st *broker.SessionState, after *broker.Message) (*broker.Message, error)
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
	// PartBytes and PartEntries bound one part of a session handed over
	// (the messages' encoded bytes, and their number; a message larger
	// than PartBytes goes alone); 0: partBytes, partEntries.
	PartBytes, PartEntries int
	// LendWait is how long a lent session waits for its borrower's next
	// request before it is taken back; 0: lendWait.
	LendWait time.Duration
}

// Sessions is one node's part of the session exchange: the claimer of its
// broker's CONNECTs, the directory, and the handlers of the peers'
// requests (Handler).
type Sessions struct {
	p    *Plane
	opts SessionOptions
	log  *slog.Logger

	mu sync.Mutex // guards since, dir, version, pushed, savedSince, claiming
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
	// claiming counts the claims of each client running here: until one
	// ends (and records this node's claim in since), a directory push of
	// the holder still lists the session with a newer claim than this
	// node's, and must not make this node hand back what it is taking.
	claiming map[string]int

	claims, tookOver, exported, imported, fromDirectory, returned, returnFailed, fromCopies, takenBack atomic.Uint64

	lmu     sync.Mutex       // guards lends, lendSeq; taken after mu, never with it held the other way
	lends   map[string]*lend // client → its session lent to another node
	lendSeq uint64

	wake chan struct{} // (capacity 1) a change to push
}

type pushMark struct {
	version uint64
	at      time.Time
}

// NewSessions builds the session exchange of p; Run pushes the directory.
func (p *Plane) NewSessions(opts SessionOptions) *Sessions {
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: returnWait}
	}
	if opts.PartBytes <= 0 {
		opts.PartBytes = partBytes
	}
	if opts.PartEntries <= 0 {
		opts.PartEntries = partEntries
	}
	if opts.LendWait <= 0 {
		opts.LendWait = lendWait
	}
	s := &Sessions{p: p, opts: opts, log: p.log.With("component", "sessions"), since: map[string]int64{},
		dir: map[string]map[string]dirEntry{}, heard: map[string]time.Time{}, pushed: map[string]pushMark{}, wake: make(chan struct{}, 1), savedSince: true,
		lends: map[string]*lend{}, claiming: map[string]int{}}
	// Lend numbers start anywhere: a borrower's request for a lend of
	// this node's previous run (its answer lost, the node restarted) must
	// not match a new lend of the same client to the same node, or its
	// confirmation would release a session the borrower never pulled.
	s.lendSeq = rand.Uint64() >> 1
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
	Lend      uint64     `json:"lend,omitempty"`     // part, done, handover: the lent session
	Offset    int        `json:"offset,omitempty"`   // part: its first entry (in-flight ones, then queued)
	Stored    bool       `json:"stored,omitempty"`   // done: the borrower has it on disk (or in memory without durability)
}

// sessionReply is an answer of the exchange.
type sessionReply struct {
	Held  bool       `json:"held"`
	Since int64      `json:"since,omitempty"`
	State *wireState `json:"state,omitempty"` // takeover: subscriptions and expiry only; export, part: one part
	Lend  uint64     `json:"lend,omitempty"`  // export: the lent session's number
	More  bool       `json:"more,omitempty"`  // export, part: another part follows
	// Sessions is the answering node's directory (directory exchange).
	Sessions []dirEntry `json:"sessions,omitempty"`
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
	// Delivered names the messages the client acknowledged lately on the
	// sending node (broker.SessionState.Delivered): the taker drops its
	// own copies of them. In the first part only.
	Delivered []wireRecord `json:"delivered,omitempty"`
}

type wireEntry struct {
	Msg    []byte   `json:"m"`
	QoS    byte     `json:"q"`
	Retain bool     `json:"r,omitempty"`
	SubIDs []uint32 `json:"i,omitempty"`
	State  uint8    `json:"s,omitempty"`
	PID    uint16   `json:"p,omitempty"`
	// Rec is the message's identity in its origin's stream
	// (broker.Message.Record), which wire.AppendMessage does not carry:
	// the taker drops its own queued copy of the same message.
	Rec *wireRecord `json:"o,omitempty"`
}

// wireRecord is a broker.PeerRecord between nodes.
type wireRecord struct {
	Node string `json:"n"`
	Boot uint64 `json:"b"`
	Seq  uint64 `json:"s"`
}

func wireRec(r broker.PeerRecord) wireRecord {
	return wireRecord{Node: r.Node, Boot: r.Boot, Seq: r.Seq}
}

func (r wireRecord) peer() broker.PeerRecord {
	return broker.PeerRecord{Node: r.Node, Boot: r.Boot, Seq: r.Seq}
}

// toWire is e between nodes; msg is its message's wire encoding.
func toWire(e broker.EntryRecord, msg []byte) wireEntry {
	w := wireEntry{Msg: msg, QoS: e.QoS, Retain: e.Retain, SubIDs: e.SubIDs, State: e.State, PID: e.PID}
	if r := e.Msg.Record; r != (broker.PeerRecord{}) {
		wr := wireRec(r)
		w.Rec = &wr
	}
	return w
}

func encodeState(st *broker.SessionState) *wireState {
	if st == nil {
		return nil
	}
	w := &wireState{Client: st.ClientID, Expiry: st.Expiry, Subs: st.Subscriptions, InboundQoS2: st.InboundQoS2}
	enc := func(es []broker.EntryRecord) []wireEntry {
		out := make([]wireEntry, 0, len(es))
		for _, e := range es {
			out = append(out, toWire(e, wire.AppendMessage(nil, e.Msg)))
		}
		return out
	}
	w.Inflight, w.Queued = enc(st.Inflight), enc(st.Queued)
	w.Delivered = toWireRecords(st.Delivered)
	return w
}

func toWireRecords(rs []broker.PeerRecord) []wireRecord {
	if len(rs) == 0 {
		return nil
	}
	out := make([]wireRecord, 0, len(rs))
	for _, r := range rs {
		out = append(out, wireRec(r))
	}
	return out
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
			if r := e.Rec; r != nil {
				d.Msg.Record = r.peer()
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
	for _, r := range w.Delivered {
		st.Delivered = append(st.Delivered, r.peer())
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
	s.mu.Lock()
	s.claiming[client]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.claiming[client]--; s.claiming[client] == 0 {
			delete(s.claiming, client)
		}
		s.mu.Unlock()
	}()
	// Lent by this node and not confirmed yet: it is here again whole; the
	// borrower hands over what it imported (some of it twice).
	s.takeBack(client, "the client connected here again")
	start := time.Now()
	replies := s.askAll(members, SessionsTakeoverPath, sessionReq{Client: client, Clean: cleanStart})
	asked := time.Since(start)
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
	var announced time.Duration
	defer func() {
		if took := time.Since(start); took > slowClaim {
			s.log.Info("a session claim was slow", "client", client, "took", took, "takeover", asked, "announce", announced,
				"answered", len(answered), "members", len(members))
		}
	}()
	if len(holders) > 0 {
		announced = s.claimFrom(client, holders, replies)
	} else if e, node, ok := s.lookup(client, answered); ok {
		// Its holder is down: the subscriptions are known; the messages
		// follow when it returns (it sees this node's newer claim).
		st := &broker.SessionState{ClientID: client, Expiry: e.Expiry, Subscriptions: e.Subs}
		if err := s.opts.Broker.ImportSession(st); err == nil {
			announced = s.announce(st.Subscriptions)
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
// announced to every peer, then each holder's messages. It returns how
// long the announcement took.
func (s *Sessions) claimFrom(client string, holders []string, replies map[string]sessionReply) time.Duration {
	var subs []broker.SubscriptionRecord
	for _, h := range holders {
		r := replies[h]
		if r.State == nil {
			continue
		}
		st := &broker.SessionState{ClientID: client, Expiry: r.State.Expiry, Subscriptions: r.State.Subs}
		if err := s.opts.Broker.ImportSession(st); err != nil {
			s.log.Warn("session claim refused", "client", client, "err", err)
			return 0
		}
		subs = append(subs, r.State.Subs...)
	}
	announced := s.announce(subs)
	for _, h := range holders {
		// The holder flushes its peers' streams first (flushWait) and
		// waits for its own quorum writes.
		var r sessionReply
		if err := s.postWithin(flushWait+s.partWait(), h, SessionsExportPath, sessionReq{Client: client}, &r); err != nil {
			// The holder keeps the session it lent, and hands it over
			// again once this node's next request does not come.
			s.log.Warn("session handover interrupted: the holder keeps the messages and hands them over again", "client", client,
				"holder", h, "err", err)
			continue
		}
		if r.Held {
			s.pull(h, client, r)
		}
	}
	return announced
}

// announce tells every peer whose link is up about the filters (as a
// SUBSCRIBE does) and waits for their confirmation, at most ackWait; it
// returns how long it waited.
func (s *Sessions) announce(subs []broker.SubscriptionRecord) time.Duration {
	start := time.Now()
	filters := make([]string, 0, len(subs))
	for _, r := range subs {
		filters = append(filters, r.Filter)
	}
	done := make(chan struct{})
	if s.p.SubscriptionsAdded(filters, func() { close(done) }) {
		<-done // SubscriptionsAdded calls it once, within ackWait
	}
	return time.Since(start)
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
			// A member whose link is down, or silent (frozen), is most
			// likely down: a CONNECT does not wait long for it.
			var r sessionReply
			if err := s.postLive(claimWait, m, path, req, &r); err != nil {
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
		if req.Clean {
			s.dropLend(req.Client) // the session ends wherever it is
		}
		s.forget(req.Client)
		return sessionReply{}
	}
	return sessionReply{Held: true, Since: s.sinceOf(req.Client),
		State: &wireState{Client: st.ClientID, Expiry: st.Expiry, Subs: st.Subscriptions}}
}

// flushAll asks every member whose link is up and live to flush its
// stream to this node, and waits for their answers (not for one that
// turns silent meanwhile: a frozen member cannot flush, as one whose link
// is down cannot).
func (s *Sessions) flushAll() {
	var up []string
	for _, m := range s.opts.Members() {
		if s.live(m) {
			up = append(up, m)
		}
	}
	var wg sync.WaitGroup
	for _, m := range up {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r sessionReply
			err := s.postLive(flushWait+claimWait, m, SessionsFlushPath, sessionReq{}, &r)
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
	for i := range o.entries.len() {
		if q := o.entries.at(i).rep.quorum(); q != nil && q.undecided() {
			pending = append(pending, q)
		}
	}
	o.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	deadline := time.Now().Add(flushWait)
	for _, q := range pending {
		for q.undecided() && time.Now().Before(deadline) {
			time.Sleep(flushPoll)
		}
	}
	time.Sleep(2 * flushPoll)
}

// serveFlush answers once peer has delivered every reliable record this
// node appended so far, or after flushWait. A peer that is a copy of a
// record's partition gets it before its majority and holds it,
// undelivered, until a later header's decision (two-phase delivery): its
// confirmation of the record's frame says it stored the copy, not that
// it delivered it. So the answer waits for both: the records confirmed,
// and the decisions of those the peer holds. Without the second, a
// message a peer held at the old holder was delivered there only after
// the holder lent the session, to nobody; and the claiming node, which
// had it from this node as a copy only (before its new subscriptions
// were known here), never delivered it: lost.
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
		ps := l.ps
		gone := o.peers[peer] != ps
		delivered := ps.cursor >= target && ps.decAcked >= min(ps.held, target)
		if !gone && !delivered && ps.cursor >= target {
			signal(ps) // a header with the decisions, once they are made
		}
		o.mu.Unlock()
		if gone || delivered {
			return sessionReply{Held: true}
		}
		if time.Now().After(deadline) {
			return sessionReply{}
		}
		time.Sleep(flushPoll)
	}
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
