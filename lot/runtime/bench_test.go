package runtime

import (
	"fmt"
	"testing"

	"gantry/broker"
	"gantry/lot/defs"
)

// benchEngine starts an engine on a broker without listeners, with the
// seed rules and the given definitions deployed.
func benchEngine(b *testing.B, puts ...defs.Put) *Engine {
	b.Helper()
	srv, err := broker.New(broker.Options{})
	if err != nil {
		b.Fatal(err)
	}
	store, err := defs.OpenLocal(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Broker: srv, Store: store, Users: newTestUsers(), SeedRules: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		e.Stop()
		srv.Close()
	})
	if len(puts) > 0 {
		if _, err := e.apply(b.Context(), defs.Change{Puts: puts}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// BenchmarkTriggerPath is one client message through the trigger path with
// ten (and a hundred) ON TOPIC actions deployed, one of which matches and
// publishes: cache write, matching, the run, and the flush through the
// broker (which has no subscriber for the result).
func BenchmarkTriggerPath(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("actions=%d", n), func(b *testing.B) { benchTriggerPath(b, n) })
	}
}

func benchTriggerPath(b *testing.B, actions int) {
	var puts []defs.Put
	for i := range actions {
		puts = append(puts, defs.Put{Kind: defs.Action, Name: fmt.Sprintf("Line%d", i), Source: fmt.Sprintf(
			"DEFINE ACTION Line%d\nON TOPIC \"plant/line%d/+/temp\" DO\n    PUBLISH TOPIC \"alerts/\" + TOPIC POSITION 3 WITH PAYLOAD + 1\n", i, i)})
	}
	e := benchEngine(b, puts...)
	if err := e.trig.Unsubscribe("#"); err != nil { // the benchmark delivers by itself
		b.Fatal(err)
	}
	m := &broker.Message{Topic: "plant/line7/m3/temp", Payload: []byte("21.5"), Origin: broker.OriginClient, ClientID: "plc"}
	before := e.stats.Published.Load()
	b.ReportAllocs()
	for b.Loop() {
		e.onMessage(m)
	}
	if got := e.stats.Published.Load() - before; got != uint64(b.N) {
		b.Fatalf("%d publishes for %d messages", got, b.N)
	}
}

// BenchmarkAuthorizePublish is the access decision of one publish by an
// ordinary user under the seed rules, as the broker asks it.
func BenchmarkAuthorizePublish(b *testing.B) {
	e := benchEngine(b)
	a := e.Authorizer()
	info := &broker.ConnInfo{ClientID: "bob-1", Username: "bob"}
	b.ReportAllocs()
	for b.Loop() {
		if !a.CanPublish(info, "plant/line7/m3/temp") {
			b.Fatal("refused")
		}
	}
}
