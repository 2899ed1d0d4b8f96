package main

import (
	"context"
	"fmt"
	"time"

	"gantry/build/bench/load"
)

// outcome is one run of one variant against one broker.
type outcome struct {
	mode   string
	v      variant
	broker string
	round  int
	res    load.Result
	err    error // the run did not complete, or failed its QoS 1 check
}

// runAll runs every mode, variant, round and broker, in that nesting, so
// that the brokers alternate A B A B on each variant. In the first mode
// each closed-loop variant also runs once against the sink. A run that
// fails is recorded and the plan goes on; only ctx stops it.
func (h *harness) runAll(ctx context.Context) error {
	vs := h.variants()
	total := 0
	for _, v := range vs {
		total += len(h.modes) * h.opts.rounds * len(h.brokersFor(v))
	}
	fmt.Fprintf(h.stderr, "bench: %d runs of %v + %v warm-up each\n", total, h.opts.duration, h.opts.warmup)
	for i, m := range h.modes {
		if err := pinSelf(m.loadCPUs); err != nil {
			return fmt.Errorf("placing the load generator on CPUs %v: %w", m.loadCPUs, err)
		}
		for _, v := range vs {
			for round := 1; round <= h.opts.rounds; round++ {
				for _, b := range h.brokersFor(v) {
					h.runOne(ctx, m, v, b, round)
				}
			}
			if i == 0 && h.opts.sink && closedLoop(v) {
				h.runOne(ctx, m, v, sinkKind, 1)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// closedLoop reports whether v measures the highest throughput end to
// end (the durable scenario has a table of its own).
func closedLoop(v variant) bool {
	return v.sc.Topology != load.Idle && v.sc.Topology != load.Offline && v.sc.Rate == 0
}

// runOne starts a fresh broker, runs v against it and records the outcome.
func (h *harness) runOne(ctx context.Context, m mode, v variant, broker string, round int) {
	o := outcome{mode: m.name, v: v, broker: broker, round: round}
	o.res, o.err = h.measure(ctx, m, v, broker)
	if o.err == nil {
		o.err = o.res.Verify(v.sc, v.qos)
	}
	if ctx.Err() != nil {
		return
	}
	h.outcomes = append(h.outcomes, o)
	fmt.Fprintf(h.stderr, "%-8s %-24s %-9s #%d  %s\n", m.name, v.label(), broker, round, o.progress())
}

func (h *harness) measure(ctx context.Context, m mode, v variant, broker string) (load.Result, error) {
	p, err := h.startProcess(broker, m.brokerCPUs)
	if err != nil {
		return load.Result{}, err
	}
	defer p.stop()
	res, err := load.Run(ctx, v.sc, h.config(p, v))
	if err != nil {
		select {
		case <-p.exited:
			return res, fmt.Errorf("%w; the broker exited (%v): %s", err, p.err, p.lastOutput())
		default:
		}
	}
	return res, err
}

// config is how to run v against p. Gantry with durability is killed
// (SIGKILL) and restarted before the durable scenario's subscriber
// reconnects, so that it collects what was on disk.
func (h *harness) config(p *process, v variant) load.Config {
	cfg := load.Config{
		Addr:        p.addr,
		Sources:     h.sources,
		QoS:         v.qos,
		PayloadSize: v.payload,
		Warmup:      h.opts.warmup,
		Duration:    h.opts.duration,
		Sink:        p.kind == sinkKind,
		Probe:       p.usage,
	}
	if isLatency(v) && h.opts.latencyDuration > 0 {
		cfg.Duration = h.opts.latencyDuration
	}
	if p.kind == gantryDurableKind {
		cfg.Restart = p.crash
	}
	return cfg
}

// label names a variant: "fanin QoS 1 16 B".
func (v variant) label() string {
	if v.sc.Topology == load.Idle {
		return v.sc.Name
	}
	return fmt.Sprintf("%s QoS %d %s", v.sc.Name, v.qos, sizeLabel(v.payload))
}

func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// progress is the one-line account of an outcome.
func (o outcome) progress() string {
	if o.err != nil {
		return "FAIL: " + o.err.Error()
	}
	r := o.res
	switch o.v.sc.Topology {
	case load.Idle:
		return fmt.Sprintf("%d conns at %.0f/s, %.1f KB/conn, RSS %s → %s", r.Conns, r.ConnectRate(),
			r.BytesPerConn()/1024, mb(r.RSSBefore), mb(r.RSSAfter))
	case load.Offline:
		capped := ""
		if r.Capped {
			capped = fmt.Sprintf(" (window ended after %d messages: %v)", o.v.sc.MaxMessages, r.Elapsed.Round(time.Millisecond))
		}
		return fmt.Sprintf("acked %.0f/s p50 %s p99 %s CPU %.2fs (generator %.2fs) RSS %s; received %d of %d acked on reconnect%s",
			r.OutRate, ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)), r.BrokerCPU.Seconds(),
			r.GeneratorCPU.Seconds(), mb(r.RSSAfter), r.Received, r.Acked, capped)
	}
	late := ""
	if r.GeneratorLate != nil && r.GeneratorLate.Count() > 0 {
		late = fmt.Sprintf(" (timer late p99 %s)", ms(r.GeneratorLate.Quantile(0.99)))
	}
	if r.GeneratorReadLag != nil && r.GeneratorReadLag.Count() > 0 {
		late += fmt.Sprintf(" (read lag p99 %s)", ms(r.GeneratorReadLag.Quantile(0.99)))
	}
	return fmt.Sprintf("in %.0f/s out %.0f/s p50 %s p99 %s CPU %.2fs (generator %.2fs%s) lost %d reordered %d stalls %d",
		r.InRate, r.OutRate, ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)),
		r.BrokerCPU.Seconds(), r.GeneratorCPU.Seconds(), late, r.Lost, r.Reordered, r.Stalls)
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
