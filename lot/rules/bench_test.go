package rules

import (
	"fmt"
	"testing"
)

// benchRules is a plausible gateway rule set: the built-ins, the seeds and
// n per-line rules on Publish and Subscribe with conditions.
func benchRules(n int) []Rule {
	rs := append(Builtins(), Seeds()...)
	for i := range n {
		line := fmt.Sprintf("factory/line%d/#", i)
		rs = append(rs,
			ifElse(fmt.Sprintf("PubLine%d", i), 100+i, Publish, line,
				Or(UserInGroup(fmt.Sprintf("line%d", i)), UserHas("AllowedSystemConfiguration")), Allow, Deny),
			ifElse(fmt.Sprintf("SubLine%d", i), 100+i, Subscribe, line,
				UserIs(fmt.Sprintf("op%d", i)), Allow, NoEffect))
	}
	rs = append(rs,
		ifElse("DevOwn", 200, Publish, "devices/+/#", ClientIDIsTopicPosition(2), Allow, Deny),
		ifElse("Gateways", 100, Connect, "", ClientIDMatchesRegex(`^gw[0-9]+$`), Allow, NoEffect))
	return rs
}

var evalCases = []struct {
	name string
	req  Request
}{
	{"publish/seed", Request{Scope: Publish, Topic: "plant/hall2/energy", ClientID: "c1", User: &User{Name: "bob", Groups: []string{"line3"}}}},
	{"publish/line-rule", Request{Scope: Publish, Topic: "factory/line3/press/temp", ClientID: "c1", User: &User{Name: "bob", Groups: []string{"line3"}}}},
	{"publish/topic-position", Request{Scope: Publish, Topic: "devices/gw7/t", ClientID: "gw7", User: &User{Name: "bob"}}},
	{"subscribe/wildcard", Request{Scope: Subscribe, Topic: "factory/line3/+/temp", User: &User{Name: "op3"}}},
	{"connect/regex", Request{Scope: Connect, ClientID: "gw42", User: &User{Name: "bob"}}},
	{"admin", Request{Scope: Publish, Topic: "factory/line3/x", User: &User{Name: "root", Admin: true}}},
}

func BenchmarkEvaluate(b *testing.B) {
	for _, n := range []int{10, 100} {
		var e Engine
		if err := e.Load(benchRules(n), nil); err != nil {
			b.Fatal(err)
		}
		for _, c := range evalCases {
			b.Run(fmt.Sprintf("rules=%d/%s", e.Set().Len(), c.name), func(b *testing.B) {
				req := c.req
				b.ReportAllocs()
				for b.Loop() {
					e.Evaluate(&req)
				}
			})
		}
	}
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	var e Engine
	if err := e.Load(benchRules(20), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range evalCases {
		req := c.req
		e.Evaluate(&req) // warm regexp's machine pool
		if n := testing.AllocsPerRun(200, func() { e.Evaluate(&req) }); n != 0 {
			t.Errorf("%s: %v allocations per Evaluate, want 0", c.name, n)
		}
	}
}

// BenchmarkEvaluateSeedsOnly is a broker without user rules: the seed
// rules open Publish, so a publish is decided at once (Set.open).
func BenchmarkEvaluateSeedsOnly(b *testing.B) {
	set, err := Compile(append(Builtins(), Seeds()...), nil)
	if err != nil {
		b.Fatal(err)
	}
	r := &Request{Scope: Publish, Topic: "plant/line1/temp", User: &User{Name: "op"}}
	b.ReportAllocs()
	for b.Loop() {
		if !set.Evaluate(r).Allowed {
			b.Fatal("denied")
		}
	}
}
