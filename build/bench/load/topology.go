package load

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// dialWorkers bounds concurrent connection attempts.
const dialWorkers = 32

// throttledReadBuffer is the socket receive buffer of a rate-limited
// subscriber: small, so that the messages it does not take wait in the
// broker's queue rather than in the kernel.
const throttledReadBuffer = 32 << 10

// plan is the wiring of a topology: one topic per publisher, one filter
// and the publishers it hears from per subscriber.
type plan struct {
	topics  []string
	filters []string
	from    [][]int
	fanout  int // subscribers per publisher
}

// slot returns subscriber i's index among the subscribers of each
// publisher it hears (only fan-out has more than one per publisher).
func (p plan) slot(i int) int {
	if p.fanout > 1 {
		return i
	}
	return 0
}

func planFor(sc Scenario) plan {
	switch sc.Topology {
	case FanIn, Offline:
		prefix, filter := "bench/fanin/", "#"
		if sc.Topology == Offline {
			prefix, filter = "bench/offline/", "bench/offline/+"
		}
		p := plan{topics: make([]string, sc.Clients), filters: []string{filter}, from: [][]int{nil}, fanout: 1}
		for i := range p.topics {
			p.topics[i] = prefix + strconv.Itoa(i)
			p.from[0] = append(p.from[0], i)
		}
		return p
	case FanOut:
		p := plan{topics: []string{"bench/fanout"}, filters: make([]string, sc.Clients), from: make([][]int, sc.Clients), fanout: sc.Clients}
		for i := range p.filters {
			p.filters[i] = "bench/fanout"
			p.from[i] = []int{0}
		}
		return p
	default: // Pairs
		p := plan{topics: make([]string, sc.Clients), filters: make([]string, sc.Clients), from: make([][]int, sc.Clients), fanout: 1}
		for i := range p.topics {
			p.topics[i] = fmt.Sprintf("bench/pair/%d", i)
			p.filters[i] = p.topics[i]
			p.from[i] = []int{i}
		}
		return p
	}
}

// connect creates the publishers, connects and subscribes the subscribers
// (starting their readers; Offline: parks the subscriber), then connects
// the publishers (starting their ack readers). Publishers do not send
// until startSenders.
func (r *run) connect(ctx context.Context) error {
	pl := planFor(r.sc)
	d := dialer{addr: r.cfg.Addr, sources: r.cfg.Sources}
	r.pubs = make([]*publisher, len(pl.topics))
	for i, tp := range pl.topics {
		r.pubs[i] = r.newPublisher(i, tp, pl.fanout, len(pl.topics))
	}
	var err error
	sd := d
	if r.cfg.SubAddr != "" {
		sd.addr = r.cfg.SubAddr
	}
	if r.sc.Topology == Offline {
		err = r.park(ctx, sd, pl.filters[0])
	} else {
		err = r.connectSubscribers(ctx, sd, pl)
	}
	if err != nil {
		return err
	}
	return parallel(ctx, len(r.pubs), dialWorkers, func(i int) error {
		p := r.pubs[i]
		// Publishers come after the subscribers in source address order.
		c, err := d.dial(ctx, len(pl.filters)+i, fmt.Sprintf("%s-p%d", r.prefix, i), 0, activeBuffer)
		if err != nil {
			return err
		}
		p.c = c
		r.startReader(func() error { return r.afterHangUp(p.readAcks(r.poke)) })
		return nil
	})
}

// connectSubscribers connects and subscribes the subscribers of pl and
// starts their readers.
func (r *run) connectSubscribers(ctx context.Context, d dialer, pl plan) error {
	r.subs = make([]*subscriber, len(pl.filters))
	return parallel(ctx, len(pl.filters), dialWorkers, func(i int) error {
		c, err := d.dial(ctx, i, fmt.Sprintf("%s-s%d", r.prefix, i), 0, activeBuffer)
		if err != nil {
			return err
		}
		s := newSubscriber(i, pl.slot(i), c, pl.filters[i], r, pl.from[i], r.sc.SubscriberRate)
		r.subs[i] = s
		if tc, ok := c.nc.(*net.TCPConn); ok && s.rate > 0 {
			tc.SetReadBuffer(throttledReadBuffer)
		}
		if err := c.subscribe(s.filter, r.cfg.QoS); err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		r.startReader(s.read)
		return nil
	})
}

func (r *run) startReader(f func() error) {
	r.readers.Add(1)
	go func() {
		defer r.readers.Done()
		r.fail(f())
	}()
}

// newPublisher prepares publisher i of n on topic tp.
func (r *run) newPublisher(i int, tp string, fanout, n int) *publisher {
	p := &publisher{
		id:       uint32(i),
		topic:    []byte(tp),
		qos:      r.cfg.QoS,
		payload:  make([]byte, r.cfg.PayloadSize),
		epoch:    r.epoch,
		recv:     make([]atomic.Int64, fanout),
		window:   r.sc.Window,
		inflight: r.cfg.Inflight,
		quota:    r.quota,
		wake:     make(chan struct{}, 1),
	}
	for k := StampSize; k < len(p.payload); k++ {
		p.payload[k] = byte('a' + k%26)
	}
	if r.cfg.Sink {
		p.recv, p.window = nil, 0
	}
	if r.sc.Topology == Offline {
		p.window, p.inflight = 0, r.sc.Window
		p.sentAt, p.measuring = make([]atomic.Int64, p.inflight), &r.measuring
	}
	if r.sc.Rate > 0 {
		p.window = 0
		p.interval = time.Duration(float64(n) / r.sc.Rate * float64(time.Second))
		p.phase = p.interval * time.Duration(i) / time.Duration(n)
		p.measuring = &r.measuring
	}
	return p
}
