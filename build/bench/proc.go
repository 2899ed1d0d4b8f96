package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gantry/build/bench/load"
)

// Limits both brokers get, so that they queue and send alike: Gantry's
// defaults, written into Mosquitto's configuration (except its in-flight
// limit, see -mosquitto-inflight).
const (
	queueLimit    = 10000 // messages queued per client
	inflightLimit = 1024  // QoS 1 messages in flight to one client
	// durableQueueLimit is the queue of the durable scenario, whose
	// offline session must keep every message: Gantry's maximum.
	durableQueueLimit = 10000000
)

// Process lifetimes.
const (
	startTimeout = 15 * time.Second
	stopTimeout  = 15 * time.Second
	// restartTimeout bounds a restart after SIGKILL, which loads the
	// messages queued on disk.
	restartTimeout = 2 * time.Minute
	logLines       = 20 // output lines kept for error messages
)

// process is one broker (or sink) process listening on addr.
type process struct {
	kind   string
	addr   string
	dir    string // scratch directory: data, configuration
	sp     spec
	cpus   string // taskset list; empty: inherit
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // from Wait, set before exited closes

	mu  sync.Mutex
	out []string // last lines of output
}

// spec is how to start one kind of process.
type spec struct {
	argv  []string
	env   []string
	ready func(line string) bool // the line that says it listens
}

// startProcess starts a broker of kind on a free loopback port, on cpus
// (taskset list; empty: inherit), and waits until it says it listens.
func (h *harness) startProcess(kind, cpus string) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gantry-bench-")
	if err != nil {
		return nil, err
	}
	p := &process{kind: kind, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cpus: cpus}
	p.sp, err = h.spec(p, port)
	if err == nil {
		err = p.start(startTimeout)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return p, nil
}

// spec returns the command line, environment and readiness line of p.
func (h *harness) spec(p *process, port int) (spec, error) {
	switch p.kind {
	case gantryKind, gantryDurableKind, gantryMemoryKind:
		ready := func(l string) bool { return strings.Contains(l, "msg=listening") && strings.Contains(l, p.addr) }
		return spec{argv: []string{h.opts.gantry, "-dev"}, env: gantryEnv(p, port), ready: ready}, nil
	case mosquittoKind, mosquittoPersistKind:
		conf := filepath.Join(p.dir, "mosquitto.conf")
		text := mosquittoConf(port, h.opts.mosquittoInflight, queueLimit, "")
		if p.kind == mosquittoPersistKind {
			text = mosquittoConf(port, h.opts.mosquittoInflight, durableQueueLimit, p.dir)
		}
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return spec{}, err
		}
		ready := func(l string) bool { return strings.Contains(l, " running") }
		return spec{argv: []string{h.opts.mosquitto, "-c", conf}, ready: ready}, nil
	case sinkKind:
		exe, err := os.Executable()
		if err != nil {
			return spec{}, err
		}
		ready := func(l string) bool { return strings.Contains(l, sinkReady) }
		return spec{argv: []string{exe, "-sink-listen", p.addr}, ready: ready}, nil
	}
	return spec{}, fmt.Errorf("unknown broker kind %q", p.kind)
}

// gantryEnv configures Gantry in p's scratch directory: loopback
// listener on port, no other listener, the harness's limits and, for
// the durable scenario's kinds, durability on or off and the queue
// of an offline session large enough to keep every message.
func gantryEnv(p *process, port int) []string {
	queue, durable := queueLimit, false
	if p.kind != gantryKind {
		queue, durable = durableQueueLimit, p.kind == gantryDurableKind
	}
	return []string{
		"COREFLUX_DATA_DIR=" + p.dir,
		"COREFLUX_DURABILITY_ENABLED=" + strconv.FormatBool(durable),
		"COREFLUX_MQTT_BIND_IP=127.0.0.1",
		"COREFLUX_MQTT_PORT=" + strconv.Itoa(port),
		"COREFLUX_MQTT_WEBSOCKET_PORT=0",
		"COREFLUX_OPS_PORT=0",
		"COREFLUX_LOG_LEVEL=info",
		"COREFLUX_MQTT_MAX_QUEUED_MESSAGES=" + strconv.Itoa(queue),
		"COREFLUX_MQTT_MAX_INFLIGHT=" + strconv.Itoa(inflightLimit),
	}
}

// mosquittoConf is a configuration matching Gantry's limits: loopback
// listener, anonymous clients, no per-connection logs, inflight QoS 1
// messages per client (0 = no limit) and queue messages queued per
// client. With a persistDir it has persistence on, in that directory,
// saved on the default interval (autosave_interval 1800 s) and at exit;
// without, persistence off.
func mosquittoConf(port, inflight, queue int, persistDir string) string {
	persistence := "persistence false\n"
	if persistDir != "" {
		persistence = "persistence true\npersistence_location " + persistDir + "/\n"
	}
	return fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
%sconnection_messages false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
max_inflight_messages %d
max_queued_messages %d
max_queued_bytes 0
set_tcp_nodelay true
`, port, persistence, inflight, queue)
}

// start runs the process and waits up to timeout for its readiness line.
func (p *process) start(timeout time.Duration) error {
	sp, argv := p.sp, p.sp.argv
	if p.cpus != "" {
		argv = append([]string{"taskset", "-c", p.cpus}, argv...)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), sp.env...)
	p.cmd.Dir = p.dir
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return err
	}
	cmd, exited := p.cmd, make(chan struct{})
	p.exited = exited
	go func() {
		p.err = cmd.Wait()
		close(exited)
	}()
	ready := make(chan struct{})
	go p.watch(r, sp.ready, ready)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("exited before listening (%v): %s", p.err, p.lastOutput())
	case <-t.C:
		p.stop()
		return fmt.Errorf("not listening after %v: %s", timeout, p.lastOutput())
	}
}

// crash kills the process with SIGKILL, as a power cut would, and starts
// it again on the same directory and port: it then holds what it had on
// disk. It returns the address to reconnect to.
func (p *process) crash() (string, error) {
	p.cmd.Process.Kill()
	<-p.exited
	if err := p.start(restartTimeout); err != nil {
		return "", fmt.Errorf("%s after SIGKILL: %w", p.kind, err)
	}
	return p.addr, nil
}

// watch reads the process's output to the end, keeps the last lines and
// closes ready at the first line that ready accepts.
func (p *process) watch(r io.ReadCloser, isReady func(string) bool, ready chan struct{}) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.out = append(p.out, line)
		if len(p.out) > logLines {
			p.out = p.out[len(p.out)-logLines:]
		}
		p.mu.Unlock()
		if !signalled && isReady(line) {
			signalled = true
			close(ready)
		}
	}
}

func (p *process) lastOutput() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// stop terminates the process (SIGTERM, then SIGKILL after stopTimeout)
// and removes its scratch directory.
func (p *process) stop() {
	defer os.RemoveAll(p.dir)
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// clockTick is the unit of utime and stime in /proc (USER_HZ, 100 on
// every Linux architecture).
const clockTick = 10 * time.Millisecond

// usage reads the process's CPU time and resident memory from /proc.
func (p *process) usage() (load.Usage, error) {
	pid := p.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return load.Usage{}, err
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return load.Usage{}, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return load.Usage{}, err
	}
	rss, err := vmRSS(pid)
	return load.Usage{CPU: time.Duration(utime+stime) * clockTick, RSS: rss}, err
}

// vmRSS returns VmRSS of /proc/PID/status in bytes.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sinkReady is the line the sink prints once it listens.
const sinkReady = "sink listening on"

// serveSink is the -sink-listen mode: a load.Sink until SIGTERM.
func serveSink(addr string) int {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, sinkReady, l.Addr())
	var s load.Sink
	go s.Serve(l)
	waitForSignal()
	return 0
}
