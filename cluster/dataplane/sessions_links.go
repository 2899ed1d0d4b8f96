package dataplane

import (
	"fmt"
	"sync"
	"time"
)

// What the session exchange takes from the links: whether a member is
// alive enough to wait for (a frozen peer keeps its connections open, so
// its link stays "connected" until linkSilentMax, but it has sent nothing
// since it froze), and when a link comes up (a restarted node, or one
// that was cut off, exchanges directories with the peer at once rather
// than waiting for the next whole push, every directoryFull).

// silentFor is how long member's link has heard nothing from it; a link
// that is down counts as silent for ever.
func (s *Sessions) silentFor(member string) time.Duration {
	s.p.mu.RLock()
	l := s.p.links[member]
	s.p.mu.RUnlock()
	if l == nil || !l.connected.Load() {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(time.Unix(0, l.heard.Load()))
}

// live reports whether member's link is up and has heard from it within
// liveSilence.
func (s *Sessions) live(member string) bool { return s.silentFor(member) <= liveSilence }

// postLive is postWithin for a member that may be frozen: a member that
// is not live gets downWait, and the wait for one that turns silent
// meanwhile ends once it has been silent for liveSilence (and downWait
// has passed). The abandoned request ends at its own deadline.
func (s *Sessions) postLive(wait time.Duration, member, path string, req sessionReq, reply *sessionReply) error {
	if !s.live(member) {
		return s.postWithin(min(wait, downWait), member, path, req, reply)
	}
	type answer struct {
		r   sessionReply
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = s.postWithin(wait, member, path, req, &a.r)
		done <- a
	}()
	start := time.Now()
	tick := time.NewTicker(livePoll)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			if a.err == nil && reply != nil {
				*reply = a.r
			}
			return a.err
		case <-tick.C:
			if silent := s.silentFor(member); silent > liveSilence && time.Since(start) >= downWait {
				return fmt.Errorf("%s has sent nothing on its link for %v (frozen, or cut off)", member, silent.Round(time.Millisecond))
			}
		}
	}
}

// livePoll is how often postLive and WatchLinks look at the links.
const livePoll = 50 * time.Millisecond

// WatchLinks exchanges directories with each member whose link came up
// (again), until stop closes: this node's push goes to it, and its answer
// brings the member's, so a node that just restarted knows at once which
// sessions the others hold (a CONNECT right after the restart, while a
// holder is down, finds its entry). A failed exchange is tried again a
// second later while the link stays up.
func (s *Sessions) WatchLinks(stop <-chan struct{}) {
	seen := map[string]uint64{} // member → its link's connects when last exchanged
	retry := map[string]time.Time{}
	tick := time.NewTicker(2 * livePoll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		var due []string
		var counts []uint64
		for _, m := range s.opts.Members() {
			s.p.mu.RLock()
			l := s.p.links[m]
			s.p.mu.RUnlock()
			if l == nil || !l.connected.Load() {
				continue
			}
			if c := l.connects.Load(); c != seen[m] && time.Now().After(retry[m]) {
				due, counts = append(due, m), append(counts, c)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, len(due))
		for i, m := range due {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.exchangeDirectory(m)
			}()
		}
		wg.Wait()
		for i, m := range due {
			if errs[i] != nil {
				retry[m] = time.Now().Add(time.Second)
				s.p.warn("directory-sync-"+m, "the session directories were not exchanged with a member whose link came up", fmt.Errorf("%s: %w", m, errs[i]))
				continue
			}
			seen[m] = counts[i]
		}
	}
}

// exchangeDirectory pushes this node's directory to member and takes the
// member's from the answer, as if it had pushed it.
func (s *Sessions) exchangeDirectory(member string) error {
	entries, version := s.snapshot()
	var r sessionReply
	if err := s.post(member, SessionsDirectorySyncPath, sessionReq{Sessions: entries}, &r); err != nil {
		return err
	}
	s.mu.Lock()
	s.pushed[member] = pushMark{version: version, at: time.Now()}
	s.mu.Unlock()
	s.serveDirectory(&sessionReq{From: member, Sessions: r.Sessions})
	return nil
}

// serveDirectorySync takes a node's push and answers with this node's
// directory.
func (s *Sessions) serveDirectorySync(req *sessionReq) sessionReply {
	s.serveDirectory(req)
	entries, _ := s.snapshot()
	return sessionReply{Sessions: entries}
}
