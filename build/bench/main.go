package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"gantry/build/bench/load"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if o.sinkListen != "" {
		return serveSink(o.sinkListen)
	}
	h, err := newHarness(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := h.runAll(ctx); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep := h.report()
	fmt.Fprint(stdout, rep.text)
	if o.out != "" {
		if err := h.writeDocument(rep); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		fmt.Fprintln(stderr, "bench: wrote", o.out)
	}
	if rep.failed {
		fmt.Fprintln(stderr, "bench: some runs FAILED (see the tables)")
		return 1
	}
	return 0
}

// waitForSignal blocks until SIGINT or SIGTERM.
func waitForSignal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}

// mode is a CPU placement of broker and load generator.
type mode struct {
	name       string
	brokerCPUs string // taskset list
	loadCPUs   []int
}

// harness runs the plan and keeps the outcomes.
type harness struct {
	opts     options
	stderr   io.Writer
	modes    []mode
	sources  []net.IP
	conns    int      // idle connections after the open-file cap
	notes    []string // caveats for the report
	loadAvg  string   // of the machine when the harness started
	outcomes []outcome
}

func newHarness(o options, stderr io.Writer) (*harness, error) {
	h := &harness{opts: o, stderr: stderr, conns: o.conns, loadAvg: loadAverage()}
	// Brokers run in a scratch directory: resolve the binaries first.
	for _, bin := range []*string{&h.opts.gantry, &h.opts.mosquitto} {
		if abs, err := exec.LookPath(*bin); err == nil {
			*bin, _ = filepath.Abs(abs)
		}
	}
	for _, b := range o.brokers {
		bin := map[string]string{gantryKind: h.opts.gantry, mosquittoKind: h.opts.mosquitto}[b]
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s binary: %w (make build builds bin/gantry)", b, err)
		}
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("taskset (util-linux) is needed to place the brokers: %w", err)
	}
	all := make([]int, runtime.NumCPU())
	for i := range all {
		all[i] = i
	}
	for _, name := range o.modes {
		m := mode{name: unpinnedMode, brokerCPUs: fmt.Sprintf("0-%d", len(all)-1), loadCPUs: all}
		if name == pinnedMode {
			cpus, err := parseCPUList(o.loadCPUs)
			if err != nil {
				return nil, fmt.Errorf("-load-cpus: %w", err)
			}
			m = mode{name: pinnedMode, brokerCPUs: o.brokerCPUs, loadCPUs: cpus}
		}
		h.modes = append(h.modes, m)
	}
	for i := range o.sources {
		h.sources = append(h.sources, net.IPv4(127, 0, 0, byte(2+i)))
	}
	return h, h.capConnections()
}

// capConnections raises the open-file limit and keeps the idle scenario
// below it: the broker and the generator each need one descriptor per
// connection plus their own.
func (h *harness) capConnections() error {
	limit, err := raiseFileLimit()
	if err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}
	if room := int(min(limit, 1<<30)) - 256; h.conns > room {
		h.notes = append(h.notes, fmt.Sprintf("The connections scenario was capped at %d connections "+
			"(asked: %d) by the open-file hard limit of %d (ulimit -Hn).", room, h.conns, limit))
		h.conns = room
	}
	return nil
}

// loadAverage returns the 1, 5 and 15 minute load averages: other work on
// the machine skews every figure.
func loadAverage() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// parseCPUList parses a taskset-style list such as "1", "0-3" or "1,3".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range split(s) {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("empty CPU list")
	}
	return cpus, nil
}

// variant is one scenario at one QoS and payload size.
type variant struct {
	sc      load.Scenario
	qos     byte
	payload int
}

// variants lists the selected scenarios × QoS × payload sizes, in the
// order of load.Standard. The idle scenario has a single variant, the
// durable one runs at QoS 1 only.
func (h *harness) variants() []variant {
	var vs []variant
	for _, sc := range load.Standard() {
		if !slices.Contains(h.opts.scenarios, sc.Name) {
			continue
		}
		switch {
		case sc.Topology == load.Idle:
			sc.Clients = h.conns
			vs = append(vs, variant{sc: sc})
			continue
		case sc.Topology == load.Offline: // QoS 1 only
			sc.MaxMessages = durableQueueLimit
			for _, p := range h.opts.payloads {
				vs = append(vs, variant{sc: sc, qos: 1, payload: p})
			}
			continue
		case sc.SubscriberRate > 0:
			sc.SubscriberRate = sc.SubscriberRate / sc.Rate * h.opts.rate
			sc.Rate = h.opts.rate
		case sc.Rate > 0:
			sc.Rate = h.opts.rate
		}
		for _, q := range h.opts.qos {
			for _, p := range h.opts.payloads {
				vs = append(vs, variant{sc: sc, qos: q, payload: p})
			}
		}
	}
	return vs
}

// brokersFor returns the brokers that run v, in their A B A B order: the
// selected ones, or for the durable scenario Gantry with durability on and
// off, then Mosquitto with persistence (each when its broker is selected).
func (h *harness) brokersFor(v variant) []string {
	if !isDurable(v) {
		return h.opts.brokers
	}
	var bs []string
	if slices.Contains(h.opts.brokers, gantryKind) {
		bs = append(bs, gantryDurableKind, gantryMemoryKind)
	}
	if slices.Contains(h.opts.brokers, mosquittoKind) {
		bs = append(bs, mosquittoPersistKind)
	}
	return bs
}

func isDurable(v variant) bool { return v.sc.Topology == load.Offline }
