package load

import (
	"fmt"
	"net"
	"time"
)

// Topology is how publishers and subscribers are wired.
type Topology int

// Topologies.
const (
	// FanIn: Clients publishers on topics bench/fanin/N, one subscriber
	// on "#".
	FanIn Topology = iota
	// FanOut: one publisher on bench/fanout, Clients subscribers on it.
	FanOut
	// Pairs: Clients publisher/subscriber pairs, each on its own topic
	// bench/pair/N.
	Pairs
	// Idle: Clients connections that only keep alive.
	Idle
	// Offline: Clients publishers on topics bench/offline/N and one
	// subscriber with a persistent session (clean session 0) on
	// bench/offline/+, which subscribes and disconnects before they
	// start, so that the broker queues every message for it. After the
	// run it reconnects and must receive every acknowledged message.
	Offline
)

func (t Topology) String() string {
	switch t {
	case FanIn:
		return "fan-in"
	case FanOut:
		return "fan-out"
	case Pairs:
		return "pairs"
	case Idle:
		return "idle"
	case Offline:
		return "offline"
	}
	return fmt.Sprintf("Topology(%d)", int(t))
}

// Scenario is one benchmark shape; QoS and payload size come from Config.
type Scenario struct {
	Name     string
	Topology Topology
	// Clients is the number of publishers (FanIn, Offline), subscribers
	// (FanOut), pairs (Pairs) or connections (Idle).
	Clients int
	// Rate is the total offered rate in messages/s over all publishers
	// (open loop). 0 means closed loop: publishers send as fast as the
	// end-to-end Window allows.
	Rate float64
	// Window is the closed-loop end-to-end window: the messages of one
	// publisher on their way to its most lagging subscriber. Keep Window ×
	// publishers per subscriber under the brokers' per-client queue limit,
	// or the queue overflows. Offline: the unacknowledged QoS 1 publishes
	// of each publisher (the PUBACK window, instead of Config.Inflight).
	Window int
	// SubscriberRate caps the messages/s each subscriber takes while the
	// publishers run (0 = as fast as it can); it drains at full speed
	// afterwards.
	SubscriberRate float64
	// MaxMessages bounds the messages all publishers send in a closed
	// loop, warm-up included (0: no bound); once they are sent the
	// measurement window ends early. Offline: the queue limit of the
	// offline session, so that no message is dropped.
	MaxMessages int
	// LossAllowed makes QoS 1 loss a figure instead of a failure (overload).
	LossAllowed bool
	// KeepAlive is the keep alive of Idle connections, in seconds.
	KeepAlive uint16
}

// Standard returns the scenarios of the benchmark (issue #7).
func Standard() []Scenario {
	return []Scenario{
		{Name: "fanin", Topology: FanIn, Clients: 100, Window: 64},
		{Name: "fanout", Topology: FanOut, Clients: 500, Window: 64},
		{Name: "pairs", Topology: Pairs, Clients: 500, Window: 64},
		{Name: "latency", Topology: Pairs, Clients: 100, Rate: 20000},
		{Name: "overload", Topology: FanIn, Clients: 100, Rate: 20000, SubscriberRate: 5000, LossAllowed: true},
		{Name: "connections", Topology: Idle, Clients: 20000, KeepAlive: 60},
		{Name: "durable", Topology: Offline, Clients: 50, Window: 16},
	}
}

// Usage is a sample of the broker process's resource use.
type Usage struct {
	CPU time.Duration // user + system time since the process started
	RSS int64         // resident set size in bytes
}

// Config is how to run a scenario.
type Config struct {
	Addr string // broker address, host:port
	// SubAddr, when set, is where the subscribers connect instead of Addr:
	// another node of a cluster, for cross-node figures.
	SubAddr     string
	Sources     []net.IP // local source addresses, used round robin (nil: any)
	QoS         byte     // 0 or 1
	PayloadSize int      // bytes, at least StampSize
	Warmup      time.Duration
	Duration    time.Duration // measurement window (Idle: how long the connections are held)
	// Drain is how long the end of a run waits without progress for
	// messages still on their way before it counts them lost (default 2s).
	Drain time.Duration
	// MinMessages makes the measurement window last beyond Duration until
	// it holds this many of the messages OutRate counts, or until nothing
	// has moved for Drain: a window that a loaded machine ran the
	// generator too little in to see any delivery measures nothing. 0:
	// the window is Duration.
	MinMessages uint64
	// Inflight bounds the unacknowledged QoS 1 PUBLISH packets of one
	// publisher (default 64).
	Inflight int
	// Sink runs against a Sink: subscribers expect nothing and the
	// figure is the publish rate.
	Sink bool
	// Probe samples the broker process (nil: no CPU or memory figures).
	Probe func() (Usage, error)
	// Restart, when not nil, is called in an Offline run after the
	// publishers hang up and before the subscriber reconnects: it restarts
	// the broker (after a crash, say) and returns its address.
	Restart func() (addr string, err error)
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.Drain == 0 {
		d.Drain = 2 * time.Second
	}
	if d.Inflight == 0 {
		d.Inflight = 64
	}
	if d.PayloadSize < StampSize {
		d.PayloadSize = StampSize
	}
	return d
}

func (c *Config) probe() Usage {
	if c.Probe == nil {
		return Usage{}
	}
	u, err := c.Probe()
	if err != nil {
		return Usage{}
	}
	return u
}

// Result holds the figures of one run.
type Result struct {
	Sent      uint64 // PUBLISH packets written
	Acked     uint64 // PUBACKs received (QoS 1)
	Expected  uint64 // deliveries the subscribers should have received (Offline: Acked)
	Received  uint64 // deliveries received (Offline: after reconnecting)
	Lost      uint64 // expected and never received
	Reordered uint64 // received after a later message of the same publisher
	Stalls    int    // closed-loop windows written off after a stall
	Capped    bool   // the publishers sent Scenario.MaxMessages: the window ended early

	Elapsed time.Duration // measurement window
	InRate  float64       // publishes/s written in the window
	OutRate float64       // deliveries/s received in the window (Sink, Offline: publishes acknowledged/s)
	Offered float64       // offered rate, msg/s (open loop)
	// Backlog is, in an open loop, the messages that were due and not
	// yet sent when the window began: the generator had fallen behind
	// (it did not get the CPU), and InRate includes its catching up, at
	// up to (Offered × Elapsed + Backlog) / Elapsed.
	Backlog uint64
	Latency *Histogram // end-to-end latency in the window (Offline: publish to PUBACK)
	// GeneratorLate is how late the generator's timer woke paced
	// publishers in the window (open loop); the latency of a message
	// that came due while its publisher slept counts from the wake-up.
	GeneratorLate *Histogram
	// GeneratorReadLag is, in paced runs with kernel receive timestamps,
	// how long delivered messages waited in the subscribers' sockets
	// before the generator read them: Latency ends at the timestamp.
	GeneratorReadLag *Histogram
	BrokerCPU        time.Duration // broker CPU time in the window
	// GeneratorCPU is the CPU time of the whole generator process in the
	// window: close to Elapsed × its CPUs means it may be the bottleneck.
	GeneratorCPU time.Duration

	// Idle connections.
	Conns       int
	ConnectTime time.Duration // to connect them all, CONNACK included
	ConnectCPU  time.Duration // broker CPU time while connecting
	RSSBefore   int64         // broker RSS before connecting, bytes
	RSSAfter    int64         // broker RSS at the end of the window (Idle: after holding them), bytes
}

// ConnectRate returns connections/s of an Idle run.
func (r Result) ConnectRate() float64 {
	if r.ConnectTime <= 0 {
		return 0
	}
	return float64(r.Conns) / r.ConnectTime.Seconds()
}

// BytesPerConn returns the broker's RSS growth per connection.
func (r Result) BytesPerConn() float64 {
	if r.Conns == 0 {
		return 0
	}
	return float64(r.RSSAfter-r.RSSBefore) / float64(r.Conns)
}

// Verify returns the failure of a run: at QoS 1 any reordered message,
// and any lost one unless the scenario allows loss.
func (r Result) Verify(sc Scenario, qos byte) error {
	if qos == 0 || sc.Topology == Idle {
		return nil
	}
	if r.Reordered > 0 {
		return fmt.Errorf("%d messages reordered at QoS 1", r.Reordered)
	}
	if r.Lost > 0 && sc.Topology == Offline {
		return fmt.Errorf("%d of %d acknowledged messages missing from the offline session", r.Lost, r.Expected)
	}
	if r.Lost > 0 && !sc.LossAllowed {
		return fmt.Errorf("%d of %d messages lost at QoS 1", r.Lost, r.Expected)
	}
	return nil
}

func (sc Scenario) validate(cfg Config) error {
	switch {
	case sc.Clients <= 0:
		return fmt.Errorf("scenario %s: Clients = %d", sc.Name, sc.Clients)
	case cfg.QoS > 1:
		return fmt.Errorf("scenario %s: QoS %d (want 0 or 1)", sc.Name, cfg.QoS)
	case sc.Topology != Idle && sc.Rate == 0 && sc.Window <= 0 && !cfg.Sink:
		return fmt.Errorf("scenario %s: closed loop needs a Window", sc.Name)
	case sc.Topology == Offline && (cfg.QoS != 1 || cfg.Sink || sc.Rate > 0):
		return fmt.Errorf("scenario %s: an offline session needs QoS 1, a broker and a closed loop", sc.Name)
	case cfg.Duration <= 0:
		return fmt.Errorf("scenario %s: Duration = %v", sc.Name, cfg.Duration)
	}
	return nil
}
