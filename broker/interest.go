package broker

import (
	"sort"
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
// or not, in-process clients included, sorted; shared subscriptions as
// subscribed ($share/{group}/{filter}).
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

// StoreRetainedBatch puts retained messages from a peer node into the
// retained store without delivering them to anyone (a node catching up on
// the retained messages published before it joined). Like DeliverBatch it
// reports whether it had to write to disk, and then calls done once that
// is durable.
func (s *Server) StoreRetainedBatch(ms []*Message, done func(error)) bool {
	var t *storeTicket
	persisted := false
	for _, m := range ms {
		if s.storeRetained(m, &t) {
			persisted = true
		}
	}
	return persisted && s.afterStored([]*storeTicket{t}, done)
}

// RangeRetained calls fn with every retained message whose topic does not
// begin with '$', until fn returns false.
func (s *Server) RangeRetained(fn func(m *Message) bool) {
	s.retained.Match("#", fn)
}
