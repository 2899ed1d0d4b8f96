package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"gantry/broker"
	"gantry/cluster/signing"
)

// The directory: every node pushes the list of its persistent sessions
// (client, subscriptions, expiry, connected or since when not, and when
// it took the session) to every other member, at once after a change
// (coalesced, every directoryPush) and whole every directoryFull; a push
// from a node replaces what it said before. It serves two cases:
//
//   - a client reconnects while the node holding its session does not
//     answer: the directory's entry gives its subscriptions;
//   - that node returns: the push of the node that took the session
//     since lists it with a newer claim, and the returning node hands over
//     what it kept (returnSession).
//
// An entry whose session expired (disconnected longer than its expiry)
// is ignored: the node that holds a session is the only one that expires
// it.

// dirEntry is one persistent session in a node's directory push.
type dirEntry struct {
	Client         string                      `json:"c"`
	Since          int64                       `json:"s,omitempty"` // when the node took it (Unix ns), 0 unknown
	Expiry         uint32                      `json:"e"`
	Connected      bool                        `json:"o,omitempty"`
	DisconnectedAt int64                       `json:"d,omitempty"`
	Subs           []broker.SubscriptionRecord `json:"f,omitempty"`
}

// expired reports whether the session's expiry passed at now.
func (e *dirEntry) expired(now time.Time) bool {
	if e.Connected || e.Expiry == 0xFFFFFFFF || e.DisconnectedAt == 0 {
		return false
	}
	return now.After(time.Unix(0, e.DisconnectedAt).Add(time.Duration(e.Expiry) * time.Second))
}

// lookup returns the newest directory entry of client among the nodes not
// in skip (those that answered that they do not hold it).
func (s *Sessions) lookup(client string, skip map[string]bool) (dirEntry, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var best dirEntry
	var node string
	for n, entries := range s.dir {
		e, ok := entries[client]
		if !ok || skip[n] || e.expired(now) {
			continue
		}
		if node == "" || e.Since > best.Since {
			best, node = e, n
		}
	}
	return best, node, node != ""
}

// Run pushes the directory until stop closes.
func (s *Sessions) Run(stop <-chan struct{}) {
	t := time.NewTicker(directoryPush)
	defer t.Stop()
	for {
		last := time.Now()
		s.push()
		select {
		case <-stop:
			return
		case <-t.C:
		case <-s.wake:
			// Coalesce what follows at once, and push at most every
			// directoryGap: each push carries every session.
			wait := max(directoryCoalesce, directoryGap-time.Since(last))
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
		}
	}
}

// Pacing of the directory's pushes after a change.
const (
	directoryCoalesce = 50 * time.Millisecond
	directoryGap      = 250 * time.Millisecond
)

// sincePrune is how long a claim is kept without a session behind it
// (the CONNECT that made it attaches just after).
const sincePrune = 10 * time.Second

// snapshot lists this node's persistent sessions, and forgets the claims
// of sessions gone (expired, discarded).
func (s *Sessions) snapshot() ([]dirEntry, uint64) {
	sums := s.opts.Broker.PersistentSessions()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]dirEntry, 0, len(sums))
	have := make(map[string]bool, len(sums))
	for _, ss := range sums {
		have[ss.ClientID] = true
		out = append(out, dirEntry{Client: ss.ClientID, Since: s.since[ss.ClientID], Expiry: ss.Expiry, Connected: ss.Connected,
			DisconnectedAt: ss.DisconnectedAt, Subs: ss.Subscriptions})
	}
	old := time.Now().Add(-sincePrune).UnixNano()
	for c, at := range s.since {
		if !have[c] && at < old {
			delete(s.since, c)
			s.savedSince = false
		}
	}
	return out, s.version
}

// push sends the directory to every member that lacks its latest
// version, or has not had it whole for directoryFull; then it saves the
// claims.
func (s *Sessions) push() {
	members := s.opts.Members()
	entries, version := s.snapshot()
	var wg sync.WaitGroup
	for _, m := range members {
		s.mu.Lock()
		mark := s.pushed[m]
		s.mu.Unlock()
		if mark.version == version && time.Since(mark.at) < directoryFull {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.post(m, SessionsDirectoryPath, sessionReq{Sessions: entries}, nil); err != nil {
				s.p.warn("directory-"+m, "the session directory did not reach a member", fmt.Errorf("%s: %w", m, err))
				return
			}
			s.mu.Lock()
			s.pushed[m] = pushMark{version: version, at: time.Now()}
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	s.saveSince()
}

// serveDirectory takes a node's push, and hands over the sessions this
// node kept that the sender claimed since (taking over this node's
// connection of the client, if the sender's is connected too).
func (s *Sessions) serveDirectory(req *sessionReq) {
	entries := make(map[string]dirEntry, len(req.Sessions))
	for _, e := range req.Sessions {
		entries[e.Client] = e
	}
	s.mu.Lock()
	s.dir[req.From] = entries
	s.heard[req.From] = time.Now()
	s.mu.Unlock()
	var back []dirEntry
	for _, ss := range s.opts.Broker.PersistentSessions() {
		e, ok := entries[ss.ClientID]
		// Claimed there since it was claimed here: offline here, or
		// connected on both (this node's connection was not taken over:
		// the sender could not reach it), the newer claim wins.
		if ok && s.sinceOf(ss.ClientID) < e.Since && (!ss.Connected || e.Connected) {
			back = append(back, e)
		}
	}
	if len(back) > 0 {
		go func() {
			// Each return checks the claim again when it runs: this
			// node may have claimed the client since.
			for _, e := range back {
				s.returnSession(e.Client, req.From, e.Since)
			}
		}()
	}
}

// post sends req, signed, to member's operations endpoint at path and
// decodes the signed answer into reply (when not nil).
func (s *Sessions) post(member, path string, req sessionReq, reply *sessionReply) error {
	return s.postWithin(claimWait, member, path, req, reply)
}

// postWithin is post bounded by wait.
func (s *Sessions) postWithin(wait time.Duration, member, path string, req sessionReq, reply *sessionReply) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ops := s.opts.PeerOps(ctx, member)
	if ops == "" {
		return fmt.Errorf("the operations address of %s is not known", member)
	}
	req.ClusterID, req.From = s.p.opts.ClusterID, s.p.opts.NodeName
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, maxReply := sessionLimits(path)
	ans, err := s.p.requests.Post(ctx, s.opts.HTTP, ops, path, member, data, maxReply)
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

// sessionLimits bounds a path's request and reply by what it carries: a
// part of a session travels in an export's or a part's reply only (a few
// MiB, sessions_export.go, or one message larger than that, up to the
// broker's Maximum Packet Size); a directory push carries every persistent session of its node
// (some 140,000 at a few subscriptions each); the rest carry a client id
// and, answering a takeover, its subscriptions.
func sessionLimits(path string) (request, reply int64) {
	switch path {
	case SessionsExportPath, SessionsPartPath:
		return smallSessionMsg, maxSessionMsg
	case SessionsDirectoryPath:
		return directorySessionMsg, smallSessionMsg
	case SessionsDirectorySyncPath:
		return directorySessionMsg, directorySessionMsg
	}
	return smallSessionMsg, smallSessionMsg
}

// Limits of sessionLimits below maxSessionMsg.
const (
	smallSessionMsg     = 4 << 20
	directorySessionMsg = 64 << 20
)

// Handler serves the exchange's paths (SessionsPath and below).
func (s *Sessions) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+SessionsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s.Status())
	})
	for _, path := range []string{SessionsTakeoverPath, SessionsExportPath, SessionsHandoverPath, SessionsDirectoryPath,
		SessionsFlushPath, SessionsPartPath, SessionsDonePath, SessionsDirectorySyncPath} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, path) })
	}
	return mux
}

// serve verifies a request, runs it and signs the answer.
func (s *Sessions) serve(w http.ResponseWriter, r *http.Request, path string) {
	if !s.p.opts.Signer.Enabled() {
		http.Error(w, "the session exchange needs Cluster.SharedSecret", http.StatusForbidden)
		return
	}
	max, _ := sessionLimits(path)
	signed, err := s.p.requests.VerifyRequest(w, r, path, max)
	if err != nil {
		signing.WriteRefusal(w, err)
		return
	}
	defer signed.Done()
	var req sessionReq
	if err := json.Unmarshal(signed.Body, &req); err != nil {
		http.Error(w, "the request does not decode", http.StatusBadRequest)
		return
	}
	if req.ClusterID != s.p.opts.ClusterID || req.From == "" {
		http.Error(w, "another cluster", http.StatusConflict)
		return
	}
	var reply sessionReply
	switch path {
	case SessionsTakeoverPath:
		reply = s.serveTakeover(&req)
	case SessionsExportPath:
		reply = s.serveExport(&req)
	case SessionsHandoverPath:
		if reply, err = s.serveHandover(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	case SessionsDirectoryPath:
		s.serveDirectory(&req)
	case SessionsFlushPath:
		reply = s.serveFlush(req.From)
	case SessionsPartPath:
		reply = s.servePart(&req)
	case SessionsDonePath:
		reply = s.serveDone(&req)
	case SessionsDirectorySyncPath:
		reply = s.serveDirectorySync(&req)
	}
	data, _ := json.Marshal(reply)
	s.p.requests.WriteReply(w, http.StatusOK, signed, data)
	if (path == SessionsExportPath || path == SessionsPartPath) && reply.Lend != 0 {
		s.answered(req.Client, reply.Lend) // the lend's wait counts from here
	}
}

// SessionsStatus is GET /cluster/sessions.
type SessionsStatus struct {
	// Held is the persistent sessions of this node, with when it took each
	// (0: before this node started, or unknown).
	Held []HeldSession `json:"held"`
	// Directory is what every other node last pushed: node → its
	// persistent sessions' client ids.
	Directory     map[string][]string `json:"directory"`
	Claims        uint64              `json:"claims"`        // CONNECTs that asked the other nodes
	TookOver      uint64              `json:"tookOver"`      // connections or sessions of this node another node claimed
	Exported      uint64              `json:"exported"`      // sessions handed over whole to a claiming node
	Imported      uint64              `json:"imported"`      // sessions taken over with their messages
	FromDirectory uint64              `json:"fromDirectory"` // sessions whose holder did not answer, served from the directory
	Returned      uint64              `json:"returned"`      // sessions this node kept while away, handed to their new holder
	ReturnFailed  uint64              `json:"returnFailed"`  // such hand-overs that failed (tried again)
	FromCopies    uint64              `json:"fromCopies"`    // messages queued from the partition copies for sessions whose holder is down
	// Lent is the sessions this node lent to another and that are not
	// settled yet (the borrower has not confirmed it stored them);
	// TakenBack counts the lends that ended without that confirmation
	// (handed over again).
	Lent      int    `json:"lent"`
	TakenBack uint64 `json:"takenBack"`
}

// HeldSession is one persistent session of this node.
type HeldSession struct {
	Client    string `json:"client"`
	Since     int64  `json:"since"`
	Connected bool   `json:"connected"`
	Subs      int    `json:"subscriptions"`
}

// Status returns the exchange's view.
func (s *Sessions) Status() SessionsStatus {
	sums := s.opts.Broker.PersistentSessions()
	st := SessionsStatus{Held: make([]HeldSession, 0, len(sums)), Directory: map[string][]string{},
		Claims: s.claims.Load(), TookOver: s.tookOver.Load(), Exported: s.exported.Load(), Imported: s.imported.Load(),
		FromDirectory: s.fromDirectory.Load(), Returned: s.returned.Load(), ReturnFailed: s.returnFailed.Load(),
		FromCopies: s.fromCopies.Load(), TakenBack: s.takenBack.Load()}
	s.lmu.Lock()
	st.Lent = len(s.lends)
	s.lmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range sums {
		st.Held = append(st.Held, HeldSession{Client: ss.ClientID, Since: s.since[ss.ClientID], Connected: ss.Connected,
			Subs: len(ss.Subscriptions)})
	}
	for n, entries := range s.dir {
		ids := make([]string, 0, len(entries))
		for c := range entries {
			ids = append(ids, c)
		}
		slices.Sort(ids)
		st.Directory[n] = ids
	}
	return st
}

// sinceFile keeps the claims with durability.
const sinceFile = "sessions-since.json"

func (s *Sessions) loadSince() {
	if s.opts.DataDir == "" {
		return
	}
	raw, err := os.ReadFile(filepath.Join(s.opts.DataDir, sinceFile))
	if err != nil {
		return
	}
	var m map[string]int64
	if err := json.Unmarshal(raw, &m); err != nil {
		s.log.Warn("the session claims file does not decode: claims start empty", "file", sinceFile, "err", err)
		return
	}
	s.since = m
}

// saveSince writes the claims when they changed.
func (s *Sessions) saveSince() {
	if s.opts.DataDir == "" {
		return
	}
	s.mu.Lock()
	if s.savedSince {
		s.mu.Unlock()
		return
	}
	data, _ := json.Marshal(s.since)
	s.savedSince = true
	s.mu.Unlock()
	path := filepath.Join(s.opts.DataDir, sinceFile)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, data, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		s.p.warn("since-save", "the session claims could not be saved", err)
		s.mu.Lock()
		s.savedSince = false
		s.mu.Unlock()
	}
}
