package load

import (
	"context"
	"flag"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/store"
)

// durableBroker is an in-process broker keeping its state in a store.
type durableBroker struct {
	t    *testing.T
	path string
	srv  *broker.Server
	st   *store.Store
}

// start opens the store, restores the broker from it and serves it on a
// new loopback port, whose address it returns.
func (b *durableBroker) start() (string, error) {
	st, err := store.Open(b.path, store.Options{})
	if err != nil {
		return "", err
	}
	srv, err := broker.New(broker.Options{MaxQueuedMessages: 1 << 20})
	if err == nil {
		srv.SetPersister(st)
		err = srv.Restore()
	}
	var l net.Listener
	if err == nil {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		st.Close()
		return "", err
	}
	go srv.Serve(l, broker.ListenerConfig{Name: "tcp", AllowAnonymous: true})
	b.srv, b.st = srv, st
	return l.Addr().String(), nil
}

// stop closes the broker, then the store, which commits what is queued.
func (b *durableBroker) stop() {
	if b.srv != nil {
		b.srv.Close()
		b.st.Close()
		b.srv, b.st = nil, nil
	}
}

// restart stops the broker and starts it again on the same store.
func (b *durableBroker) restart() (string, error) {
	b.stop()
	return b.start()
}

func offlineScenario() Scenario {
	return Scenario{Name: "durable", Topology: Offline, Clients: 10, Window: 16}
}

// TestOfflineSessionSurvivesRestart runs the durable scenario against a
// broker with a store, restarted before the subscriber reconnects: it
// must find every acknowledged message in its session.
func TestOfflineSessionSurvivesRestart(t *testing.T) {
	b := &durableBroker{t: t, path: filepath.Join(t.TempDir(), "gantry.db")}
	addr, err := b.start()
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	cfg := smokeConfig(addr, 1, 1024)
	cfg.Restart = b.restart
	res, err := Run(context.Background(), offlineScenario(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSmoke(t, offlineScenario(), 1, res)
	if res.Received != res.Acked || res.Acked == 0 {
		t.Errorf("received %d after the restart, acknowledged %d", res.Received, res.Acked)
	}
}

// TestOfflineStopsAtMaxMessages bounds the messages sent: the window
// ends early and the session holds them all.
func TestOfflineStopsAtMaxMessages(t *testing.T) {
	sc := offlineScenario()
	sc.MaxMessages = 1000
	cfg := smokeConfig(startBrokerWith(t, broker.Options{MaxQueuedMessages: 1000}), 1, 16)
	cfg.Duration = 10 * time.Second
	start := time.Now()
	res, err := Run(context.Background(), sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1000 || res.Received != 1000 || !res.Capped || time.Since(start) > 5*time.Second {
		t.Errorf("sent %d received %d capped %v in %v, want 1000, 1000, true, well under 10s",
			res.Sent, res.Received, res.Capped, time.Since(start))
	}
}

// TestOfflineCountsDroppedMessages lets the broker keep only the newest
// 50 messages of the offline session: the others are lost, and the run
// fails its check.
func TestOfflineCountsDroppedMessages(t *testing.T) {
	addr := startBrokerWith(t, broker.Options{MaxQueuedMessages: 50})
	sc := offlineScenario()
	res, err := Run(context.Background(), sc, smokeConfig(addr, 1, 16))
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked <= 50 || res.Received != 50 || res.Lost != res.Acked-50 || res.Reordered != 0 {
		t.Fatalf("acked %d received %d lost %d reordered %d, want received 50 and the rest lost",
			res.Acked, res.Received, res.Lost, res.Reordered)
	}
	if err := res.Verify(sc, 1); err == nil || !strings.Contains(err.Error(), "missing from the offline session") {
		t.Errorf("Verify = %v", err)
	}
}

// TestOfflineNeedsItsSession restarts an in-memory broker, which forgets
// the session: the run fails.
func TestOfflineNeedsItsSession(t *testing.T) {
	cfg := smokeConfig(startBroker(t), 1, 16)
	cfg.Restart = func() (string, error) { return startBroker(t), nil }
	cfg.Duration = 50 * time.Millisecond
	_, err := Run(context.Background(), offlineScenario(), cfg)
	if err == nil || !strings.Contains(err.Error(), "kept no session") {
		t.Errorf("Run after losing the session = %v", err)
	}
}

var (
	durableProfile = flag.Duration("durable-profile", 0,
		"run the durable scenario this long against an in-process broker with a store (TestDurableProfile)")
	durablePayload = flag.Int("durable-payload", 16, "payload size of TestDurableProfile")
	durableWindow  = flag.Int("durable-window", 0, "PUBACK window of TestDurableProfile (0: the scenario's)")
	durablePubs    = flag.Int("durable-publishers", 0, "publishers of TestDurableProfile (0: the scenario's)")
)

// TestDurableProfile runs the durable scenario against an in-process
// broker with a store in a temporary directory and logs the store's
// figures over the measurement window, for profiling the broker (the
// gantry binary serves no profiles):
//
//	go test ./build/bench/load -run DurableProfile -durable-profile 10s -cpuprofile cpu.out
//	go tool pprof -top cpu.out
func TestDurableProfile(t *testing.T) {
	if *durableProfile <= 0 {
		t.Skip("needs -durable-profile")
	}
	b := &durableBroker{t: t, path: filepath.Join(t.TempDir(), "gantry.db")}
	addr, err := b.start()
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	var window []store.Stats // at the start and end of the measurement window
	cfg := Config{Addr: addr, QoS: 1, PayloadSize: *durablePayload, Warmup: time.Second, Duration: *durableProfile,
		Probe: func() (Usage, error) {
			window = append(window, b.st.Stats())
			return Usage{CPU: selfCPU()}, nil
		}}
	sc := profileScenario()
	res, err := Run(context.Background(), sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Verify(sc, 1); err != nil {
		t.Error(err)
	}
	logStore(t, res, window[0], window[1])
}

// profileScenario is the standard durable scenario, with the window and
// publishers of the flags.
func profileScenario() Scenario {
	var sc Scenario
	for _, s := range Standard() {
		if s.Topology == Offline {
			sc = s
		}
	}
	if *durableWindow > 0 {
		sc.Window = *durableWindow
	}
	if *durablePubs > 0 {
		sc.Clients = *durablePubs
	}
	return sc
}

// logStore logs the acknowledged rate and what the store did for it.
func logStore(t *testing.T, res Result, s0, s1 store.Stats) {
	commits, ops := s1.Commits-s0.Commits, s1.Ops-s0.Ops
	el := res.Elapsed.Seconds()
	t.Logf("acked %.0f msg/s, PUBACK p50 %v p99 %v; process CPU %.2f s in %.2f s",
		res.OutRate, res.Latency.Quantile(0.5), res.Latency.Quantile(0.99), res.BrokerCPU.Seconds(), el)
	if commits == 0 {
		t.Fatal("no commits in the window")
	}
	busy := s1.LatencySum - s0.LatencySum
	t.Logf("store: %d commits (%.0f/s), %.1f ops and %.1f KB per commit, mean commit %v (writer busy %.0f%% of the window)",
		commits, float64(commits)/el, float64(ops)/float64(commits), float64(s1.Bytes-s0.Bytes)/float64(commits)/1024,
		busy/time.Duration(commits), 100*busy.Seconds()/el)
}
