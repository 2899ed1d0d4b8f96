package load

import (
	"context"
	"fmt"
	"os"
	"time"

	"gantry/broker/packet"
)

// idleDialWorkers bounds concurrent connection attempts of the Idle
// scenario: enough to keep a broker's accept loop busy.
const idleDialWorkers = 64

// pingTick is how often the keep-alive pinger wakes.
const pingTick = 100 * time.Millisecond

// runIdle connects sc.Clients clients, holds them for cfg.Duration while
// each sends PINGREQ every half keep-alive interval, and reports the
// connect rate and the broker's memory growth. Idle clients never read:
// the few PINGRESP bytes wait in their socket buffers.
func runIdle(ctx context.Context, sc Scenario, cfg Config) (Result, error) {
	d := dialer{addr: cfg.Addr, sources: cfg.Sources}
	prefix := fmt.Sprintf("bench-%d-%d", os.Getpid(), runIDs.Add(1))
	conns := make([]*conn, sc.Clients)
	defer closeIdle(conns)
	before := cfg.probe()
	start := time.Now()
	err := parallel(ctx, sc.Clients, idleDialWorkers, func(i int) error {
		c, err := d.dial(ctx, i, fmt.Sprintf("%s-i%d", prefix, i), sc.KeepAlive, idleBuffer)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		c.in = nil
		conns[i] = c
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	res := Result{Conns: sc.Clients, ConnectTime: time.Since(start), RSSBefore: before.RSS}
	connected := cfg.probe()
	res.ConnectCPU = connected.CPU - before.CPU
	if err := holdIdle(ctx, conns, sc.KeepAlive, cfg.Duration); err != nil {
		return Result{}, err
	}
	after := cfg.probe()
	res.Elapsed = cfg.Duration
	res.BrokerCPU = after.CPU - connected.CPU
	res.RSSAfter = after.RSS
	return res, nil
}

// holdIdle keeps the connections for d, pinging each one every half
// keep-alive interval, spread evenly over the interval.
func holdIdle(ctx context.Context, conns []*conn, keepAlive uint16, d time.Duration) error {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(pingTick)
	defer tick.Stop()
	period := time.Duration(keepAlive) * time.Second / 2
	perTick := 0
	if period > 0 {
		perTick = max(1, int(int64(len(conns))*int64(pingTick)/int64(period)))
	}
	ping := packet.AppendPingreq(nil)
	next := 0
	for {
		select {
		case <-end.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for range perTick {
			c := conns[next]
			next = (next + 1) % len(conns)
			c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.nc.Write(ping); err != nil {
				return fmt.Errorf("keep-alive: %w", err)
			}
		}
	}
}

func closeIdle(conns []*conn) {
	for _, c := range conns {
		if c != nil {
			c.nc.Close()
		}
	}
}
