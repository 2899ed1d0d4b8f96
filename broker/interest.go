package broker

import (
	"sort"

	"gantry/broker/topic"
)

// SubscribeHook sees the filters a client's SUBSCRIBE added, once they are
// in the subscription tree and before the SUBACK leaves: the cluster's
// data plane tells the other nodes about the new interest there, so that
// a message published anywhere after the SUBACK reaches the subscriber.
// It returns true when it will call done exactly once, from any goroutine,
// when the SUBACK may leave; false lets the SUBACK leave at once and done
// is never called. It must not block.
type SubscribeHook interface {
	SubscriptionsAdded(filters []string, done func()) bool
}

// SetSubscribeHook sets the hook (nil: none). Call it before serving.
func (s *Server) SetSubscribeHook(h SubscribeHook) { s.subHook = h }

// Filters returns the distinct topic filters of every session, connected
// or not, in-process clients included, sorted; a shared subscription
// counts with its inner filter ($share/g/a/b as a/b).
func (s *Server) Filters() []string {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	set := map[string]struct{}{}
	for _, sess := range sessions {
		sess.mu.Lock()
		for f := range sess.subs {
			if _, inner, shared, err := topic.ParseShared(f); err == nil && shared {
				f = inner
			}
			set[f] = struct{}{}
		}
		sess.mu.Unlock()
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
