package load

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runIDs makes client identifiers unique across the runs of one process.
var runIDs atomic.Uint64

// run is one execution of a messaging scenario.
type run struct {
	sc     Scenario
	cfg    Config
	epoch  time.Time
	prefix string // client identifier prefix

	pubs  []*publisher
	subs  []*subscriber
	quota *quota // Scenario.MaxMessages; nil: no bound

	measuring  atomic.Bool
	draining   atomic.Bool
	closing    atomic.Bool
	hungUp     atomic.Bool   // the publishers are disconnected (Offline)
	progress   chan struct{} // poked by readers while draining
	stop       chan struct{} // closed: publishers stop
	unthrottle chan struct{} // closed: subscribers drain at full speed
	failed     chan struct{} // closed on the first error
	failOnce   sync.Once
	err        error

	senders sync.WaitGroup // publisher run loops
	readers sync.WaitGroup // ack readers and subscribers
}

// Run executes sc against the broker at cfg.Addr and returns its figures.
// The error reports a run that could not complete (connection refused or
// lost, protocol violation); lost or reordered messages are in the Result
// (see Result.Verify).
func Run(ctx context.Context, sc Scenario, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := sc.validate(cfg); err != nil {
		return Result{}, err
	}
	if sc.Topology == Idle {
		return runIdle(ctx, sc, cfg)
	}
	r := &run{
		sc: sc, cfg: cfg, epoch: time.Now(),
		prefix:     fmt.Sprintf("bench-%d-%d", os.Getpid(), runIDs.Add(1)),
		progress:   make(chan struct{}, 1),
		stop:       make(chan struct{}),
		unthrottle: make(chan struct{}),
		failed:     make(chan struct{}),
	}
	if sc.MaxMessages > 0 {
		r.quota = newQuota(sc.MaxMessages)
	}
	defer r.closeAll()
	if err := r.connect(ctx); err != nil {
		return Result{}, err
	}
	if slices.ContainsFunc(r.subs, func(s *subscriber) bool { return s.stamps != nil }) {
		// Without timestamps by the window, its latencies end when
		// messages are read, as where the kernel has none.
		awaitStamps(ctx)
	}
	r.startSenders()
	res, err := r.measure(ctx)
	if err != nil {
		return Result{}, err
	}
	r.finish(ctx)
	if r.sc.Topology == Offline {
		if err := r.collect(ctx); err != nil {
			return Result{}, err
		}
	}
	r.closeAll()
	return r.result(res), r.err
}

// fail records the first error of a reader or sender, unless the run is
// closing its connections anyway.
func (r *run) fail(err error) {
	if err == nil || r.closing.Load() {
		return
	}
	r.failOnce.Do(func() {
		r.err = err
		close(r.failed)
	})
}

// poke wakes the coordinator while it waits for the end of a run.
func (r *run) poke() {
	if r.draining.Load() {
		select {
		case r.progress <- struct{}{}:
		default:
		}
	}
}

// startSenders starts every publisher's run loop at once.
func (r *run) startSenders() {
	for _, p := range r.pubs {
		if p.interval > 0 {
			p.schedule()
		}
		r.senders.Add(1)
		go func() {
			defer r.senders.Done()
			r.fail(p.run(r.stop))
		}()
	}
}

// sample is a snapshot of the counters.
type sample struct {
	at       time.Time
	sent     uint64
	acked    uint64
	received uint64
	behind   uint64 // open loop: messages due by at and not sent when the counters were read
	usage    Usage
	self     time.Duration // this process's CPU time
}

// sample reads the counters and the clock together first, then the CPU
// and memory probes, whose system calls may let the scheduler run other
// goroutines for a while.
func (r *run) sample() sample {
	sent := make([]uint64, len(r.pubs))
	s := r.counts(sent)
	if r.sc.Rate > 0 {
		at := int64(s.at.Sub(r.epoch))
		for i, p := range r.pubs {
			s.behind += uint64(max(p.dueBy(at)-int64(sent[i]), 0))
		}
	}
	s.self = selfCPU()
	s.usage = r.cfg.probe()
	return s
}

// counts reads the message counters, and then the clock, into a sample;
// each publisher's sent count also into sent, when not nil.
func (r *run) counts(sent []uint64) sample {
	var s sample
	for i, p := range r.pubs {
		n := p.sent.Load()
		if sent != nil {
			sent[i] = n
		}
		s.sent += n
		s.acked += p.acked.Load()
	}
	for _, sub := range r.subs {
		s.received += sub.received.Load()
	}
	s.at = time.Now()
	return s
}

// measure waits out the warm-up, then samples the measurement window.
func (r *run) measure(ctx context.Context) (Result, error) {
	if err := r.await(ctx, r.cfg.Warmup); err != nil {
		return Result{}, err
	}
	s0 := r.sample()
	r.measuring.Store(true)
	err := r.await(ctx, r.cfg.Duration)
	if err == nil && r.cfg.MinMessages > 0 {
		err = r.awaitMessages(ctx, s0)
	}
	r.measuring.Store(false)
	if err != nil {
		return Result{}, err
	}
	s1 := r.sample()
	el := s1.at.Sub(s0.at)
	res := Result{Elapsed: el, Offered: r.sc.Rate, BrokerCPU: s1.usage.CPU - s0.usage.CPU, RSSAfter: s1.usage.RSS,
		GeneratorCPU: s1.self - s0.self, Capped: r.quota.isSpent(), Backlog: s0.behind}
	res.InRate = float64(s1.sent-s0.sent) / el.Seconds()
	res.OutRate = float64(r.out(s1)-r.out(s0)) / el.Seconds()
	return res, nil
}

// out is the count OutRate is made of: deliveries received, or, for an
// Offline run or a Sink, publishes acknowledged (QoS 1) or sent (QoS 0).
func (r *run) out(s sample) uint64 {
	switch {
	case r.sc.Topology == Offline || r.cfg.Sink && r.cfg.QoS > 0:
		return s.acked
	case r.cfg.Sink:
		return s.sent
	}
	return s.received
}

// awaitMessages extends the window that began at s0 until it holds
// cfg.MinMessages out messages, or until neither the messages sent nor
// those out have moved for cfg.Drain, failing early as await does.
func (r *run) awaitMessages(ctx context.Context, s0 sample) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last, moved := s0, time.Now()
	for {
		s := r.counts(nil)
		if r.out(s)-r.out(s0) >= r.cfg.MinMessages {
			return nil
		}
		if s.sent != last.sent || r.out(s) != r.out(last) {
			last, moved = s, s.at
		} else if s.at.Sub(moved) >= r.cfg.Drain {
			return nil
		}
		if over, err := r.wait(ctx, tick.C); over {
			return err
		}
	}
}

// await waits for d, or until the quota is spent, failing early when the
// run fails or ctx ends.
func (r *run) await(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	_, err := r.wait(ctx, t.C)
	return err
}

// wait waits for c, and reports whether the waiting is over instead: the
// quota spent (err nil), the run failed or ctx ended.
func (r *run) wait(ctx context.Context, c <-chan time.Time) (over bool, err error) {
	select {
	case <-c:
		return false, nil
	case <-r.quota.spentCh():
		return true, nil
	case <-r.failed:
		return true, r.err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// finish stops the publishers and waits until every message sent has
// been acknowledged and received, or until nothing has moved for
// cfg.Drain.
func (r *run) finish(ctx context.Context) {
	close(r.stop)
	r.senders.Wait()
	close(r.unthrottle)
	r.draining.Store(true)
	r.waitDrained(ctx)
}

// waitDrained waits until drained reports true, or until nothing has
// moved for cfg.Drain.
func (r *run) waitDrained(ctx context.Context) {
	idle := time.NewTimer(r.cfg.Drain)
	defer idle.Stop()
	for !r.drained() {
		select {
		case <-r.progress:
			idle.Reset(r.cfg.Drain)
		case <-idle.C:
			return
		case <-r.failed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// drained reports whether nothing is on its way any more.
func (r *run) drained() bool {
	for _, p := range r.pubs {
		if r.cfg.QoS > 0 && p.acked.Load() < p.sent.Load() {
			return false
		}
	}
	if r.cfg.Sink {
		return true
	}
	for _, s := range r.subs {
		if s.received.Load() < s.expected() {
			return false
		}
	}
	return true
}

// closeAll closes every connection and waits for the readers.
func (r *run) closeAll() {
	if r.closing.Swap(true) {
		return
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.senders.Wait()
	for _, p := range r.pubs {
		if p.c != nil {
			p.c.close()
		}
	}
	for _, s := range r.subs {
		if s != nil {
			s.c.close()
		}
	}
	r.readers.Wait()
}

// result adds the end-of-run counts to the window's figures.
func (r *run) result(res Result) Result {
	res.Latency, res.GeneratorLate, res.GeneratorReadLag = new(Histogram), new(Histogram), new(Histogram)
	for _, p := range r.pubs {
		res.GeneratorLate.Merge(&p.late)
		res.Sent += p.sent.Load()
		res.Acked += p.acked.Load()
		res.Stalls += p.stalls
		res.Latency.Merge(&p.acks)
	}
	for _, s := range r.subs {
		exp, got := s.expected(), s.received.Load()
		if r.cfg.Sink {
			exp = got
		}
		res.Expected += exp
		res.Received += got
		res.Lost += exp - min(got, exp)
		res.Reordered += s.reordered
		res.Latency.Merge(&s.hist)
		res.GeneratorReadLag.Merge(&s.readLag)
	}
	return res
}

// quota bounds the messages the publishers of a run send in all.
type quota struct {
	left  atomic.Int64
	spent chan struct{} // closed when the last message is granted
	once  sync.Once
}

func newQuota(n int) *quota {
	q := &quota{spent: make(chan struct{})}
	q.left.Store(int64(n))
	return q
}

// take grants up to n messages.
func (q *quota) take(n int) int {
	left := q.left.Add(-int64(n))
	if left > 0 {
		return n
	}
	q.once.Do(func() { close(q.spent) })
	return max(0, n+int(left))
}

// spentCh is closed once the quota is spent; nil (never ready) without
// a quota.
func (q *quota) spentCh() <-chan struct{} {
	if q == nil {
		return nil
	}
	return q.spent
}

func (q *quota) isSpent() bool {
	select {
	case <-q.spentCh():
		return true
	default:
		return false
	}
}

// selfCPU returns the user + system time of this process (0 if unknown).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallel calls f(0..n-1) on up to workers goroutines and returns the
// first error; it stops starting calls after an error or when ctx ends.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				err := ctx.Err()
				if err == nil {
					err = f(i)
				}
				if err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
