package broker

import (
	"time"

	"gantry/broker/packet"
)

// attach binds c to the session of clientID, taking the session over from
// another connection if needed. It returns whether a session was present.
func (s *Server) attach(c *conn, clientID string, cleanStart bool, expiry uint32, will *willSpec) (bool, error) {
	for {
		s.mu.Lock()
		sess := s.sessions[clientID]
		if sess != nil && sess.inproc != nil {
			// LoT and the connectors own their identifiers.
			s.mu.Unlock()
			return false, packet.ClientIdentifierNotValid
		}
		if sess != nil {
			sess.mu.Lock()
			old := sess.conn
			sess.mu.Unlock()
			if old != nil && old != c {
				s.mu.Unlock()
				old.disconnect(errTakenOver)
				<-old.done
				continue // the old connection has detached; look again
			}
			if cleanStart {
				s.discardLocked(sess)
				sess = nil
			}
		}
		present := sess != nil
		if sess == nil {
			sess = newSession(s, clientID)
			s.sessions[clientID] = sess
		}
		sess.mu.Lock()
		stopTimer(&sess.expiryTimer)
		stopTimer(&sess.willTimer)
		sess.will = will
		sess.info = c.info
		sess.expiry = expiry
		sess.conn = c
		c.sess = sess
		c.resend = sess.pendingResend()
		// QoS 2 messages received on an earlier connection and not yet
		// released count against the new one's Receive Maximum. The
		// reader has not started: no lock needed for inflightIn.
		c.inflightIn = len(sess.qos2In)
		sess.disconnectedAt = 0
		sess.saveLocked(0, nil)
		sess.mu.Unlock()
		s.mu.Unlock()
		return present, nil
	}
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// detach unbinds c from its session after the connection closed: it
// publishes or schedules the will and starts the session's expiry.
func (s *Server) detach(c *conn, publishWill bool) {
	s.mu.Lock()
	sess := c.sess
	sess.mu.Lock()
	if sess.conn != c {
		sess.mu.Unlock()
		s.mu.Unlock()
		return
	}
	sess.conn = nil
	sess.relieveLocked(true) // nobody drains an offline queue: publishers go on
	var now *willSpec
	if w := sess.will; w != nil && publishWill {
		if delay := min(w.delay, sess.expiry); delay == 0 {
			now, sess.will = w, nil
		} else if !s.closed { // after Shutdown the will waits in the store
			sess.willTimer = time.AfterFunc(time.Duration(delay)*time.Second, func() { s.fireWill(sess) })
		}
	} else {
		sess.will = nil
	}
	sess.disconnectedAt = time.Now().UnixNano()
	switch sess.expiry {
	case 0:
		sess.mu.Unlock()
		s.discardLocked(sess)
		sess.mu.Lock()
	case 0xFFFFFFFF:
		sess.saveLocked(sess.disconnectedAt, nil) // never expires
	default:
		sess.saveLocked(sess.disconnectedAt, nil)
		if !s.closed { // after Shutdown the expiry counts from the store
			sess.expiryTimer = time.AfterFunc(time.Duration(sess.expiry)*time.Second, func() { s.expire(sess) })
		}
	}
	info := sess.info
	sess.mu.Unlock()
	s.mu.Unlock()
	if now != nil {
		s.publishWill(now, &info)
	}
}

// discardLocked removes sess from the server. The caller holds s.mu and
// not sess.mu.
func (s *Server) discardLocked(sess *session) {
	sess.mu.Lock()
	sess.gone = true
	stopTimer(&sess.expiryTimer)
	stopTimer(&sess.willTimer)
	if sess.stored && s.persist != nil {
		sess.stored = false
		s.persistOps(nil, PersistOp{Kind: DeleteSession, ClientID: sess.id})
	}
	filters := make([]string, 0, len(sess.subs))
	for f := range sess.subs {
		filters = append(filters, f)
	}
	clear(sess.subs)
	sess.clearState()
	sess.mu.Unlock()
	for _, f := range filters {
		s.subs.Unsubscribe(sess, f)
		sess.nsubs.Add(-1)
	}
	if s.sessions[sess.id] == sess {
		delete(s.sessions, sess.id)
	}
}

// expire ends a session whose expiry interval passed while it was offline;
// a will still waiting for its delay is published now.
func (s *Server) expire(sess *session) {
	s.mu.Lock()
	sess.mu.Lock()
	if sess.conn != nil || sess.gone || s.sessions[sess.id] != sess {
		sess.mu.Unlock()
		s.mu.Unlock()
		return
	}
	w, info := sess.will, sess.info
	sess.will = nil
	sess.mu.Unlock()
	s.discardLocked(sess)
	s.mu.Unlock()
	if w != nil {
		s.publishWill(w, &info)
	}
}

// fireWill publishes a session's will once its delay has passed.
func (s *Server) fireWill(sess *session) {
	sess.mu.Lock()
	w, info := sess.will, sess.info
	if sess.conn != nil || sess.gone {
		w = nil
	}
	sess.will = nil
	sess.willTimer = nil
	if w != nil {
		sess.saveLocked(sess.disconnectedAt, nil) // the will is gone
	}
	sess.mu.Unlock()
	if w != nil {
		s.publishWill(w, &info)
	}
}

func (s *Server) publishWill(w *willSpec, info *ConnInfo) {
	if s.authz != nil && !s.authz.CanPublish(info, w.msg.Topic) {
		return
	}
	m := w.msg
	if w.expiry > 0 {
		c := *m
		c.ExpiresAt = time.Now().Add(time.Duration(w.expiry) * time.Second).UnixNano()
		m = &c
	}
	s.PublishMessage(m)
}

// stopTimers stops every session timer (server shutdown).
func (s *Server) stopTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		sess.mu.Lock()
		stopTimer(&sess.expiryTimer)
		stopTimer(&sess.willTimer)
		sess.mu.Unlock()
	}
}
