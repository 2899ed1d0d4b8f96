package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gantry/broker/packet"
)

// The operator's view of sessions: list and search them, disconnect a
// client (the console's clients page). Nothing here is on the hot path:
// Sessions takes Server.mu to copy the session pointers, then each
// matching session's lock in turn, as QueueCounts does.

// SessionInfo is one session as an operator sees it.
type SessionInfo struct {
	ClientID  string
	Username  string // of the last connection
	Connected bool
	InProcess bool   // LoT, a connector or the console (no socket)
	Remote    string // the client's address while connected
	Listener  string // tcp, tls, ws, inproc
	Version   byte   // MQTT protocol level: 3, 4 or 5
	// Subscriptions, Queued (waiting for a send slot) and Inflight (QoS 1/2
	// sent and not yet acknowledged).
	Subscriptions, Queued, Inflight int
	Expiry                          uint32    // seconds the session outlives its connection
	DisconnectedAt                  time.Time // zero while connected
}

// SessionFilter selects sessions. The zero value selects every network
// client's session.
type SessionFilter struct {
	// Search keeps sessions whose client identifier or user name
	// contains it, case-insensitively.
	Search string
	// ConnectedOnly drops offline sessions.
	ConnectedOnly bool
	// InProcess keeps in-process clients too.
	InProcess bool
}

func (f SessionFilter) match(si *SessionInfo) bool {
	if si.InProcess && !f.InProcess || f.ConnectedOnly && !si.Connected {
		return false
	}
	if f.Search == "" {
		return true
	}
	q := strings.ToLower(f.Search)
	return strings.Contains(strings.ToLower(si.ClientID), q) || strings.Contains(strings.ToLower(si.Username), q)
}

// Sessions returns up to limit sessions that match f, sorted by client
// identifier, and how many match in all. limit <= 0 means no limit.
func (s *Server) Sessions(f SessionFilter, limit int) ([]SessionInfo, int) {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	var out []SessionInfo
	for _, sess := range all {
		si := sess.adminInfo()
		if f.match(&si) {
			out = append(out, si)
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return strings.Compare(a.ClientID, b.ClientID) })
	total := len(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit:limit]
	}
	return out, total
}

// adminInfo copies the session's state under its lock.
func (s *session) adminInfo() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	si := SessionInfo{ClientID: s.id, Username: s.info.Username, Connected: s.conn != nil || s.inproc != nil,
		InProcess: s.inproc != nil, Listener: s.info.Listener, Version: s.info.Version,
		Subscriptions: len(s.subs), Queued: s.queue.len(), Inflight: len(s.inflight), Expiry: s.expiry}
	if s.conn != nil {
		si.Remote = addrString(s.conn.info.RemoteAddr)
		si.Version = byte(s.conn.version)
	}
	if s.inproc != nil {
		si.Listener = "inproc"
	}
	if s.disconnectedAt != 0 && s.conn == nil {
		si.DisconnectedAt = time.Unix(0, s.disconnectedAt)
	}
	return si
}

// ErrNotConnected: Disconnect found no network connection of that client.
var ErrNotConnected = errors.New("broker: no such connected client")

// disconnectWait bounds how long Disconnect waits for the connection to
// be torn down (the DISCONNECT is written within finalFlushTimeout).
const disconnectWait = 5 * time.Second

// Disconnect closes clientID's network connection. An MQTT 5 client is
// sent a DISCONNECT with reason (0 means 0x98 administrative action); an
// MQTT 3 client's socket is closed. The session stays, as after any
// connection loss, and the client's will is published. It returns once
// the connection is gone, or ErrNotConnected (in-process clients cannot
// be disconnected).
func (s *Server) Disconnect(clientID string, reason packet.ReasonCode) error {
	if reason == 0 {
		reason = packet.AdministrativeAction
	}
	if !reason.IsError() {
		return fmt.Errorf("broker: disconnect reason 0x%02X is not an error reason code", byte(reason))
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return fmt.Errorf("%w: %q", ErrNotConnected, clientID)
	}
	sess.mu.Lock()
	c := sess.conn
	sess.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: %q", ErrNotConnected, clientID)
	}
	c.disconnect(reason)
	t := time.NewTimer(disconnectWait)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
		return fmt.Errorf("broker: client %q: connection not closed within %v", clientID, disconnectWait)
	}
}
