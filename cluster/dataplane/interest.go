package dataplane

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/cluster/wire"
)

// Interest: which filters the sessions of a node hold, so that a message
// crosses the network only to nodes that have a subscriber for it.
//
// This node announces its interest to every peer over its own link: a
// snapshot first on every connection and again every announceEvery
// (removals travel that way), and each new filter at once, from the
// SUBSCRIBE that added it (SubscriptionsAdded): the SUBACK waits until
// every peer whose link is up confirmed it, so a message published
// anywhere after the SUBACK reaches the subscriber. A peer whose link is
// down is not waited for once its broker's keep alive has run out on the
// link (link.staleBy): from then on it takes this node's interest for
// stale and forwards everything to this node, until the snapshot on the
// next connection. A link whose peer answers nothing for linkSilentMax
// is down (link.go), so a frozen or cut-off peer holds a SUBACK a few
// seconds at most, and a live one as long as it takes to confirm.
//
// The peers' interest arrives over their links into this node. A peer's
// interest is fresh from the snapshot on its current connection until that
// connection ends (Observe); until it is fresh again, everything goes to
// that peer. Retained messages go to every peer whatever its interest.

// announceEvery is how often the whole interest is announced again.
const announceEvery = 5 * time.Second

// ackWaitMax bounds how long a SUBACK waits for the peers: a live peer
// confirms an addition within a round trip and its frames ahead, a
// silent one counts as down after linkSilentMax and as no longer routing
// by this node's interest 1.5 keep alives after the last write; this is
// for a live peer that confirms nothing (its disk stalls the frame's
// acknowledgement).
const ackWaitMax = 10 * time.Second

// localInterest is what this node announced.
type localInterest struct {
	mu        sync.Mutex // guards announced, pending; held while links come up, so a link gets the snapshot or the addition, in order
	announced map[string]struct{}
	// pending are the announced filters whose announcement is not over
	// (not every peer whose link was up confirmed it yet).
	pending map[string]*announcement
	// shared holds the announced shared subscriptions, for sharedFor to
	// see whether a group has a member here without touching the broker's
	// tree (matching a group there moves its round robin on). Changed
	// under mu, one filter at a time; read without mu (its own lock).
	shared topic.Tree[string]
}

// addLocked adds f to the announced interest and reports whether it is new.
func (li *localInterest) addLocked(f string) bool {
	if _, ok := li.announced[f]; ok {
		return false
	}
	li.announced[f] = struct{}{}
	if isShared(f) {
		li.shared.Subscribe(topic.Entry[string]{Client: f, Filter: f})
	}
	return true
}

// replaceLocked makes now the announced interest, changing only what
// differs, and returns the filters it added.
func (li *localInterest) replaceLocked(now map[string]struct{}) (added []string) {
	for f := range li.announced {
		if _, ok := now[f]; !ok {
			delete(li.announced, f)
			if isShared(f) {
				li.shared.Unsubscribe(f, f)
			}
		}
	}
	for f := range now {
		if li.addLocked(f) {
			added = append(added, f)
		}
	}
	return added
}

func isShared(f string) bool {
	_, _, sh, err := topic.ParseShared(f)
	return err == nil && sh
}

// remoteInterest is what one peer announced.
type remoteInterest struct {
	fresh  atomic.Bool
	shared atomic.Bool // some of its filters are shared subscriptions
	// tree holds filters; changed under mu, one filter at a time (an
	// addition costs one insertion, not a rebuild); read without mu.
	tree topic.Tree[string]

	mu      sync.Mutex // guards filters, sharedN; serialises changes of tree
	filters map[string]struct{}
	sharedN int // shared subscriptions among filters
}

// addLocked adds filter f (an invalid one is ignored).
func (ri *remoteInterest) addLocked(f string) {
	if _, ok := ri.filters[f]; ok {
		return
	}
	_, _, sh, err := topic.ParseShared(f)
	if err != nil {
		return
	}
	ri.filters[f] = struct{}{}
	if sh {
		ri.sharedN++
	}
	ri.tree.Subscribe(topic.Entry[string]{Client: f, Filter: f})
}

// dropLocked removes filter f.
func (ri *remoteInterest) dropLocked(f string) {
	if _, ok := ri.filters[f]; !ok {
		return
	}
	delete(ri.filters, f)
	if isShared(f) {
		ri.sharedN--
	}
	ri.tree.Unsubscribe(f, f)
}

// interestFilter is the filter of a subscription as it is announced: as
// subscribed ($share/{group}/{filter} included), or "" for one that never
// matches what travels ($ topics, invalid filters).
func interestFilter(f string) string {
	_, inner, _, err := topic.ParseShared(f)
	if err != nil || strings.HasPrefix(inner, "$") {
		return ""
	}
	return f
}

// announcement is one announcement of filters new to the peers, sent to
// every peer whose link was up: it is over once they all confirmed it,
// their links went down (and their keep alive ran out), or ackWaitMax passed. Until then its filters are
// pending (localInterest.pending), and a SUBACK for one of them waits for
// it, whichever SUBSCRIBE announced it first.
type announcement struct {
	li      *localInterest
	filters []string
	left    atomic.Int32 // peers yet to confirm

	mu      sync.Mutex // guards waiters, over
	waiters []func()
	over    bool
}

// wait runs done once a is over; it reports false (and never runs done)
// when a is over already.
func (a *announcement) wait(done func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.over {
		return false
	}
	a.waiters = append(a.waiters, done)
	return true
}

// confirmed counts one peer's confirmation (or its link going down).
func (a *announcement) confirmed() {
	if a.left.Add(-1) == 0 {
		a.finish()
	}
}

// finish ends a: its filters are no longer pending, then its waiters run.
func (a *announcement) finish() {
	a.mu.Lock()
	if a.over {
		a.mu.Unlock()
		return
	}
	a.over = true
	waiters := a.waiters
	a.waiters = nil
	a.mu.Unlock()
	a.li.mu.Lock()
	for _, f := range a.filters {
		if a.li.pending[f] == a {
			delete(a.li.pending, f)
		}
	}
	a.li.mu.Unlock()
	for _, w := range waiters {
		w()
	}
}

// announceLocked sends fresh (filters just added to announced) to every
// peer whose link is up, as msg, and makes them pending until each of
// those peers confirmed it or can no longer route by what this node
// announced before: its link went down and its broker's keep alive ran
// out since (link.staleBy; it then sends this node everything until the
// snapshot of the next connection). A peer whose link went down only
// just is waited for the same way; ackWaitMax bounds it all. It returns
// nil when there is nothing to wait for. The caller holds li.mu.
func (p *Plane) announceLocked(fresh []string, msg []byte) *announcement {
	li := &p.local
	now := time.Now()
	p.mu.RLock()
	var ups, downs []*link
	for _, l := range p.links {
		if l.connected.Load() {
			ups = append(ups, l)
		} else if l.staleBy().After(now) {
			downs = append(downs, l)
		}
	}
	p.mu.RUnlock()
	if len(ups)+len(downs) == 0 {
		return nil
	}
	if li.pending == nil {
		li.pending = map[string]*announcement{}
	}
	a := &announcement{li: li, filters: fresh}
	a.left.Store(int32(len(ups) + len(downs)))
	for _, f := range fresh {
		li.pending[f] = a
	}
	for _, l := range ups {
		p.out.addControl(l.ps, msg, func() {
			// Confirmed, or the link went down first.
			if d := time.Until(l.staleBy()); d > 0 {
				time.AfterFunc(d, a.confirmed)
				return
			}
			a.confirmed()
		})
	}
	for _, l := range downs {
		time.AfterFunc(time.Until(l.staleBy()), a.confirmed)
	}
	time.AfterFunc(ackWaitMax, a.finish)
	return a
}

// SubscriptionsAdded implements broker.SubscribeHook: filters not
// announced yet go to every peer whose link is up, and done runs once they
// all confirmed (see announceLocked). A filter announced already whose
// announcement is still in flight (another SUBSCRIBE's, or a snapshot's)
// waits for that announcement the same way.
func (p *Plane) SubscriptionsAdded(filters []string, done func()) bool {
	li := &p.local
	li.mu.Lock()
	var fresh []string
	var waits []*announcement
	for _, f := range filters {
		if f = interestFilter(f); f == "" {
			continue
		}
		if li.addLocked(f) {
			fresh = append(fresh, f)
		} else if a := li.pending[f]; a != nil && !slices.Contains(waits, a) {
			waits = append(waits, a)
		}
	}
	if len(fresh) > 0 {
		if a := p.announceLocked(fresh, interestMessage(wire.InterestAdd, fresh)); a != nil {
			waits = append(waits, a)
		}
	}
	// done runs once every announcement waited for is over, and this node
	// holds the cluster's retained messages (retainedSync): one count for
	// each, and one held here until all are registered.
	var left atomic.Int32
	left.Store(1)
	one := func() {
		if left.Add(-1) == 0 {
			done()
		}
	}
	left.Add(1)
	if !p.rsync.wait(one) {
		left.Add(-1)
	}
	for _, a := range waits {
		left.Add(1)
		if !a.wait(one) {
			left.Add(-1)
		}
	}
	li.mu.Unlock()
	if left.Add(-1) == 0 {
		return false // nothing in flight: the SUBACK leaves at once
	}
	return true
}

// interestMessage is an announcement as a message record.
func interestMessage(op byte, filters []string) []byte {
	m := &broker.Message{Topic: wire.InterestTopic, Payload: wire.AppendFilters(nil, op, filters)}
	return wire.AppendMessage(nil, m)
}

// linkUp marks ps's link established and queues the snapshot before
// anything else.
func (p *Plane) linkUp(ps *peerStream) {
	li := &p.local
	li.mu.Lock()
	// What the sessions hold now, offline persistent ones restored from
	// disk included: a snapshot without them would make the peer pass
	// over their messages. Filters not announced yet are in this peer's
	// snapshot only: they reach the other peers from their SUBSCRIBE
	// (SubscriptionsAdded) or the next announce, which make them pending
	// until those peers confirmed (a filter taken into announced here
	// would let its SUBACK leave before the other peers had it).
	snap := make(map[string]struct{}, len(li.announced))
	for f := range li.announced {
		snap[f] = struct{}{}
	}
	for _, f := range p.opts.Broker.Filters() {
		if f = interestFilter(f); f != "" {
			snap[f] = struct{}{}
		}
	}
	p.out.setUp(ps, true)
	p.out.addControl(ps, interestMessage(wire.InterestSnapshot, sortedFilters(snap)), nil)
	p.askRetained(ps)
	li.mu.Unlock()
}

func sortedFilters(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// announce replaces the announced interest with what the broker's
// sessions hold now and sends the snapshot to every peer whose link is
// up; filters new in it are pending until those peers confirmed it.
func (p *Plane) announce() {
	li := &p.local
	li.mu.Lock()
	defer li.mu.Unlock()
	now := map[string]struct{}{}
	for _, f := range p.opts.Broker.Filters() {
		if f = interestFilter(f); f != "" {
			now[f] = struct{}{}
		}
	}
	fresh := li.replaceLocked(now)
	p.announceLocked(fresh, interestMessage(wire.InterestSnapshot, sortedFilters(li.announced)))
}

// runAnnounce announces the interest every announceEvery, and prunes the
// retained tombstones every tombstonePruneEvery, until Stop.
func (p *Plane) runAnnounce() {
	defer p.wg.Done()
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	prune := time.NewTicker(tombstonePruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.announce()
		case now := <-prune.C:
			p.pruneTombstones(now)
		}
	}
}

// remote returns the interest record of peer, creating it.
func (p *Plane) remote(peer string) *remoteInterest {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	ri := p.remotes[peer]
	if ri == nil {
		ri = &remoteInterest{filters: map[string]struct{}{}}
		p.remotes[peer] = ri
	}
	return ri
}

// wants reports whether peer is to get a message on topic: yes while its
// interest is not fresh, else when one of its filters matches.
func (p *Plane) wants(peer, tp string) bool {
	p.rmu.RLock()
	ri := p.remotes[peer]
	p.rmu.RUnlock()
	if ri == nil || !ri.fresh.Load() {
		return true
	}
	return ri.tree.Any(tp)
}

// sharedFor decides, for a message on topic entering this node, which
// peer delivers it to each shared group that has members on other nodes
// only: one of them, in turn. A group with a member here is served here
// (the broker's own routing). It returns nil when no peer announced a
// matching shared subscription.
func (p *Plane) sharedFor(tp string) map[string][]string {
	if p.sharedPeers.Load() == 0 {
		return nil
	}
	p.rmu.RLock()
	names := make([]string, 0, len(p.remotes))
	ris := make([]*remoteInterest, 0, len(p.remotes))
	for name, ri := range p.remotes {
		if ri.fresh.Load() && ri.shared.Load() {
			names, ris = append(names, name), append(ris, ri)
		}
	}
	p.rmu.RUnlock()
	var candidates map[string][]string // shared subscription → peers with members
	for i, ri := range ris {
		for _, e := range ri.tree.Match(tp, nil, nil) {
			if e.Group == "" {
				continue
			}
			if candidates == nil {
				candidates = map[string][]string{}
			}
			candidates[e.Filter] = append(candidates[e.Filter], names[i])
		}
	}
	if candidates == nil {
		return nil
	}
	var local []string
	for _, e := range p.local.shared.Match(tp, nil, nil) {
		local = append(local, e.Filter)
	}
	var out map[string][]string
	turn := p.sharedTurn.Add(1)
	for g, peers := range candidates {
		if slices.Contains(local, g) {
			continue
		}
		slices.Sort(peers)
		peer := peers[turn%uint64(len(peers))]
		if out == nil {
			out = map[string][]string{}
		}
		out[peer] = append(out[peer], g)
	}
	return out
}

// heard applies an announcement from sender: a snapshot replaces its
// filters (only what differs changes), an addition adds to them. It also
// takes the questions and answers of a retained catch-up (retainedSync).
func (p *Plane) heard(sender string, op byte, filters []string) {
	switch op {
	case wire.RetainedAsk:
		if p.opts.Reliable {
			p.retainedAsked(sender)
		}
		return
	case wire.RetainedSent:
		p.rsync.answeredBy(sender)
		return
	}
	ri := p.remote(sender)
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if op == wire.InterestSnapshot {
		keep := make(map[string]struct{}, len(filters))
		for _, f := range filters {
			keep[f] = struct{}{}
		}
		for f := range ri.filters {
			if _, ok := keep[f]; !ok {
				ri.dropLocked(f)
			}
		}
	} else if !ri.fresh.Load() {
		return // an addition without the snapshot it adds to
	}
	for _, f := range filters {
		ri.addLocked(f)
	}
	shared := ri.sharedN > 0
	if was := ri.shared.Swap(shared); was != shared {
		if shared {
			p.sharedPeers.Add(1)
		} else {
			p.sharedPeers.Add(-1)
		}
	}
	ri.fresh.Store(true)
}

// Observe implements broker.Observer: a peer's link connecting or going
// away makes its interest stale until its next snapshot.
func (p *Plane) Observe(e broker.Event) {
	if e.Kind != broker.EventConnect && e.Kind != broker.EventDisconnect {
		return
	}
	name, ok := strings.CutPrefix(e.ClientID, linkClientPrefix)
	if !ok || e.Username != p.opts.Username {
		return
	}
	p.remote(name).fresh.Store(false)
}
