package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"gantry/broker"
	"gantry/drivers"
)

// writeQueue bounds the writes waiting for a connector's goroutine.
const writeQueue = 64

// runner is what a connector runs on its goroutine: the poller of a
// device, or a protocol's own loop (the MQTT bridge).
type runner interface {
	run(ctx context.Context, c *connector)
}

// connector is one deployed connector. Its goroutine (started by start,
// ended by stop) owns the device; the broker client's goroutine hands it
// writes through writes.
type connector struct {
	m        *Manager
	spec     *drivers.Spec
	source   string
	describe string
	run      runner
	log      *slog.Logger
	counters Counters
	st       status
	values   tagValues      // latest reading per tag (values.go)
	pub      *broker.Client // publishes values and status; receives writes
	clientID string

	mu      sync.Mutex // guards cancel, done
	cancel  context.CancelFunc
	done    chan struct{}
	writes  chan writeReq
	warnMu  sync.Mutex // guards warnAt, warnGap
	warnAt  time.Time  // rate limit of warnings
	warnGap int        // warnings suppressed since warnAt
}

type writeReq struct {
	tag *drivers.Tag
	val drivers.Value
	raw string
}

// running reports whether the goroutine runs.
func (c *connector) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done != nil
}

// start runs the connector unless it runs; it returns at once.
func (c *connector) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil || c.run == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	done := c.done
	c.setState(Connecting, "")
	go func() {
		defer close(done)
		c.run.run(ctx, c)
	}()
}

// stop ends the goroutine and waits for it: the device connection is
// closed when stop returns. It is idempotent.
func (c *connector) stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	c.setState(Stopped, "")
	c.publishStatus()
}

// setState records a state change and an error; it publishes the status
// when the state changed.
func (c *connector) setState(state, errText string) {
	c.st.mu.Lock()
	changed := c.st.state != state
	if changed {
		c.st.state, c.st.since = state, time.Now()
	}
	if errText != "" {
		c.st.lastError, c.st.lastErrAt = errText, time.Now()
	}
	c.st.mu.Unlock()
	if changed {
		c.publishStatus()
		if serverTypes[c.spec.Type] {
			c.m.publishListeners()
		}
	}
}

// snapshot copies the status.
func (c *connector) snapshot() Snapshot {
	c.st.mu.Lock()
	s := Snapshot{Name: c.spec.Name, Type: c.spec.Type, Device: c.describe, Connection: c.st.state, Since: c.st.since,
		LastError: c.st.lastError, Tags: len(c.spec.Tags()), PollSeconds: float64(c.st.lastPollNs) / 1e9}
	if !c.st.lastErrAt.IsZero() {
		at := c.st.lastErrAt
		s.LastErrorAt = &at
	}
	if len(c.st.tagErrors) > 0 {
		s.TagErrors = make(map[string]string, len(c.st.tagErrors))
		for k, v := range c.st.tagErrors {
			s.TagErrors[k] = v
		}
	}
	c.st.mu.Unlock()
	s.Health = health(s.Connection, len(s.TagErrors))
	k := &c.counters
	s.Polls, s.Reads, s.ReadErrors, s.Published = k.Polls.Load(), k.Reads.Load(), k.ReadErrors.Load(), k.Published.Load()
	s.Writes, s.WriteErrors, s.Connects, s.Failures = k.Writes.Load(), k.WriteErrors.Load(), k.Connects.Load(), k.Failures.Load()
	s.Received, s.Sent = k.Received.Load(), k.Sent.Load()
	s.UpdatedAt = time.Now()
	return s
}

// publishStatus publishes the status, retained, on both topic trees.
func (c *connector) publishStatus() {
	p := c.snapshot().JSON()
	c.m.publishSys(StatusTopic(c.spec.Name), p)
	c.m.publishSys(routesPrefix+c.spec.Name+"/status", p)
}

// setTagError records (msg != "") or clears a tag's error; it reports
// whether that changed anything.
func (c *connector) setTagError(tag, msg string) bool {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	if c.st.tagErrors[tag] == msg {
		return false
	}
	if msg == "" {
		delete(c.st.tagErrors, tag)
		return true
	}
	if c.st.tagErrors == nil {
		c.st.tagErrors = map[string]string{}
	}
	c.st.tagErrors[tag] = msg
	return true
}

// warn logs a repeating problem at most once per warnEvery, with the
// count of those it held back.
func (c *connector) warn(msg string, args ...any) {
	now := time.Now()
	c.warnMu.Lock()
	if now.Sub(c.warnAt) < c.m.o.WarnEvery {
		c.warnGap++
		c.warnMu.Unlock()
		return
	}
	if c.warnGap > 0 {
		args = append(args, "suppressed", c.warnGap)
	}
	c.warnAt, c.warnGap = now, 0
	c.warnMu.Unlock()
	c.log.Warn(msg, args...)
}

// backoff is the wait before the attempt-th redial: from MinBackoff,
// doubling, at most MaxBackoff, with ±20 % jitter.
func (c *connector) backoff(attempt int) time.Duration {
	d := float64(c.m.o.MinBackoff) * math.Pow(2, float64(min(attempt, 20)))
	d = min(d, float64(c.m.o.MaxBackoff))
	return time.Duration(d * (0.8 + 0.4*rand.Float64()))
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// poller polls a drivers.Device: the runner of every device connector.
// With subscribe, a device that is a drivers.Subscriber is subscribed to
// instead (OPC UA monitored items).
type poller struct {
	newDevice func() drivers.Device
	subscribe bool
}

// note is one reading pushed by a subscription.
type note struct {
	ms *mapState
	i  int
	r  drivers.Result
}

// mapState is one mapping's schedule and deadband memory.
type mapState struct {
	m     *drivers.Mapping
	batch *drivers.Batch
	next  time.Time
	last  []drivers.Value // last published value per tag
	sent  []bool          // whether last holds a value
	// subscribed: a subscription pushes this mapping's values; it is
	// polled only right after a write.
	subscribed bool
}

func (p *poller) run(ctx context.Context, c *connector) {
	maps := make([]*mapState, len(c.spec.Mappings))
	for i, m := range c.spec.Mappings {
		maps[i] = &mapState{m: m, batch: drivers.NewBatch(m.Tags), last: make([]drivers.Value, len(m.Tags)), sent: make([]bool, len(m.Tags))}
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		dev := p.newDevice()
		dctx, cancel := context.WithTimeout(ctx, c.m.o.DialTimeout)
		err := dev.Open(dctx)
		cancel()
		if err == nil {
			c.counters.Connects.Add(1)
			c.setState(Connected, "")
			c.log.Info("connector connected", "device", c.describe)
			attempt = 0
			err = p.serve(ctx, c, dev, maps)
		}
		dev.Close()
		if ctx.Err() != nil {
			return
		}
		c.counters.Failures.Add(1)
		c.setState(Reconnecting, err.Error())
		c.warn("connector: device failed; closing and redialling", "device", c.describe, "err", err)
		c.publishStatus()
		for _, ms := range maps {
			clear(ms.sent) // values after a reconnect are published even if unchanged
			ms.next = time.Time{}
		}
		if !sleep(ctx, c.backoff(attempt)) {
			return
		}
	}
}

// serve polls and writes until the connection fails or ctx ends.
func (p *poller) serve(ctx context.Context, c *connector, dev drivers.Device, maps []*mapState) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	statusEvery := time.NewTicker(c.m.o.StatusInterval)
	defer statusEvery.Stop()
	notes, failed, stop := p.subscribeAll(ctx, dev, maps)
	defer stop()
	for {
		now := time.Now()
		wait := time.Duration(math.MaxInt64)
		for _, ms := range maps {
			if !ms.next.After(now) {
				if err := p.poll(ctx, c, dev, ms); err != nil {
					return err
				}
				ms.next = nextTick(ms.next, ms.m.Every, time.Now())
				if ms.subscribed {
					ms.next = never
				}
			}
			wait = min(wait, time.Until(ms.next))
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-statusEvery.C:
			c.publishStatus()
		case w := <-c.writes:
			if err := p.write(ctx, c, dev, w, maps); err != nil {
				return err
			}
		case nt := <-notes:
			if c.publishResult(nt.ms, nt.i, nt.r, time.Now().UnixMilli()) {
				c.publishStatus()
			}
		case err := <-failed:
			return err
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// never is the next poll of a mapping a subscription serves.
var never = time.Unix(1<<40, 0)

// subscribeAll subscribes every mapping when the device pushes changes;
// the readings arrive on notes, a failed subscription on failed. stop
// ends the subscriptions and waits for them.
func (p *poller) subscribeAll(ctx context.Context, dev drivers.Device, maps []*mapState) (<-chan note, <-chan error, func()) {
	sub, ok := dev.(drivers.Subscriber)
	if !ok || !p.subscribe {
		for _, ms := range maps {
			ms.subscribed = false
		}
		return nil, nil, func() {}
	}
	notes, failed := make(chan note, 256), make(chan error, len(maps))
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, ms := range maps {
		ms.next, ms.subscribed = never, true
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sub.Subscribe(sctx, ms.batch, ms.m.Every, func(i int, r drivers.Result) {
				select {
				case notes <- note{ms, i, r}:
				case <-sctx.Done():
				}
			})
			if sctx.Err() == nil {
				failed <- fmt.Errorf("mapping %s: %w", ms.m.Name, err)
			}
		}()
	}
	return notes, failed, func() { cancel(); wg.Wait() }
}

// nextTick keeps a mapping on its grid; a poll that overran skips the
// ticks it missed.
func nextTick(prev time.Time, every time.Duration, now time.Time) time.Time {
	if prev.IsZero() {
		return now.Add(every)
	}
	next := prev.Add(every)
	if !next.After(now) {
		next = now.Add(every - now.Sub(prev)%every)
	}
	return next
}

// poll reads one mapping and publishes what changed past its deadband.
// A connection error discards the whole reading: nothing read on a
// connection that failed is published.
func (p *poller) poll(ctx context.Context, c *connector, dev drivers.Device, ms *mapState) error {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.m.o.PollTimeout)
	err := dev.Read(rctx, ms.batch)
	cancel()
	c.st.mu.Lock()
	c.st.lastPollNs = int64(time.Since(start))
	c.st.mu.Unlock()
	c.counters.Polls.Add(1)
	if err != nil {
		c.counters.ReadErrors.Add(1)
		return fmt.Errorf("mapping %s: %w", ms.m.Name, err)
	}
	changed := false
	now := time.Now().UnixMilli()
	for i := range ms.batch.Tags {
		r := ms.batch.Results[i]
		ms.batch.Results[i] = drivers.Result{}
		if c.publishResult(ms, i, r, now) {
			changed = true
		}
	}
	if changed {
		c.publishStatus()
	}
	return nil
}

// publishResult publishes one tag's reading past its deadband; it
// reports whether the tag's error state changed.
func (c *connector) publishResult(ms *mapState, i int, r drivers.Result, now int64) bool {
	t := ms.batch.Tags[i]
	if r.Err != nil {
		c.counters.ReadErrors.Add(1)
		ms.sent[i] = false
		if c.setTagError(t.Name, r.Err.Error()) {
			c.warn("connector: tag read refused", "tag", t.Name, "err", r.Err)
			return true
		}
		return false
	}
	c.counters.Reads.Add(1)
	c.values.note(t, r.Value)
	changed := c.setTagError(t.Name, "")
	if ms.sent[i] && !pastDeadband(t, ms.last[i], r.Value) {
		return changed
	}
	if err := c.pub.Publish(t.Topic, t.Payload(r.Value, now), 0, t.Retain); err != nil {
		c.warn("connector: cannot publish a value", "tag", t.Name, "topic", t.Topic, "err", err)
		return changed
	}
	c.counters.Published.Add(1)
	ms.last[i], ms.sent[i] = r.Value, true
	return changed
}

// pastDeadband reports whether v is to be published after last.
func pastDeadband(t *drivers.Tag, last, v drivers.Value) bool {
	switch {
	case t.Deadband < 0:
		return true // no DEADBAND: every poll
	case last.Kind != v.Kind:
		return true
	case v.Kind == drivers.Number && t.Deadband > 0:
		return math.Abs(v.Num-last.Num) > t.Deadband
	}
	return !v.Equal(last)
}

// write performs one queued write and publishes its result; the tag's
// mapping is polled next, so that its new value is published at once.
func (p *poller) write(ctx context.Context, c *connector, dev drivers.Device, w writeReq, maps []*mapState) error {
	wctx, cancel := context.WithTimeout(ctx, c.m.o.PollTimeout)
	err := dev.Write(wctx, w.tag, w.val)
	cancel()
	if err != nil {
		c.counters.WriteErrors.Add(1)
		c.writeResult(w, err)
		if drivers.IsTagError(err) {
			return nil
		}
		return fmt.Errorf("write %s: %w", w.tag.Name, err)
	}
	c.counters.Writes.Add(1)
	c.writeResult(w, nil)
	for _, ms := range maps {
		for i, t := range ms.m.Tags {
			if t == w.tag {
				ms.next = time.Time{}
				ms.sent[i] = false
			}
		}
	}
	return nil
}

// onWrite receives a publish to a writable tag's DESTINATION_TOPIC on the
// broker client's goroutine: it checks the value and queues it.
func (c *connector) onWrite(m *broker.Message) {
	if m.Retain || (m.Origin == broker.OriginConnector && m.ClientID == c.clientID) {
		return // a retained value replayed on subscribe is no command; nor is our own publish
	}
	for _, t := range c.spec.Tags() {
		if !t.Writable || !matches(t.WriteTopic, m.Topic) {
			continue
		}
		req := writeReq{tag: t, raw: string(m.Payload)}
		v, err := t.ParsePayload(m.Payload)
		if err == nil && t.Type != drivers.Bool {
			_, err = t.Encode(v) // range, type and length checks
		}
		if err != nil {
			c.counters.WriteErrors.Add(1)
			c.writeResult(req, err)
			continue
		}
		req.val = v
		if !c.running() {
			c.counters.WriteErrors.Add(1)
			c.writeResult(req, errors.New("connector is not running on this node"))
			continue
		}
		select {
		case c.writes <- req:
		default:
			c.counters.WriteErrors.Add(1)
			c.writeResult(req, fmt.Errorf("%d writes are waiting for the device; try again", writeQueue))
		}
	}
}

// writeResult publishes the outcome of a write on
// $SYS/Coreflux/Connectors/<name>/Writes/<tag>.
func (c *connector) writeResult(w writeReq, err error) {
	res := map[string]any{"tag": w.tag.Name, "value": w.raw, "ok": err == nil, "at": time.Now().UTC()}
	if err != nil {
		res["error"] = err.Error()
		c.setState(c.snapshot().Connection, "write "+w.tag.Name+": "+err.Error())
	}
	c.m.publishJSON(WriteTopic(c.spec.Name, w.tag.Name), res)
}
