package runtime

import (
	"fmt"
	"runtime"
	"testing"

	"gantry/broker"
	"gantry/lot/defs"
)

// thresholdAction is the action of the benchmark: it reads the
// payload as a number, compares it and publishes.
const thresholdAction = `DEFINE ACTION Alarm ON TOPIC "sensors/+/temp" DO
    IF PAYLOAD AS DOUBLE > 30 THEN
        PUBLISH TOPIC "alarms/" + TOPIC POSITION 2 WITH PAYLOAD`

// BenchmarkPublishPathWithAction publishes messages that trigger the
// threshold action (and a publish of its own), each once LoT has run the
// action for the one before: per message, routing, the hand-off to the
// trigger goroutine, the action and its publish.
// Compare with action=none, the same messages routed without LoT; the
// difference is what the action adds to a message (the bound:
// 5 us).
func BenchmarkPublishPathWithAction(b *testing.B) {
	for _, withAction := range []bool{false, true} {
		name := "action=none"
		var puts []defs.Put
		if withAction {
			name = "action=threshold"
			puts = []defs.Put{{Kind: defs.Action, Name: "Alarm", Source: thresholdAction}}
		}
		b.Run(name, func(b *testing.B) {
			e := benchEngine(b, puts...)
			pub := e.o.Broker.NewClient("bench-pub", broker.OriginClient, nil)
			defer pub.Close()
			payload := []byte("31.5")
			b.ReportAllocs()
			done := e.stats.Published.Load()
			for b.Loop() {
				if err := pub.Publish("sensors/s1/temp", payload, 0, false); err != nil {
					b.Fatal(err)
				}
				if withAction {
					// One message at a time, each until its run ended (on
					// the trigger goroutine): nothing is queued or dropped,
					// and the hand-off is counted.
					done++ // the action publishes when its run ends
					for e.stats.Published.Load() < done {
						runtime.Gosched()
					}
				}
			}
		})
	}
}

// BenchmarkRouteWithManyActions routes a message that no filter matches,
// with none and with 1,000 ON TOPIC actions on distinct filters deployed:
// the issue wants both within 20%.
func BenchmarkRouteWithManyActions(b *testing.B) {
	for _, count := range []int{0, 1000} {
		b.Run(fmt.Sprintf("actions=%d", count), func(b *testing.B) {
			var puts []defs.Put
			for i := range count {
				name := fmt.Sprintf("A%d", i)
				puts = append(puts, defs.Put{Kind: defs.Action, Name: name, Source: fmt.Sprintf(
					"DEFINE ACTION %s ON TOPIC \"plant/line%d/+/temp\" DO PUBLISH TOPIC \"out/%d\" WITH PAYLOAD", name, i, i)})
			}
			e := benchEngine(b, puts...)
			pub := e.o.Broker.NewClient("bench-pub", broker.OriginClient, nil)
			defer pub.Close()
			payload := []byte("21.5")
			b.ReportAllocs()
			for b.Loop() {
				if err := pub.Publish("office/floor1/temp", payload, 0, false); err != nil {
					b.Fatal(err)
				}
			}
			if got := e.stats.Runs.Load(); got != 0 {
				b.Fatalf("%d actions ran for a topic no filter matches", got)
			}
		})
	}
}
