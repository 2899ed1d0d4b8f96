package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"gantry/build/bench/load"
)

func TestSpliceSectionKeepsTheRestOfTheDocument(t *testing.T) {
	first := spliceSection("", "one\n")
	if !strings.HasPrefix(first, "# Benchmarks\n") || !strings.Contains(first, "one\n"+endMarker) {
		t.Fatalf("new document:\n%s", first)
	}
	doc := "# Benchmarks\n\nIntro.\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## Micro\n\nKept.\n"
	got := spliceSection(doc, "new\n")
	want := "# Benchmarks\n\nIntro.\n\n" + beginMarker + "\nnew\n" + endMarker + "\n\n## Micro\n\nKept.\n"
	if got != want {
		t.Errorf("splice:\n%s\nwant:\n%s", got, want)
	}
	appended := spliceSection("# Other\n", "x\n")
	if !strings.HasPrefix(appended, "# Other\n\n"+beginMarker) {
		t.Errorf("append:\n%s", appended)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"1": {1}, "0-2": {0, 1, 2}, "0,3-4": {0, 3, 4}} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) accepted", bad)
		}
	}
}

func TestQuickKeepsExplicitFlags(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-rounds", "3", "-scenarios", "fanin,latency", "-qos", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 3 || o.duration != time.Second || !slices.Equal(o.scenarios, []string{"fanin", "latency"}) {
		t.Errorf("options = rounds %d duration %v scenarios %v", o.rounds, o.duration, o.scenarios)
	}
	if got := o.command(); got != "go run ./build/bench -quick -rounds 3 -scenarios fanin,latency -qos 1" {
		t.Errorf("command = %q", got)
	}
	for _, bad := range [][]string{{"-scenarios", "nope"}, {"-qos", "2"}, {"-payloads", "8"}, {"-brokers", "emqx"}} {
		if _, err := parseOptions(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestReportMarksFailuresAndRatios(t *testing.T) {
	o, err := parseOptions([]string{"-scenarios", "fanin", "-qos", "1", "-payloads", "16", "-modes", "pinned", "-sink=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{opts: o, modes: []mode{{name: pinnedMode, brokerCPUs: "0", loadCPUs: []int{1}}}}
	v := h.variants()[0]
	res := func(out float64) load.Result {
		return load.Result{OutRate: out, InRate: out, Elapsed: time.Second, BrokerCPU: time.Second, Latency: new(load.Histogram)}
	}
	h.outcomes = []outcome{
		{mode: pinnedMode, v: v, broker: gantryKind, round: 1, res: res(300000)},
		{mode: pinnedMode, v: v, broker: mosquittoKind, round: 1, res: res(100000)},
	}
	if rep := h.report(); rep.failed || !strings.Contains(rep.text, "3.00×") || !strings.Contains(rep.text, "300,000") {
		t.Errorf("report:\n%s", rep.text)
	}
	h.outcomes = append(h.outcomes, outcome{mode: pinnedMode, v: v, broker: mosquittoKind, round: 2,
		err: errors.New("5 of 9 messages lost at QoS 1")})
	rep := h.report()
	if !rep.failed || !strings.Contains(rep.text, "FAIL: 5 of 9 messages lost") {
		t.Errorf("failed report:\n%s", rep.text)
	}
}

func TestMosquittoConfMatchesGantryLimits(t *testing.T) {
	c := mosquittoConf(1999, 0, queueLimit, "")
	for _, want := range []string{"listener 1999 127.0.0.1", "allow_anonymous true", "persistence false",
		"max_queued_messages 10000", "max_inflight_messages 0"} {
		if !strings.Contains(c, want+"\n") {
			t.Errorf("configuration lacks %q:\n%s", want, c)
		}
	}
}

func TestReportStatesTheDurableAim(t *testing.T) {
	o, err := parseOptions([]string{"-scenarios", "durable", "-payloads", "16", "-modes", "pinned", "-brokers", "gantry"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{opts: o, modes: []mode{{name: pinnedMode, brokerCPUs: "0", loadCPUs: []int{1}}}}
	vs := h.variants()
	if len(vs) != 1 || vs[0].qos != 1 || closedLoop(vs[0]) {
		t.Fatalf("variants = %+v", vs)
	}
	if bs := h.brokersFor(vs[0]); !slices.Equal(bs, []string{gantryDurableKind, gantryMemoryKind}) {
		t.Fatalf("brokersFor = %v", bs)
	}
	res := func(acked float64) load.Result {
		return load.Result{OutRate: acked, Acked: 1000, Received: 1000, Elapsed: time.Second, BrokerCPU: time.Second, Latency: new(load.Histogram)}
	}
	for _, c := range []struct {
		durable float64
		want    string
	}{{45000, "0.45× (met)"}, {15000, "0.15× (NOT met)"}} {
		h.outcomes = []outcome{
			{mode: pinnedMode, v: vs[0], broker: gantryDurableKind, round: 1, res: res(c.durable)},
			{mode: pinnedMode, v: vs[0], broker: gantryMemoryKind, round: 1, res: res(100000)},
		}
		rep := h.report()
		if rep.failed || !strings.Contains(rep.text, "| gantry, durable ") || !strings.Contains(rep.text, c.want) {
			t.Errorf("report, want %q:\n%s", c.want, rep.text)
		}
	}
}
