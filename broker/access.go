package broker

// This file decides subscriptions with a ReadAuthorizer: granted whole,
// refused, or granted with a check of every message (SubscribeChecked).
//
// The check is on the session, not on one subscription: a session with a
// checked subscription has readCheck set, and the router asks CanRead for
// every message it delivers to that session, whichever subscription
// matched (the answer depends on the client and the topic only, so it is
// right for all of them). Sessions without one pay an atomic load per
// delivery.
//
// Decisions are taken on SUBSCRIBE, again for a session when a client
// resumes it (the identity may have changed), and for every session on
// ReauthorizeSubscriptions. Lock order: aclMu before Server.mu before
// session.mu; no authorizer call is made under Server.mu or session.mu.

// subscribeAccess decides one subscription with the authorizer.
func (s *Server) subscribeAccess(info *ConnInfo, filter string) SubscribeAccess {
	if s.reader != nil {
		return s.reader.SubscribeAccess(info, filter)
	}
	if s.authz.CanSubscribe(info, filter) {
		return SubscribeGranted
	}
	return SubscribeRefused
}

// readIdentity copies what CanRead needs of a client's identity.
func readIdentity(info *ConnInfo) *ConnInfo {
	return &ConnInfo{ClientID: info.ClientID, Username: info.Username, RemoteAddr: info.RemoteAddr,
		Listener: info.Listener, Version: info.Version}
}

// ReauthorizeSubscriptions decides every network client's subscriptions
// again with the current authorizer: call it after the access rules or
// the users changed. A subscription the rules now refuse stays (the client
// was told it exists) but delivers nothing; one now granted whole is no
// longer checked. It is a no-op without a ReadAuthorizer: plain
// Authorizers are asked on SUBSCRIBE only.
func (s *Server) ReauthorizeSubscriptions() {
	if s.reader == nil {
		return
	}
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		s.reauthorizeSession(sess)
	}
}

// reauthorizeResumed decides the subscriptions of a resumed session with
// its new connection's identity.
func (s *Server) reauthorizeResumed(sess *session) {
	if s.reader == nil {
		return
	}
	s.aclMu.RLock()
	defer s.aclMu.RUnlock()
	s.reauthorizeSession(sess)
}

// reauthorizeSession decides sess's subscriptions again. The caller holds
// aclMu, so no SUBSCRIBE of sess is being decided meanwhile.
func (s *Server) reauthorizeSession(sess *session) {
	sess.mu.Lock()
	if sess.inproc != nil || len(sess.subs) == 0 {
		sess.readCheck.Store(nil)
		sess.mu.Unlock()
		return
	}
	info := readIdentity(&sess.info)
	filters := make([]string, 0, len(sess.subs))
	for f := range sess.subs {
		filters = append(filters, f)
	}
	sess.mu.Unlock()
	checked := make(map[string]bool, len(filters))
	for _, f := range filters {
		checked[f] = s.reader.SubscribeAccess(info, f) != SubscribeGranted
	}
	sess.mu.Lock()
	anyChecked := false
	for f, sub := range sess.subs {
		c, ok := checked[f]
		if !ok {
			c = sub.checked // added meanwhile by the in-process API: keep its decision
		}
		if c != sub.checked {
			sub.checked = c
			sess.subs[f] = sub
		}
		anyChecked = anyChecked || c
	}
	if anyChecked {
		sess.readCheck.Store(info)
	} else {
		sess.readCheck.Store(nil)
	}
	sess.mu.Unlock()
}
