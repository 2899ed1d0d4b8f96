package dataplane

import (
	"slices"
	"sync"
	"time"

	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// What a node does when the map changes (runMaps): as a partition's
// owner it fills the new copies of its partitions from its own copy and
// reports each caught up (Options.CaughtUp); as a copy it re-delivers the
// records of a node that left the map (lost: its partitions and copies
// moved away) from the last Replication.Replay, so that a message that
// node acknowledged but had not passed on reaches every subscriber.
const (
	fillChunk    = 256              // records per fill or replay step
	fillRetry    = 60 * time.Second // a fill not reported by then starts again
	reportRetry  = 5 * time.Second  // a report the map does not show yet is sent again
	mapsEvery    = 2 * time.Second  // runMaps looks again even without a change
	replayPacing = 20 * time.Millisecond
)

type fillKey struct {
	p    uint32
	node string
}

// fillRun is one fill of a new copy.
type fillRun struct {
	started  time.Time
	filled   bool // every chunk confirmed
	reported time.Time
}

// fillState is runMaps' memory.
type fillState struct {
	kick chan struct{} // capacity 1: the map changed

	mu   sync.Mutex // guards runs
	runs map[fillKey]*fillRun

	seen map[string]bool // nodes the last map placed anything on; runMaps only
}

// SetMap hands the data plane the committed partition map (on every
// change applied on this node; it does not block).
func (p *Plane) SetMap(m partition.Map) {
	if p.gate == nil {
		return
	}
	if old := p.gate.pmap.Load(); old != nil && old.Version >= m.Version {
		return
	}
	p.gate.routes.Store(newMapRoutes(&m, p.opts.NodeName))
	p.gate.pmap.Store(&m)
	select {
	case p.fills.kick <- struct{}{}:
	default:
	}
}

// runMaps acts on map changes until Stop.
func (p *Plane) runMaps() {
	defer p.wg.Done()
	t := time.NewTicker(mapsEvery)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.fills.kick:
		case <-t.C:
		}
		if m := p.gate.pmap.Load(); m != nil {
			p.onMap(*m)
		}
	}
}

func (p *Plane) onMap(m partition.Map) {
	me := p.opts.NodeName
	placed := map[string]bool{}
	for _, a := range m.Partitions {
		for _, n := range a.Replicas {
			placed[n] = true
		}
	}
	if p.fills.seen != nil {
		for n := range p.fills.seen {
			if !placed[n] && n != me && p.ctx.Err() == nil {
				// Its own goroutine: pacing may wait long (a peer that is
				// down holds the outbox), and fills and reports go on.
				p.wg.Add(1)
				go func(n string) {
					defer p.wg.Done()
					p.replayLost(n, m)
				}(n)
			}
		}
	}
	// Copies held for a node that is not in the map (it left it, maybe
	// before this node restarted) wait for decisions that will not come.
	for _, n := range p.recv.holding() {
		if !placed[n] && n != me {
			p.releaseFrom(n)
		}
	}
	p.fills.seen = placed
	now := time.Now()
	p.fills.mu.Lock()
	for k := range p.fills.runs {
		if int(k.p) >= len(m.Partitions) || m.Partitions[k.p].Owner != me || !slices.Contains(m.Partitions[k.p].Syncing, k.node) {
			delete(p.fills.runs, k) // caught up, or no longer this node's to fill
		}
	}
	p.fills.mu.Unlock()
	for i, a := range m.Partitions {
		if a.Owner != me {
			continue
		}
		for _, node := range a.Syncing {
			p.fillCopy(uint32(i), node, m.Version, now)
		}
	}
}

// fillCopy starts, restarts or reports the fill of node's copy of part.
func (p *Plane) fillCopy(part uint32, node string, version uint64, now time.Time) {
	k := fillKey{part, node}
	p.fills.mu.Lock()
	run := p.fills.runs[k]
	switch {
	case run == nil || (!run.filled && now.Sub(run.started) > fillRetry):
		run = &fillRun{started: now}
		p.fills.runs[k] = run
		p.fills.mu.Unlock()
		p.log.Info("filling a new copy of a partition", "partition", part, "copy", node)
		go p.fillFrom(part, node, 0, p.copies.lastKey(part), false, run) // it may wait for room
		return
	case run.filled && now.Sub(run.reported) > reportRetry:
		run.reported = now
		p.fills.mu.Unlock()
		p.report(part, node, version)
		return
	}
	p.fills.mu.Unlock()
}

// fillFrom sends node the records of part from key from to end, a chunk
// at a time: each chunk's last record, once confirmed, sends the next.
// The first pass ends at the last key when the fill started; a second
// pass takes what came meanwhile (from nodes that still wrote with the
// map before node's copy); then the copy is filled and reported.
func (p *Plane) fillFrom(part uint32, node string, from, end uint64, second bool, run *fillRun) {
	a, ok := p.assignment(part)
	if !ok || a.Owner != p.opts.NodeName || p.ctx.Err() != nil {
		return // no longer this node's to fill
	}
	var batch []*repInfo
	var msgs [][]byte
	var topics []string
	next := from
	err := p.copies.records(part, from, func(key uint64, r copyRec) bool {
		if key > end || len(batch) == fillChunk {
			return false
		}
		next = key + 1
		d, err := wire.DecodeMessage(r.msg)
		if err != nil {
			return true
		}
		batch = append(batch, &repInfo{partition: part, epoch: a.Epoch, copies: []string{node}, origin: r.id, at: r.at, copyOnly: true})
		msgs, topics = append(msgs, r.msg), append(topics, d.Msg.Topic)
		return true
	})
	if err != nil {
		// The store cannot serve every record: not filled (a copy
		// reported without them would be counted); the fill starts
		// again after fillRetry.
		p.warn("fill-"+node, "filling a new copy stopped: the copies cannot be read whole", err)
		return
	}
	// A QoS 2 record goes with its publisher's packet identifier, as a
	// write to the copy does, so that the new copy recognises the
	// publisher's resend (DUP) after a failover: without it, the resend
	// was a new write there, delivered a second time everywhere. Read
	// after the records, so that the index holds each of them (unless
	// trimmed, or its identifier reused since).
	if ids := p.copies.qos2IDs(part); ids != nil {
		for _, rep := range batch {
			rep.pid = ids[rep.origin]
		}
	}
	if len(batch) == 0 {
		if !second {
			p.fillFrom(part, node, max(next, end+1), p.copies.lastKey(part), true, run)
			return
		}
		p.fills.mu.Lock()
		run.filled, run.reported = true, time.Now()
		p.fills.mu.Unlock()
		v := uint64(0)
		if m := p.gate.pmap.Load(); m != nil {
			v = m.Version
		}
		p.report(part, node, v)
		return
	}
	batch[len(batch)-1].filled = func() { go p.fillFrom(part, node, next, end, second, run) }
	es := make([]entry, len(batch))
	for i, rep := range batch {
		es[i] = entry{msg: msgs[i], topic: topics[i], retain: true, only: node, rep: rep, volatile: true}
	}
	p.appendPaced(es)
}

// unreadRetry is how long a replay waits when the store cannot serve the
// copies whole (its log could not be applied to dataplane.db).
const unreadRetry = time.Second

// appendPaced appends records of a fill or a replay once the outbox has
// room for them below half its bound (ReplicationForwardQueueEntries), so
// that they never push out a record a peer that is down still needs;
// it waits, polling, until then or Stop.
func (p *Plane) appendPaced(es []entry) {
	for !p.out.appendIfRoom(es, p.opts.ForwardQueueEntries/2) {
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(replayPacing):
		}
	}
}

func (p *Plane) assignment(part uint32) (partition.Assignment, bool) {
	m := p.gate.pmap.Load()
	if m == nil || int(part) >= len(m.Partitions) {
		return partition.Assignment{}, false
	}
	return m.Partitions[part], true
}

// report tells the leader node's copy of part is filled.
func (p *Plane) report(part uint32, node string, version uint64) {
	if p.opts.CaughtUp == nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.opts.CaughtUp(part, node, version); err != nil {
			p.warn("caught-up", "cannot report a filled copy to the leader (tried again)", err)
			return
		}
		p.log.Info("a new copy of a partition is filled", "partition", part, "copy", node)
	}()
}

// replayLost re-delivers the records lost accepted in the last
// Replication.Replay that this node holds a copy of, to every peer that
// wants them, named by their origin so that receivers drop those they
// delivered already (ReplicationDedupDelivered). Every copy replays, not
// only the new owner: a copy that was down when a record was written
// lacks it, and may be the one that owns the partition now.
func (p *Plane) replayLost(lost string, m partition.Map) {
	window := p.gate.opts.Replay
	if window <= 0 {
		return
	}
	since := time.Now().Add(-window).UnixNano()
	n := 0
	for i := range m.Partitions {
		// A chunk at a time, appended outside the read of the store (a
		// read held while waiting would hold up the store's writes).
		for from := uint64(0); p.ctx.Err() == nil; {
			var chunk []copyRec
			next := from
			err := p.copies.records(uint32(i), from, func(key uint64, r copyRec) bool {
				next = key + 1
				if r.id.origin == lost && r.at >= since {
					chunk = append(chunk, r)
				}
				return len(chunk) < fillChunk
			})
			if err != nil {
				// Not served whole: this chunk again, later.
				p.warn("replay-"+lost, "a failover replay waits: the copies cannot be read whole", err)
				select {
				case <-p.ctx.Done():
				case <-time.After(unreadRetry):
				}
				continue
			}
			es := make([]entry, 0, len(chunk))
			for _, r := range chunk {
				d, err := wire.DecodeMessage(r.msg)
				if err != nil {
					continue
				}
				es = append(es, entry{msg: r.msg, topic: d.Msg.Topic, retain: d.Msg.Retain, rep: &repInfo{partition: uint32(i), origin: r.id, at: r.at}})
			}
			p.appendPaced(es) // never pushes out what peers still need
			n += len(es)
			if next == from || len(chunk) < fillChunk {
				break
			}
			from = next
		}
	}
	p.replayedOut.Add(uint64(n))
	p.log.Info("a node left the partition map: re-delivered what it accepted in the replay window", "node", lost, "records", n, "window", window)
}
