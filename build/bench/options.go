package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"gantry/build/bench/load"
)

// Broker kinds. The durable scenario has its own: Gantry with durability
// on and off, and Mosquitto with persistence.
const (
	gantryKind           = "gantry"
	mosquittoKind        = "mosquitto"
	sinkKind             = "sink"
	gantryDurableKind    = "gantry-durable"
	gantryMemoryKind     = "gantry-memory"
	mosquittoPersistKind = "mosquitto-persist"
)

// CPU placement modes.
const (
	pinnedMode   = "pinned"
	unpinnedMode = "unpinned"
)

// options are the command-line settings.
type options struct {
	quick             bool
	rounds            int
	duration          time.Duration
	latencyDuration   time.Duration // latency scenario's window; 0: duration
	warmup            time.Duration
	scenarios         []string
	brokers           []string
	qos               []byte
	payloads          []int
	modes             []string
	sink              bool
	gantry            string
	mosquitto         string
	mosquittoInflight int
	out               string
	chart             string
	brokerCPUs        string
	loadCPUs          string
	conns             int
	rate              float64
	sources           int
	sinkListen        string // internal: serve a sink on this address and nothing else
	args              []string
}

// quickSettings are the -quick values of the flags the user did not set.
var quickSettings = map[string]string{
	"rounds":           "2",
	"duration":         "1s",
	"latency-duration": "4s",
	"warmup":           "500ms",
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "short run for make bench (about 9 minutes on 2 cores): -rounds 2 -duration 1s -latency-duration 4s -warmup 0.5s unless set")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per scenario variant, brokers alternating A B A B")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measurement window per run (connections: hold time)")
	fs.DurationVar(&o.latencyDuration, "latency-duration", 0, "measurement window of the latency scenario, whose percentiles need more samples than a rate (0: -duration)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the measurement window")
	scenarios := fs.String("scenarios", strings.Join(scenarioNames(), ","), "comma list of scenarios")
	brokers := fs.String("brokers", "gantry,mosquitto", "comma list of brokers: gantry, mosquitto")
	qos := fs.String("qos", "0,1", "comma list of QoS levels")
	payloads := fs.String("payloads", "16,1024", "comma list of payload sizes in bytes (at least 16)")
	modes := fs.String("modes", "pinned,unpinned", "comma list of CPU placements: pinned, unpinned")
	fs.BoolVar(&o.sink, "sink", true, "check the generator against its sink (primary mode, closed-loop scenarios)")
	fs.StringVar(&o.gantry, "gantry", "bin/gantry", "Gantry binary (make build)")
	fs.StringVar(&o.mosquitto, "mosquitto", "/usr/sbin/mosquitto", "Mosquitto binary")
	fs.IntVar(&o.mosquittoInflight, "mosquitto-inflight", 0, "Mosquitto's max_inflight_messages; 0 (no limit) works around the inflight quota bug of 2.0.11, 1024 matches Gantry")
	fs.StringVar(&o.out, "out", "docs/BENCHMARKS.md", "Markdown file whose bench section is rewritten (empty: none)")
	fs.StringVar(&o.chart, "chart", "docs/benchmarks.png", "PNG chart of the throughput, written with -out and embedded in it (empty: none)")
	fs.StringVar(&o.brokerCPUs, "broker-cpus", "0", "CPUs of the broker in pinned mode (taskset list)")
	fs.StringVar(&o.loadCPUs, "load-cpus", "1", "CPUs of the load generator in pinned mode")
	fs.IntVar(&o.conns, "conns", 20000, "idle connections of the connections scenario (capped by the open-file limit)")
	fs.Float64Var(&o.rate, "rate", 20000, "offered msg/s of the latency and overload scenarios")
	fs.IntVar(&o.sources, "sources", 16, "client source addresses 127.0.0.2 ... (spreads ephemeral ports)")
	fs.StringVar(&o.sinkListen, "sink-listen", "", "internal: run as the generator's sink on this address")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.quick {
		if err := applyQuick(fs); err != nil {
			return o, err
		}
	}
	o.args = args
	return o, o.parseLists(*scenarios, *brokers, *qos, *payloads, *modes)
}

// applyQuick sets the -quick values of the flags not given explicitly.
func applyQuick(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range quickSettings {
		if !set[name] {
			if err := fs.Set(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *options) parseLists(scenarios, brokers, qos, payloads, modes string) error {
	var err error
	if o.scenarios, err = oneOf("scenario", split(scenarios), scenarioNames()); err != nil {
		return err
	}
	if o.brokers, err = oneOf("broker", split(brokers), []string{gantryKind, mosquittoKind}); err != nil {
		return err
	}
	if o.modes, err = oneOf("mode", split(modes), []string{pinnedMode, unpinnedMode}); err != nil {
		return err
	}
	for _, s := range split(qos) {
		if s != "0" && s != "1" {
			return fmt.Errorf("-qos %q: want 0 or 1", s)
		}
		o.qos = append(o.qos, s[0]-'0')
	}
	for _, s := range split(payloads) {
		n, err := strconv.Atoi(s)
		if err != nil || n < load.StampSize || n > 1<<20 {
			return fmt.Errorf("-payloads %q: want %d..1048576 bytes", s, load.StampSize)
		}
		o.payloads = append(o.payloads, n)
	}
	if o.rounds < 1 || o.duration <= 0 || o.warmup < 0 || o.rate <= 0 || o.sources < 0 || o.conns < 1 {
		return fmt.Errorf("-rounds, -duration, -rate, -conns must be positive")
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func oneOf(what string, got, valid []string) ([]string, error) {
	if len(got) == 0 {
		return nil, fmt.Errorf("no %s given", what)
	}
	for _, g := range got {
		if !slices.Contains(valid, g) {
			return nil, fmt.Errorf("unknown %s %q (want one of %s)", what, g, strings.Join(valid, ", "))
		}
	}
	return got, nil
}

func scenarioNames() []string {
	var names []string
	for _, sc := range load.Standard() {
		names = append(names, sc.Name)
	}
	return names
}

// command is the invocation as the user would type it.
func (o *options) command() string {
	parts := []string{"go run ./build/bench"}
	for _, a := range o.args {
		if strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
