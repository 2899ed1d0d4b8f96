package main

import (
	"slices"
	"time"

	"gantry/build/bench/load"
)

// summary is the figures of one (mode, variant, broker) over its rounds:
// medians of the per-round figures, latency from the merged histograms.
type summary struct {
	runs int   // rounds that completed
	fail error // first failure, if any round failed
	lat  load.Histogram
	late load.Histogram // generator timer lateness (open loop)
	lag  load.Histogram // generator read lag behind the kernel's receive timestamps (open loop)

	out, in, cpu, perCPU   float64 // msg/s, msg/s, CPU s, deliveries per CPU s
	genCPUs                float64 // CPUs the generator used in the window
	elapsed                float64 // measurement window, s
	sent, received, lost   float64
	acked                  float64 // QoS 1 publishes acknowledged in the run
	connRate, perConn      float64 // conn/s, bytes
	rssBefore, rssAfter    float64 // bytes
	connectCPU, holdCPU    float64 // CPU s
	offered, subscriberCap float64 // msg/s
}

// key identifies the outcomes summarised together.
type key struct {
	mode, variant, broker string
}

func keyOf(o outcome) key { return key{o.mode, o.v.label(), o.broker} }

// summarize groups the outcomes by key.
func summarize(outcomes []outcome) map[key]*summary {
	groups := map[key][]outcome{}
	for _, o := range outcomes {
		groups[keyOf(o)] = append(groups[keyOf(o)], o)
	}
	sums := map[key]*summary{}
	for k, os := range groups {
		sums[k] = summarizeGroup(os)
	}
	return sums
}

func summarizeGroup(os []outcome) *summary {
	s := &summary{}
	var ok []load.Result
	for _, o := range os {
		if o.err != nil {
			if s.fail == nil {
				s.fail = o.err
			}
			continue
		}
		ok = append(ok, o.res)
		s.lat.Merge(o.res.Latency)
		if o.res.GeneratorLate != nil {
			s.late.Merge(o.res.GeneratorLate)
		}
		if o.res.GeneratorReadLag != nil {
			s.lag.Merge(o.res.GeneratorReadLag)
		}
	}
	s.runs = len(ok)
	if len(ok) == 0 {
		return s
	}
	s.offered = os[0].v.sc.Rate
	s.subscriberCap = os[0].v.sc.SubscriberRate
	s.messageFigures(ok)
	s.connectionFigures(ok)
	return s
}

func (s *summary) messageFigures(rs []load.Result) {
	s.out = median(rs, func(r load.Result) float64 { return r.OutRate })
	s.in = median(rs, func(r load.Result) float64 { return r.InRate })
	s.cpu = median(rs, func(r load.Result) float64 { return r.BrokerCPU.Seconds() })
	s.perCPU = median(rs, func(r load.Result) float64 {
		if r.BrokerCPU <= 0 {
			return 0
		}
		return r.OutRate * r.Elapsed.Seconds() / r.BrokerCPU.Seconds()
	})
	s.elapsed = median(rs, func(r load.Result) float64 { return r.Elapsed.Seconds() })
	s.genCPUs = median(rs, func(r load.Result) float64 { return r.GeneratorCPU.Seconds() / r.Elapsed.Seconds() })
	s.sent = median(rs, func(r load.Result) float64 { return float64(r.Sent) })
	s.received = median(rs, func(r load.Result) float64 { return float64(r.Received) })
	s.lost = median(rs, func(r load.Result) float64 { return float64(r.Lost) })
	s.acked = median(rs, func(r load.Result) float64 { return float64(r.Acked) })
}

func (s *summary) connectionFigures(rs []load.Result) {
	s.connRate = median(rs, load.Result.ConnectRate)
	s.perConn = median(rs, load.Result.BytesPerConn)
	s.rssBefore = median(rs, func(r load.Result) float64 { return float64(r.RSSBefore) })
	s.rssAfter = median(rs, func(r load.Result) float64 { return float64(r.RSSAfter) })
	s.connectCPU = median(rs, func(r load.Result) float64 { return r.ConnectCPU.Seconds() })
	s.holdCPU = median(rs, func(r load.Result) float64 { return r.BrokerCPU.Seconds() })
}

// median returns the median of f over rs (the mean of the middle two for
// an even count).
func median(rs []load.Result, f func(load.Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// lossPercent returns lost as a percentage of the messages expected.
func (s *summary) lossPercent() float64 {
	if s.received+s.lost == 0 {
		return 0
	}
	return 100 * s.lost / (s.received + s.lost)
}

// p returns a latency percentile.
func (s *summary) p(q float64) time.Duration { return s.lat.Quantile(q) }
