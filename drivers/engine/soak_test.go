//go:build soak

package engine

// The soak test and the throughput benchmark of the connectors, against
// the same local peers as the other tests (make soak-drivers, make
// bench-drivers). Not part of make test.

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// protocolCase deploys one connector of n tags polled every `every` on a
// peer the case starts; load, when set, makes traffic (the bridge).
type protocolCase struct {
	name   string
	deploy func(t *testing.T, nd *node, tags int, every string) (connector string, load func(stop <-chan struct{}))
}

func mappingOf(every string, tags func(i int) string, count int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    ADD MAPPING M\n        WITH EVERY %s\n        WITH SOURCE_TOPIC \"soak\"\n", every)
	for i := range count {
		b.WriteString(tags(i))
	}
	return b.String()
}

var protocolCases = []protocolCase{
	{"MODBUS_TCP", func(t *testing.T, nd *node, tags int, every string) (string, func(<-chan struct{})) {
		p := newPLC(t)
		nd.deployAdd(modbusSource("MBTCP", p, "", mappingOf(every, func(i int) string {
			return tag(fmt.Sprintf("t%d", i), fmt.Sprintf(`ADDRESS "%d"`, i%100), `DATA_TYPE "UINT16"`, fmt.Sprintf(`SOURCE_TOPIC "soak/mbtcp/%d"`, i))
		}, tags)))
		// The device restarts every 20 s: reconnects must not leak.
		return "MBTCP", func(stop <-chan struct{}) {
			tick := time.NewTicker(20 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					p.stop()
					p.start()
				}
			}
		}
	}},
	{"MODBUS_SERIAL", func(t *testing.T, nd *node, tags int, every string) (string, func(<-chan struct{})) {
		line := newSerialLine(t)
		startSlave(t, line.srv, 0)
		nd.deployAdd(rtuSource("MBRTU", line.cli, mappingOf(every, func(i int) string {
			return tag(fmt.Sprintf("t%d", i), fmt.Sprintf(`ADDRESS "%d"`, i%100), `DATA_TYPE "UINT16"`, fmt.Sprintf(`SOURCE_TOPIC "soak/mbrtu/%d"`, i))
		}, tags)))
		return "MBRTU", nil
	}},
	{"SIEMENS_S7", func(t *testing.T, nd *node, tags int, every string) (string, func(<-chan struct{})) {
		s := newSnap7(t)
		nd.deployAdd(s7Source("S7", s, mappingOf(every, func(i int) string {
			return tag(fmt.Sprintf("t%d", i), fmt.Sprintf(`ADDRESS "DB1.DBW%d"`, 2*(i%128)), fmt.Sprintf(`SOURCE_TOPIC "soak/s7/%d"`, i))
		}, tags)))
		return "S7", nil
	}},
	{"OPCUA", func(t *testing.T, nd *node, tags int, every string) (string, func(<-chan struct{})) {
		s := newOPCUAServer(t)
		nodes := []string{"Counter", "I16", "U16", "I32", "U32", "F32", "F64"}
		nd.deployAdd(opcuaSource("UA", s, "        WITH SUBSCRIBE false\n", mappingOf(every, func(i int) string {
			return tag(fmt.Sprintf("t%d", i), fmt.Sprintf(`NODE_ID "ns=1;s=%s"`, nodes[i%len(nodes)]), `DATA_TYPE "FLOAT64"`,
				fmt.Sprintf(`SOURCE_TOPIC "soak/ua/%d"`, i))
		}, tags)))
		return "UA", nil
	}},
	{"MQTT_BRIDGE", func(t *testing.T, nd *node, tags int, every string) (string, func(<-chan struct{})) {
		r := newRemoteBroker(t)
		nd.deployAdd(strings.Replace(bridgeSource(r, "    ADD MAPPING all\n        WITH SOURCE_TOPIC \"bridge/#\"\n        WITH DESTINATION_TOPIC \"edge/#\"\n"),
			"ToCloud", "BR", 1))
		d, _ := time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(every, " MILLISECONDS", "ms"), " ", ""))
		return "BR", func(stop <-chan struct{}) {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					for i := range tags {
						nd.cli.Publish(fmt.Sprintf("bridge/t%d", i), []byte("42"), 0, false)
					}
				}
			}
		}
	}},
}

type usage struct {
	goroutines, fds int
	heap            uint64
}

func measure() usage {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fds, _ := os.ReadDir("/proc/self/fd")
	return usage{runtime.NumGoroutine(), len(fds), m.HeapAlloc}
}

func (u usage) String() string {
	return fmt.Sprintf("goroutines %d, fds %d, heap %.1f MiB", u.goroutines, u.fds, float64(u.heap)/(1<<20))
}

// TestSoak: 50 tags at 100 ms on each protocol at once for SOAK_DURATION
// (10m), the Modbus TCP device restarting every 20 s; goroutines, file
// descriptors and heap stay flat.
func TestSoak(t *testing.T) {
	dur := 10 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	}
	nd := newNode(t)
	nd.mu.Lock()
	nd.noHistory = true
	nd.mu.Unlock()
	stop := make(chan struct{})
	var names []string
	for _, pc := range protocolCases {
		name, load := pc.deploy(t, nd, 50, "100 MILLISECONDS")
		names = append(names, name)
		if load != nil {
			go load(stop)
		}
	}
	defer close(stop)
	warm := min(30*time.Second, dur/4)
	time.Sleep(warm) // soak: let every connector reach its steady state (not a wait for a condition)
	base := measure()
	t.Logf("after %v: %v", warm, base)
	start := time.Now()
	var peak usage
	for time.Since(start) < dur-warm {
		time.Sleep(min(30*time.Second, dur/10)) // sampling interval
		u := measure()
		peak.goroutines, peak.fds, peak.heap = max(peak.goroutines, u.goroutines), max(peak.fds, u.fds), max(peak.heap, u.heap)
		var b strings.Builder
		for _, s := range nd.m.Snapshots() {
			fmt.Fprintf(&b, " %s:%s reads=%d sent=%d failures=%d", s.Name, s.Connection, s.Reads, s.Sent, s.Failures)
		}
		t.Logf("%6.0fs %v |%s", time.Since(start).Seconds(), u, b.String())
	}
	end := measure()
	t.Logf("end: %v (start %v, peak goroutines %d fds %d heap %.1f MiB)", end, base, peak.goroutines, peak.fds, float64(peak.heap)/(1<<20))
	if end.goroutines > base.goroutines+10 || end.fds > base.fds+10 || end.heap > base.heap+32<<20 {
		t.Errorf("leak: start %v, end %v", base, end)
	}
	for _, s := range nd.m.Snapshots() {
		if s.Reads == 0 && s.Sent == 0 {
			t.Errorf("%s did nothing: %+v", s.Name, s)
		}
	}
	_ = names
}

// TestBenchTags prints tags per second per protocol: 100 tags polled as
// fast as the connector can (EVERY 10 MILLISECONDS) for BENCH_DURATION
// (10s) against the local peers; the bridge counts messages sent.
func TestBenchTags(t *testing.T) {
	dur := 10 * time.Second
	if s := os.Getenv("BENCH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	}
	var lines []string
	for _, pc := range protocolCases {
		t.Run(pc.name, func(t *testing.T) {
			nd := newNode(t)
			name, load := pc.deploy(t, nd, 100, "10 MILLISECONDS")
			stop := make(chan struct{})
			if load != nil && pc.name == "MQTT_BRIDGE" {
				go load(stop)
			}
			defer close(stop)
			eventually(t, 30*time.Second, func() error {
				if s := nd.status(name); s.Reads == 0 && s.Sent == 0 {
					return fmt.Errorf("%s not yet reading: %+v", name, s)
				}
				return nil
			})
			snap := func() Snapshot {
				for _, s := range nd.m.Snapshots() {
					if s.Name == name {
						return s
					}
				}
				return Snapshot{}
			}
			a := snap()
			time.Sleep(dur) // the measured interval
			b := snap()
			sec := dur.Seconds()
			line := fmt.Sprintf("%-14s %9.0f tags/s %7.1f polls/s  last poll %6.2f ms",
				pc.name, float64(b.Reads-a.Reads+b.Sent-a.Sent)/sec, float64(b.Polls-a.Polls)/sec, b.PollSeconds*1000)
			lines = append(lines, line)
			t.Log(line)
		})
	}
	fmt.Println("\nconnector throughput, 100 tags, EVERY 10 MILLISECONDS, " + dur.String() + " each:")
	for _, l := range lines {
		fmt.Println(l)
	}
}
