package main

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	clusterUser     = "cluster"
	clusterPassword = "a-strong-password"
	startWait       = 60 * time.Second // a node listening after its start
	stopWait        = 30 * time.Second // a node gone after SIGTERM or SIGKILL
)

// node is one gantry process on its own address (and, as root, its own
// network namespace), started, killed, paused and restarted by the
// harness on one data directory.
type node struct {
	name    string // broker-a, broker-b, ...
	ip      string
	ns      string // network namespace, "" on loopback
	bin     string
	dataDir string
	env     []string // the node's environment beyond os.Environ

	mu      sync.Mutex // guards cmd, exited, paused, tail
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process was reaped
	paused  bool
	started bool        // it ran before
	tail    []string    // last lines of stderr, for failure messages
	starts  []time.Time // every start after the first: a restart (its node failed over)
	// logFile, when set, keeps all of stderr; written by the one reader
	// goroutine of the running process.
	logFile *os.File
}

func (n *node) addr() string { return net.JoinHostPort(n.ip, "1883") }

func (n *node) command(args ...string) *exec.Cmd {
	if n.ns == "" {
		return exec.Command(n.bin, args...)
	}
	// ip netns exec execs the program: the PID is gantry's.
	return exec.Command("ip", append([]string{"netns", "exec", n.ns, n.bin}, args...)...)
}

// addClusterUser creates the cluster service user in the data directory,
// as the quick start does before the first start.
func (n *node) addClusterUser() error {
	cmd := n.command("-addUser", clusterUser, clusterPassword)
	cmd.Env = append(os.Environ(), n.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: -addUser %s: %v\n%s", n.name, clusterUser, err, out)
	}
	return nil
}

// start runs the binary and returns once its MQTT listener is up.
func (n *node) start() error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("%s already running", n.name)
	}
	cmd := n.command("-dev")
	cmd.Env = append(os.Environ(), n.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		n.mu.Unlock()
		return err
	}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("%s: %w", n.name, err)
	}
	exited := make(chan struct{})
	if n.started {
		n.starts = append(n.starts, time.Now())
	}
	n.cmd, n.exited, n.paused, n.started = cmd, exited, false, true
	n.mu.Unlock()
	listening := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for lines.Scan() {
			n.keep(lines.Text())
			if n.logFile != nil {
				fmt.Fprintln(n.logFile, lines.Text())
			}
			if !seen && strings.Contains(lines.Text(), "msg=listening") {
				seen = true
				close(listening)
			}
		}
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-listening:
		return nil
	case <-exited:
		n.forget(exited)
		return fmt.Errorf("%s exited before listening:\n%s", n.name, n.logTail())
	case <-time.After(startWait):
		return fmt.Errorf("%s not listening after %v:\n%s", n.name, startWait, n.logTail())
	}
}

func (n *node) keep(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tail = append(n.tail, line)
	if len(n.tail) > 200 {
		n.tail = n.tail[len(n.tail)-100:]
	}
}

func (n *node) logTail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.tail, "\n")
}

// forget clears the process once it exited (and was not replaced).
func (n *node) forget(exited chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == exited {
		n.cmd, n.exited, n.paused = nil, nil, false
	}
}

// restarts returns when the node was started again.
func (n *node) restarts() []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.starts)
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// signal sends sig and, for SIGKILL and SIGTERM, waits until the process
// is gone (SIGKILL after stopWait of a SIGTERM).
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	if cmd == nil {
		n.mu.Unlock()
		return fmt.Errorf("%s is not running", n.name)
	}
	if n.paused && sig != syscall.SIGCONT {
		cmd.Process.Signal(syscall.SIGCONT) // a stopped process does not act on SIGTERM
	}
	n.paused = sig == syscall.SIGSTOP
	n.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", n.name, sig, err)
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return nil
	}
	select {
	case <-exited:
	case <-time.After(stopWait):
		if sig == syscall.SIGKILL {
			return fmt.Errorf("%s still running %v after SIGKILL", n.name, stopWait)
		}
		cmd.Process.Kill()
		<-exited
		n.forget(exited)
		return fmt.Errorf("%s did not stop within %v of SIGTERM (killed)", n.name, stopWait)
	}
	n.forget(exited)
	return nil
}

func (n *node) kill() error   { return n.signal(syscall.SIGKILL) }
func (n *node) stop() error   { return n.signal(syscall.SIGTERM) }
func (n *node) pause() error  { return n.signal(syscall.SIGSTOP) }
func (n *node) resume() error { return n.signal(syscall.SIGCONT) }

// network places the nodes and cuts links between them.
type network interface {
	// place gives node i its address and, for namespaces, its namespace.
	place(n *node, i int) error
	// cut makes every node of side unreachable from every other node, and
	// the other way round; heal undoes every cut.
	cut(side, rest []*node) error
	heal() error
	close() error
}

// loopbackNet: every node on its own 127.a.b.i; no partitions.
type loopbackNet struct{ prefix string }

func (l *loopbackNet) place(n *node, i int) error {
	n.ip = fmt.Sprintf("%s%d", l.prefix, i+1)
	return nil
}

var errNeedsRoot = errors.New("needs root: network namespaces (ip netns) cut the links of a partition")

func (l *loopbackNet) cut(_, _ []*node) error { return errNeedsRoot }
func (l *loopbackNet) heal() error            { return nil }
func (l *loopbackNet) close() error           { return nil }

// netnsNet: a bridge in the root namespace with .254 of a 10.x.y.0/24,
// and one namespace per node with a veth port on it.
type netnsNet struct {
	prefix, subnet, bridge string
	hosts                  []string
	mu                     sync.Mutex // guards routes
	routes                 [][]string // ip arguments that delete each cut
}

func newNetnsNet(tag string) (*netnsNet, error) {
	if os.Geteuid() != 0 {
		return nil, errNeedsRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("needs the ip command (iproute2) for network namespaces")
	}
	l := &netnsNet{prefix: tag}
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip route: %v\n%s", err, out)
	}
	for {
		s := fmt.Sprintf("10.%d.%d.", 100+rand.IntN(150), rand.IntN(256))
		if !strings.Contains(string(out), s) {
			l.subnet = s
			break
		}
	}
	l.bridge = tag + "br"
	if err := ipCmd("link", "add", l.bridge, "type", "bridge", "mcast_snooping", "0"); err != nil {
		return nil, err
	}
	if err := ipCmd("addr", "add", l.subnet+"254/24", "dev", l.bridge); err != nil {
		l.close()
		return nil, err
	}
	if err := ipCmd("link", "set", l.bridge, "up"); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (l *netnsNet) place(n *node, i int) error {
	ns, ip := fmt.Sprintf("%s-%d", l.prefix, i+1), fmt.Sprintf("%s%d", l.subnet, i+1)
	port := fmt.Sprintf("%sv%d", l.prefix, i+1)
	if err := ipCmd("netns", "add", ns); err != nil {
		return err
	}
	l.hosts = append(l.hosts, ns)
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port},
		{"link", "set", port, "master", l.bridge, "up"},
		{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	n.ns, n.ip = ns, ip
	return nil
}

// cut adds, in each namespace, a blackhole route to every address of the
// other side: the kernel drops what a node sends there (a new connection
// fails, an open one stalls and retransmits), in both directions.
func (l *netnsNet) cut(side, rest []*node) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	add := func(from, to *node) error {
		if err := ipCmd("-n", from.ns, "route", "add", "blackhole", to.ip+"/32"); err != nil {
			return err
		}
		l.routes = append(l.routes, []string{"-n", from.ns, "route", "del", "blackhole", to.ip + "/32"})
		return nil
	}
	for _, a := range side {
		for _, b := range rest {
			if err := add(a, b); err != nil {
				return err
			}
			if err := add(b, a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *netnsNet) heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, r := range l.routes {
		errs = append(errs, ipCmd(r...))
	}
	l.routes = nil
	return errors.Join(errs...)
}

// close deletes the namespaces (and with them the veth pairs) and the
// bridge; the processes must be gone first.
func (l *netnsNet) close() error {
	var errs []error
	for _, ns := range l.hosts {
		errs = append(errs, ipCmd("netns", "del", ns))
	}
	l.hosts = nil
	errs = append(errs, ipCmd("link", "del", l.bridge))
	return errors.Join(errs...)
}
