package discovery

// The helper-process side of the network-namespace tests: the test binary
// runs itself inside a namespace (TestHelperProcess, configured through
// the helperEnv variable), runs one discovery source there and prints
// what it finds on stdout as JSON lines; the parent reads them.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grandcat/zeroconf"

	"gantry/cluster/signing"
)

const helperEnv = "GANTRY_DISCOVERY_HELPER"

// helperSpec configures one helper process.
type helperSpec struct {
	Mode       string // "multicast", "zeroconf", or "consoles" (browse _http._tcp like an operator's laptop)
	ClusterID  string
	NodeName   string
	Secret     string
	RaftAddr   string
	OpsAddr    string
	Interfaces []string
	Interval   time.Duration // announcement or browse interval
}

// helperLine is one line a helper prints.
type helperLine struct {
	Peers    []Peer    `json:"peers,omitempty"`
	Consoles []console `json:"consoles,omitempty"`
	Stopped  bool      `json:"stopped,omitempty"`
	Leak     string    `json:"leak,omitempty"`
	Err      string    `json:"err,omitempty"`
}

// console is a web console found through _http._tcp.
type console struct {
	Instance string   `json:"instance"`
	Port     int      `json:"port"`
	Text     []string `json:"text"`
	Addrs    []string `json:"addrs"`
}

// TestHelperProcess is not a test: it is the process the namespace tests
// start. It runs until its standard input closes.
func TestHelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("the helper process of the network-namespace tests; runs only when they start it")
	}
	var spec helperSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(runHelper(spec))
}

func runHelper(spec helperSpec) int {
	out := json.NewEncoder(os.Stdout)
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", spec.NodeName)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the parent closes stdin to stop us
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	var src Source
	var err error
	signer := signing.New([]byte(spec.Secret), nil)
	switch spec.Mode {
	case "multicast":
		src, err = NewMulticast(MulticastOptions{ClusterID: spec.ClusterID, NodeName: spec.NodeName,
			RaftAddr: spec.RaftAddr, OpsAddr: spec.OpsAddr, Interfaces: spec.Interfaces,
			Interval: spec.Interval, Signer: signer, Logger: log})
	case "zeroconf":
		src, err = NewZeroconf(ZeroconfOptions{ClusterID: spec.ClusterID, NodeName: spec.NodeName,
			RaftAddr: spec.RaftAddr, OpsAddr: spec.OpsAddr, Interfaces: spec.Interfaces,
			BrowseInterval: spec.Interval, Signer: signer, Logger: log})
	case "consoles":
		browseConsoles(ctx, spec.Interval, out)
		out.Encode(helperLine{Stopped: true})
		return 0
	default:
		err = fmt.Errorf("unknown mode %q", spec.Mode)
	}
	if err != nil {
		out.Encode(helperLine{Err: err.Error()})
		return 1
	}

	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx) }()
	// The leak check at the end must be able to see Run's goroutines.
	for deadline := time.Now().Add(2 * time.Second); len(discoveryGoroutines()) == 0; {
		if time.Now().After(deadline) {
			out.Encode(helperLine{Err: "the goroutine check sees nothing of the running source: it would miss leaks"})
			break
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	var last []Peer
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case err := <-ran:
			out.Encode(helperLine{Err: fmt.Sprintf("Run returned early: %v", err)})
			return 1
		case <-ctx.Done():
		case <-tick.C:
			peers, _ := src.Peers(ctx)
			if !slices.Equal(peers, last) || last == nil {
				out.Encode(helperLine{Peers: peers})
				last = append([]Peer{}, peers...)
			}
		}
	}
	select {
	case err := <-ran:
		if err != nil {
			out.Encode(helperLine{Err: fmt.Sprintf("Run: %v", err)})
		}
	case <-time.After(15 * time.Second):
		out.Encode(helperLine{Err: "Run did not return 15 s after its context ended"})
		return 1
	}
	line := helperLine{Stopped: true}
	if err := noGoroutinesLeft(5 * time.Second); err != nil {
		line.Leak = err.Error()
	}
	out.Encode(line)
	return 0
}

// browseConsoles lists _http._tcp instances as an operator's tool would,
// in rounds of interval, until ctx ends.
func browseConsoles(ctx context.Context, interval time.Duration, out *json.Encoder) {
	seen := map[string]console{}
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, interval)
		res, err := zeroconf.NewResolver(zeroconf.SelectIPTraffic(zeroconf.IPv4))
		if err != nil {
			out.Encode(helperLine{Err: err.Error()})
			<-rctx.Done()
			cancel()
			continue
		}
		entries := make(chan *zeroconf.ServiceEntry, 8)
		res.Browse(rctx, ConsoleService, mdnsDomain, entries)
		for e := range entries {
			// The library returns the instance in DNS presentation
			// format (`Gantry\ gw-a`); a browser shows it unescaped.
			c := console{Instance: unescapeDNS(e.Instance), Port: e.Port, Text: e.Text}
			for _, ip := range e.AddrIPv4 {
				c.Addrs = append(c.Addrs, ip.String())
			}
			seen[e.Instance] = c
		}
		cancel()
		var list []console
		for _, c := range seen {
			list = append(list, c)
		}
		slices.SortFunc(list, func(a, b console) int { return strings.Compare(a.Instance, b.Instance) })
		out.Encode(helperLine{Consoles: list})
	}
}

// helper is the parent's handle on a helper process.
type helper struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer
	exited chan struct{}

	mu       sync.Mutex      // guards the fields below
	peers    []Peer          // last reported
	ever     map[string]bool // node names ever reported
	consoles []console       // last reported
	stopped  *helperLine     // the final line
	errs     []string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startHelper runs a helper for spec on host. t.Cleanup kills it if it is
// still running and, when the test failed, logs its standard error.
func startHelper(t *testing.T, n *testNet, host string, spec helperSpec) *helper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	h := &helper{name: spec.NodeName, ever: map[string]bool{}, exited: make(chan struct{})}
	if h.name == "" {
		h.name = spec.Mode + "@" + host
	}
	h.cmd = n.Command(context.Background(), host, exe, "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=2m")
	h.cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	h.cmd.Stderr = &h.stderr
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", h.name, err)
	}
	go h.read(stdout)
	t.Cleanup(func() {
		select {
		case <-h.exited:
		default:
			h.cmd.Process.Kill() // by its own PID
			<-h.exited
		}
		if t.Failed() {
			t.Logf("--- stderr of %s:\n%s", h.name, h.stderr.String())
		}
	})
	return h
}

// read takes in the helper's lines until it exits.
func (h *helper) read(stdout io.Reader) {
	defer close(h.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l helperLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // the testing package's own output
		}
		h.mu.Lock()
		switch {
		case l.Err != "":
			h.errs = append(h.errs, l.Err)
		case l.Stopped:
			h.stopped = &l
		case l.Consoles != nil:
			h.consoles = l.Consoles
		default:
			h.peers = l.Peers
			for _, p := range l.Peers {
				h.ever[p.NodeName] = true
			}
		}
		h.mu.Unlock()
	}
	h.cmd.Wait()
}

// Peers returns the peers last reported.
func (h *helper) Peers() []Peer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.peers)
}

// Consoles returns the consoles last reported.
func (h *helper) Consoles() []console {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.consoles)
}

// Ever reports whether the helper ever listed a peer called name.
func (h *helper) Ever(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ever[name]
}

// Errors returns the errors the helper reported.
func (h *helper) Errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}

// stopHelpers closes the helpers' standard input and checks that each
// stops, leaving no goroutine behind.
func stopHelpers(t *testing.T, hs ...*helper) {
	t.Helper()
	for _, h := range hs {
		h.stdin.Close()
	}
	for _, h := range hs {
		select {
		case <-h.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit 30 s after its stdin closed", h.name)
			continue
		}
		h.mu.Lock()
		stopped, errs := h.stopped, h.errs
		h.mu.Unlock()
		switch {
		case len(errs) > 0:
			t.Errorf("%s reported: %s", h.name, strings.Join(errs, "; "))
		case stopped == nil:
			t.Errorf("%s exited without stopping cleanly (exit status %v)", h.name, h.cmd.ProcessState)
		case stopped.Leak != "":
			t.Errorf("%s left goroutines after Run returned: %s", h.name, stopped.Leak)
		case strings.Contains(h.stderr.String(), "DATA RACE"):
			t.Errorf("%s: the race detector found a data race (see its stderr)", h.name)
		case h.cmd.ProcessState.ExitCode() != 0:
			t.Errorf("%s exited with status %d", h.name, h.cmd.ProcessState.ExitCode())
		}
	}
}

// peerSet renders peers as "name@raftAddr" sorted, for messages.
func peerSet(ps []Peer) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.NodeName + "@" + p.RaftAddr
		if p.OpsAddr != "" {
			s[i] += "/ops=" + p.OpsAddr
		}
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

// unescapeDNS removes the backslash escapes of a DNS label in
// presentation format (a backslash and a character; \DDD is not used here).
func unescapeDNS(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
