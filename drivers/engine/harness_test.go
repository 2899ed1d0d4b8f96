package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	svm "github.com/simonvetter/modbus"

	"gantry/broker"
	"gantry/internal/leakcheck"
	"gantry/lot/syntax"
)

const waitTimeout = 5 * time.Second

// eventually polls cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// TestMain fails the run when a goroutine of the drivers or the broker
// outlives the tests.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "the drivers or the broker", leakcheck.Running("gantry/drivers", "gantry/broker."))
}

// node is a broker with a Manager, and a watcher that records every
// message the connectors publish.
type node struct {
	t   *testing.T
	srv *broker.Server
	m   *Manager
	cli *broker.Client // publishes as an MQTT client would (writes)

	deployed []Definition
	// noHistory: keep only each topic's last value (the soak test, whose
	// history would grow the heap it measures).
	noHistory bool

	mu   sync.Mutex
	last map[string]string
	log  map[string][]string
}

func newNode(t *testing.T, opts ...func(*Options)) *node {
	t.Helper()
	srv, err := broker.New(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Broker: srv, StatusInterval: time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		DialTimeout: 2 * time.Second, PollTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, srv: srv, m: m, last: map[string]string{}, log: map[string][]string{}}
	w := srv.NewClient("watch", broker.OriginClient, func(msg *broker.Message) {
		n.mu.Lock()
		n.last[msg.Topic] = string(msg.Payload)
		if !n.noHistory {
			n.log[msg.Topic] = append(n.log[msg.Topic], string(msg.Payload))
		}
		n.mu.Unlock()
	})
	for _, f := range []string{"#", "$SYS/#"} {
		if err := w.Subscribe(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	n.cli = srv.NewClient("writer", broker.OriginClient, nil)
	t.Cleanup(func() {
		m.Close()
		w.Close()
		n.cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return n
}

// deploy parses LoT source holding connectors and deploys them: what it
// holds replaces what was deployed (as a project load would).
func (n *node) deploy(src string) { n.deployKeep(src, false) }

// deployAdd deploys the connectors of src beside those already deployed.
func (n *node) deployAdd(src string) { n.deployKeep(src, true) }

func (n *node) deployKeep(src string, keep bool) {
	n.t.Helper()
	f, err := syntax.Parse("test", src)
	if err != nil {
		n.t.Fatal(err)
	}
	var list []Definition
	if keep {
		list = append(list, n.deployed...)
	}
	for _, d := range f.Defs {
		c := d.(*syntax.Connector)
		if err := n.m.Check(c, nil); err != nil {
			n.t.Fatalf("connector %s: %v", c.Name, err)
		}
		list = append(list, Definition{Name: c.Name, Source: src, Def: c})
	}
	n.deployed = list
	n.m.Deploy(list, nil)
}

func (n *node) value(tp string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.last[tp]
	return v, ok
}

func (n *node) history(tp string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.log[tp]...)
}

func (n *node) reset(tp string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.last, tp)
	delete(n.log, tp)
}

// waitValue waits until tp's last value is want.
func (n *node) waitValue(tp, want string) {
	n.t.Helper()
	eventually(n.t, waitTimeout, func() error {
		if v, ok := n.value(tp); !ok || v != want {
			return fmt.Errorf("%s = %q (seen %v), want %q", tp, v, ok, want)
		}
		return nil
	})
}

// status reads a connector's last published status.
func (n *node) status(name string) Snapshot {
	var s Snapshot
	v, _ := n.value(StatusTopic(name))
	json.Unmarshal([]byte(v), &s)
	return s
}

func (n *node) waitStatus(name string, cond func(s Snapshot) error) Snapshot {
	n.t.Helper()
	var s Snapshot
	eventually(n.t, waitTimeout, func() error {
		s = n.status(name)
		return cond(s)
	})
	return s
}

func (n *node) publish(tp, payload string) {
	n.t.Helper()
	if err := n.cli.Publish(tp, []byte(payload), 0, false); err != nil {
		n.t.Fatal(err)
	}
}

// ---- a Modbus TCP device: simonvetter/modbus's server ----

type plc struct {
	t    *testing.T
	addr string
	srv  *svm.ModbusServer

	mu       sync.Mutex
	hold     [100]uint16
	input    [100]uint16
	coils    [100]bool
	discrete [100]bool
	requests int           // read requests of holding registers
	block    chan struct{} // when not nil, requests wait until it is closed
}

func newPLC(t *testing.T) *plc {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &plc{t: t, addr: addr}
	p.start()
	t.Cleanup(func() {
		p.unblock()
		p.stop()
	})
	return p
}

func (p *plc) start() {
	p.t.Helper()
	srv, err := svm.NewServer(&svm.ServerConfiguration{URL: "tcp://" + p.addr, MaxClients: 10, Timeout: 30 * time.Second,
		Logger: log.New(io.Discard, "", 0)}, p)
	if err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		if err = srv.Start(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the port is released asynchronously
	}
	p.srv = srv
}

func (p *plc) stop() {
	if p.srv != nil {
		p.srv.Stop()
		p.srv = nil
	}
}

func (p *plc) port() string { _, port, _ := net.SplitHostPort(p.addr); return port }

func (p *plc) set(fn func(p *plc)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

func (p *plc) wait() {
	p.mu.Lock()
	ch := p.block
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (p *plc) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.block != nil {
		close(p.block)
		p.block = nil
	}
}

func (p *plc) HandleCoils(r *svm.CoilsRequest) ([]bool, error) {
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(r.Addr)+int(r.Quantity) > len(p.coils) {
		return nil, svm.ErrIllegalDataAddress
	}
	if r.IsWrite {
		copy(p.coils[r.Addr:], r.Args)
		return nil, nil
	}
	return append([]bool(nil), p.coils[r.Addr:r.Addr+r.Quantity]...), nil
}

func (p *plc) HandleDiscreteInputs(r *svm.DiscreteInputsRequest) ([]bool, error) {
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(r.Addr)+int(r.Quantity) > len(p.discrete) {
		return nil, svm.ErrIllegalDataAddress
	}
	return append([]bool(nil), p.discrete[r.Addr:r.Addr+r.Quantity]...), nil
}

func (p *plc) HandleHoldingRegisters(r *svm.HoldingRegistersRequest) ([]uint16, error) {
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(r.Addr)+int(r.Quantity) > len(p.hold) {
		return nil, svm.ErrIllegalDataAddress
	}
	if r.IsWrite {
		copy(p.hold[r.Addr:], r.Args)
		return nil, nil
	}
	p.requests++
	return append([]uint16(nil), p.hold[r.Addr:r.Addr+r.Quantity]...), nil
}

func (p *plc) HandleInputRegisters(r *svm.InputRegistersRequest) ([]uint16, error) {
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(r.Addr)+int(r.Quantity) > len(p.input) {
		return nil, svm.ErrIllegalDataAddress
	}
	return append([]uint16(nil), p.input[r.Addr:r.Addr+r.Quantity]...), nil
}
