package load

import (
	"context"
	"errors"
	"fmt"
)

// The Offline scenario: its subscriber has a persistent session and is
// offline while the publishers run, then collects its queue.

// offlineID is the Offline subscriber's client identifier: fixed for the
// run, so that the subscriber finds its session again.
func (r *run) offlineID() string { return r.prefix + "-offline" }

// park connects the Offline subscriber with a persistent session (clean
// session 0), subscribes it to filter at QoS 1 and disconnects it: from
// then on the broker queues every matching message for it.
func (r *run) park(ctx context.Context, d dialer, filter string) error {
	d.persistent = true
	c, err := d.dial(ctx, 0, r.offlineID(), 0, activeBuffer)
	if err != nil {
		return fmt.Errorf("offline subscriber: %w", err)
	}
	defer c.close()
	if c.present {
		return fmt.Errorf("offline subscriber: %s already has a session", r.offlineID())
	}
	if err := c.subscribe(filter, r.cfg.QoS); err != nil {
		return fmt.Errorf("offline subscriber: %w", err)
	}
	return nil
}

// collect disconnects the publishers, restarts the broker when
// cfg.Restart is set, reconnects the Offline subscriber to its session
// and reads its queue until it holds every acknowledged message or
// nothing arrives for cfg.Drain. Its counts are the run's Received and
// Lost. A run that failed already collects nothing.
func (r *run) collect(ctx context.Context) error {
	select {
	case <-r.failed:
		return nil
	default:
	}
	r.hangUp()
	if r.cfg.Restart != nil {
		addr, err := r.cfg.Restart()
		if err != nil {
			return fmt.Errorf("restarting the broker: %w", err)
		}
		r.cfg.Addr = addr
	}
	d := dialer{addr: r.cfg.Addr, sources: r.cfg.Sources, persistent: true}
	if r.cfg.SubAddr != "" {
		d.addr = r.cfg.SubAddr
	}
	c, err := d.dial(ctx, 0, r.offlineID(), 0, activeBuffer)
	if err != nil {
		return fmt.Errorf("offline subscriber: %w", err)
	}
	pl := planFor(r.sc)
	s := newSubscriber(0, 0, c, pl.filters[0], r, pl.from[0], 0)
	s.countAcked = true
	r.subs = []*subscriber{s} // closeAll closes it
	if !c.present {
		return errors.New("offline subscriber: the broker kept no session")
	}
	r.startReader(s.read)
	r.waitDrained(ctx)
	return nil
}

// hangUp disconnects the publishers, whose messages are all sent and
// acknowledged (or given up on): their readers' errors no longer count.
func (r *run) hangUp() {
	r.hungUp.Store(true)
	for _, p := range r.pubs {
		p.c.close()
	}
}

// afterHangUp returns err unless the publishers were hung up.
func (r *run) afterHangUp(err error) error {
	if r.hungUp.Load() {
		return nil
	}
	return err
}
