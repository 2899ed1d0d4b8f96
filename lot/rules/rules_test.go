package rules

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var (
	root    = &User{Name: "root", Admin: true}
	emanuel = &User{Name: "emanuel"}
	bob     = &User{Name: "bob"}
	alice   = &User{Name: "alice", Groups: []string{"operators"}}
	guest   = &User{Name: "guest"}
	cfg     = &User{Name: "carol", Flags: []string{"allowedsystemconfiguration"}}
)

// ifElse builds IF cond THEN then [ELSE els].
func ifElse(name string, prio int, scope Scope, filter string, cond Cond, then, els Effect) Rule {
	return Rule{Name: name, Priority: prio, Scope: scope, TopicFilter: filter, If: &cond, Then: then, Else: els}
}

func mustCompile(t testing.TB, rs ...Rule) *Set {
	t.Helper()
	s, err := Compile(rs, nil)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

type check struct {
	name   string
	req    Request
	allow  bool
	byRule string // deciding rule, "" to skip the check
}

func runChecks(t *testing.T, s *Set, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			d := s.Evaluate(&c.req)
			if d.Allowed != c.allow {
				t.Fatalf("Allowed = %v, want %v (decision %+v)", d.Allowed, c.allow, d)
			}
			if c.byRule != "" && d.Rule != c.byRule {
				t.Fatalf("decided by %q, want %q (decision %+v)", d.Rule, c.byRule, d)
			}
		})
	}
}

// The conformance examples of LOT.md §6.6, each together with the seed rules.
func TestConformanceR1SubscribeRestriction(t *testing.T) {
	s := mustCompile(t, append(Seeds(),
		ifElse("OwnTree", 100, Subscribe, "emanuel/#", UserIs("emanuel"), Allow, Deny))...)
	runChecks(t, s, []check{
		{"emanuel own tree", Request{Scope: Subscribe, Topic: "emanuel/x", User: emanuel}, true, "OwnTree"},
		{"bob in emanuel's tree", Request{Scope: Subscribe, Topic: "emanuel/x", User: bob}, false, "OwnTree"},
		{"bob elsewhere", Request{Scope: Subscribe, Topic: "other/x", User: bob}, true, "AllowSubscribeTopic"},
		{"bob wildcard overlapping", Request{Scope: Subscribe, Topic: "#", User: bob}, false, "OwnTree"},
		{"bob shared in the tree", Request{Scope: Subscribe, Topic: "$share/g/emanuel/+", User: bob}, false, "OwnTree"},
		{"emanuel wildcard wider than the tree", Request{Scope: Subscribe, Topic: "#", User: emanuel}, true, "AllowSubscribeTopic"},
	})
}

func TestConformanceR2PublishDenyByPriority(t *testing.T) {
	cond := Or(UserHas("AllowedSystemConfiguration"), UserIs("root"))
	s := mustCompile(t, append(Seeds(), ifElse("CfgAdminsOnly", 100, Publish, "config/#", cond, Allow, Deny))...)
	runChecks(t, s, []check{
		{"bob denied", Request{Scope: Publish, Topic: "config/a", User: bob}, false, "CfgAdminsOnly"},
		{"root allowed", Request{Scope: Publish, Topic: "config/a", User: root}, true, ""},
		{"root as a plain user name", Request{Scope: Publish, Topic: "config/a", User: &User{Name: "root"}}, true, "CfgAdminsOnly"},
		{"flag holder allowed", Request{Scope: Publish, Topic: "config/a", User: cfg}, true, "CfgAdminsOnly"},
		{"bob outside config", Request{Scope: Publish, Topic: "data/a", User: bob}, true, "AllowPublishTopic"},
		{"anonymous denied", Request{Scope: Publish, Topic: "config", User: nil}, false, "CfgAdminsOnly"},
	})
}

func TestConformanceR3DenyWinsTie(t *testing.T) {
	s := mustCompile(t,
		Rule{Name: "A", Priority: 200, Scope: Publish, TopicFilter: "x/#", Then: Allow},
		ifElse("B", 200, Publish, "x/#", UserIs("bob"), Deny, NoEffect))
	runChecks(t, s, []check{
		{"bob dropped", Request{Scope: Publish, Topic: "x/1", User: bob}, false, "B"},
		{"alice delivered", Request{Scope: Publish, Topic: "x/1", User: alice}, true, "A"},
		{"outside both: nothing matches", Request{Scope: Publish, Topic: "y", User: alice}, false, ""},
	})
}

func TestConformanceR4TopicPosition(t *testing.T) {
	cond := Or(ClientIDIsTopicPosition(2), UserIs("root"))
	s := mustCompile(t, append(Seeds(), ifElse("DevOwn", 200, Publish, "devices/+/#", cond, Allow, Deny))...)
	runChecks(t, s, []check{
		{"own device", Request{Scope: Publish, Topic: "devices/gw1/t", ClientID: "gw1", User: bob}, true, "DevOwn"},
		{"other device", Request{Scope: Publish, Topic: "devices/gw2/t", ClientID: "gw1", User: bob}, false, "DevOwn"},
		{"root anywhere", Request{Scope: Publish, Topic: "devices/gw2/t", ClientID: "x", User: root}, true, ""},
		{"position past the end", Request{Scope: Publish, Topic: "devices", ClientID: "devices", User: bob}, true, "AllowPublishTopic"},
	})
}

func TestConformanceR5ConnectAdmission(t *testing.T) {
	s := mustCompile(t, append(Seeds(),
		ifElse("OnlyGateways", 100, Connect, "", ClientIDMatchesRegex(`^gw[0-9]+$`), Allow, Deny))...)
	runChecks(t, s, []check{
		{"gateway", Request{Scope: Connect, ClientID: "gw42", User: bob}, true, "OnlyGateways"},
		{"laptop", Request{Scope: Connect, ClientID: "laptop", User: bob}, false, "OnlyGateways"},
		{"root with any id", Request{Scope: Connect, ClientID: "laptop", User: root}, true, ""},
	})
}

func TestConformanceR6ManagementScope(t *testing.T) {
	rs := append(Builtins(), ifElse("NoGuestActions", 100, ActionManagementCreation, "", UserIs("guest"), Deny, Allow),
		ifElse("GuestCalls", 100, CommandCall, "", UserIs("guest"), Allow, NoEffect))
	s := mustCompile(t, rs...)
	runChecks(t, s, []check{
		{"guest may call", Request{Scope: CommandCall, Topic: CommandTopic, User: guest}, true, "GuestCalls"},
		{"guest may not add actions", Request{Scope: ActionManagementCreation, User: guest}, false, "NoGuestActions"},
		{"bob may add actions", Request{Scope: ActionManagementCreation, User: bob}, true, "NoGuestActions"},
		{"bob may not call commands", Request{Scope: CommandCall, User: bob}, false, ""},
		{"flag holder may call", Request{Scope: CommandCall, User: cfg}, true, "BuiltinCommandCall"},
	})
}

func TestEvaluateOrder(t *testing.T) {
	s := mustCompile(t,
		Rule{Name: "Late", Priority: 500, Scope: Publish, Then: Allow},
		ifElse("NoElse", 100, Publish, "", UserIs("bob"), Deny, NoEffect),
		ifElse("Ops", 300, Publish, "", UserInGroup("operators"), Deny, NoEffect),
		ifElse("Exists", 50, Publish, "gate/#", TopicExists("gate/open"), Allow, NoEffect),
		ifElse("Value", 60, Publish, "gate/#", TopicIs("gate/mode", "locked"), Deny, NoEffect),
		ifElse("NotAlice", 400, Subscribe, "", Not(UserIs("alice")), Allow, Deny),
		ifElse("Both", 70, Publish, "both", And(UserIs("bob"), ClientIDIs("c1")), Allow, Deny),
	)
	open := mapState{"gate/open": "1"}
	locked := mapState{"gate/mode": "locked"}
	runChecks(t, s, []check{
		{"condition false without ELSE falls through", Request{Scope: Publish, Topic: "t", User: alice}, false, "Ops"},
		{"no group: next priority", Request{Scope: Publish, Topic: "t", User: guest}, true, "Late"},
		{"condition true decides", Request{Scope: Publish, Topic: "t", User: bob}, false, "NoElse"},
		{"TOPIC EXISTS with state", Request{Scope: Publish, Topic: "gate/1", User: bob, State: open}, true, "Exists"},
		{"TOPIC EXISTS without state", Request{Scope: Publish, Topic: "gate/1", User: guest}, true, "Late"},
		{"GET TOPIC IS", Request{Scope: Publish, Topic: "gate/1", User: guest, State: locked}, false, "Value"},
		{"NOT", Request{Scope: Subscribe, Topic: "a", User: alice}, false, "NotAlice"},
		{"AND true", Request{Scope: Publish, Topic: "both", User: bob, ClientID: "c1"}, true, "Both"},
		{"AND false", Request{Scope: Publish, Topic: "both", User: bob, ClientID: "c2"}, false, "Both"},
		{"scope without rules", Request{Scope: Connect, User: alice}, false, ""},
		{"invalid scope", Request{Scope: 0, User: alice}, false, ""},
	})
}

func TestSubscribeCoversAndOverlaps(t *testing.T) {
	s := mustCompile(t,
		Rule{Name: "DenyAll", Priority: 500, Scope: Subscribe, TopicFilter: "#", Then: Deny},
		Rule{Name: "AllowX", Priority: 100, Scope: Subscribe, TopicFilter: "x/#", Then: Allow},
		Rule{Name: "DenySecret", Priority: 50, Scope: Subscribe, TopicFilter: "x/secret/#", Then: Deny},
	)
	runChecks(t, s, []check{
		{"inside the allowed tree", Request{Scope: Subscribe, Topic: "x/a/+", User: bob}, true, "AllowX"},
		{"the tree's root", Request{Scope: Subscribe, Topic: "x", User: bob}, true, "AllowX"},
		{"wider than the allowed tree", Request{Scope: Subscribe, Topic: "#", User: bob}, false, "DenySecret"},
		{"sibling wildcard", Request{Scope: Subscribe, Topic: "+/a", User: bob}, false, "DenyAll"},
		{"overlapping the secret", Request{Scope: Subscribe, Topic: "x/+/k", User: bob}, false, "DenySecret"},
	})
}

func TestEngineSwap(t *testing.T) {
	var e Engine
	req := &Request{Scope: Connect, User: bob}
	if e.Allowed(req) {
		t.Fatal("zero Engine allowed a request")
	}
	if !e.Allowed(&Request{Scope: Connect, User: root}) {
		t.Fatal("zero Engine denied the administrator")
	}
	if err := e.Load(Seeds(), nil); err != nil {
		t.Fatal(err)
	}
	if !e.Allowed(req) {
		t.Fatal("seeds loaded but connect denied")
	}
	bad := []Rule{{Name: "X", Scope: Connect, Then: Allow, TopicFilter: "a"}}
	if err := e.Load(bad, nil); err == nil {
		t.Fatal("Load accepted an invalid rule")
	}
	if !e.Allowed(req) || e.Set().Len() != 3 {
		t.Fatal("a failed Load replaced the rules")
	}
	if prev := e.Swap(nil); prev.Len() != 3 || e.Allowed(req) {
		t.Fatal("Swap(nil) did not install an empty set")
	}
}

func TestCompileErrors(t *testing.T) {
	c := UserIs("x")
	tests := []struct {
		name  string
		rules []Rule
		opts  *Options
		want  string
	}{
		{"no name", []Rule{{Scope: Connect, Then: Allow}}, nil, "has no name"},
		{"duplicate", []Rule{{Name: "A", Scope: Connect, Then: Allow}, {Name: "A", Scope: Connect, Then: Deny}}, nil, `"A" is defined twice`},
		{"no scope", []Rule{{Name: "A", Then: Allow}}, nil, "not a known scope"},
		{"negative priority", []Rule{{Name: "A", Priority: -1, Scope: Connect, Then: Allow}}, nil, "PRIORITY -1"},
		{"reserved band", []Rule{{Name: "A", Priority: 5, Scope: Connect, Then: Allow}}, &Options{ReservedBelow: 100}, "PRIORITY 5 is reserved for built-in rules (0..99), use 100 or more"},
		{"topic on connect", []Rule{{Name: "A", Scope: Connect, TopicFilter: "a", Then: Allow}}, nil, "TO TOPIC applies to"},
		{"bad filter", []Rule{{Name: "A", Scope: Publish, TopicFilter: "a/#/b", Then: Allow}}, nil, `TO TOPIC "a/#/b"`},
		{"no effect", []Rule{{Name: "A", Scope: Publish}}, nil, "ALLOW or DENY"},
		{"else without if", []Rule{{Name: "A", Scope: Publish, Then: Allow, Else: Deny}}, nil, "ELSE needs an IF"},
		{"bad regex", []Rule{{Name: "A", Scope: Connect, If: ptr(ClientIDMatchesRegex("(")), Then: Allow}}, nil, `REGEX "("`},
		{"position zero", []Rule{{Name: "A", Scope: Publish, If: ptr(ClientIDIsTopicPosition(0)), Then: Allow}}, nil, "TOPIC POSITION 0"},
		{"position on connect", []Rule{{Name: "A", Scope: Connect, If: ptr(ClientIDIsTopicPosition(1)), Then: Allow}}, nil, "needs a topic scope"},
		{"not arity", []Rule{{Name: "A", Scope: Connect, If: &Cond{Op: OpNot}, Then: Allow}}, nil, "NOT takes one"},
		{"and arity", []Rule{{Name: "A", Scope: Connect, If: ptr(And(c)), Then: Allow}}, nil, "AND takes two"},
		{"unknown op", []Rule{{Name: "A", Scope: Connect, If: &Cond{Op: 99}, Then: Allow}}, nil, "unknown condition"},
		{"bad state topic", []Rule{{Name: "A", Scope: Connect, If: ptr(TopicExists("a/#")), Then: Allow}}, nil, `TOPIC EXISTS "a/#"`},
		{"too many", []Rule{{Name: "A", Scope: Connect, Then: Allow}, {Name: "B", Scope: Connect, Then: Allow}}, &Options{MaxRules: 1}, "MaxRules = 1"},
		{"bad options", nil, &Options{ReservedBelow: -1}, "ReservedBelow = -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.rules, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want it to contain %q", err, tc.want)
			}
			if tc.opts == nil || tc.opts.ReservedBelow >= 0 {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
			}
		})
	}
}

func TestBuiltinsCompileInReservedBand(t *testing.T) {
	if _, err := Compile(append(Builtins(), Seeds()...), &Options{ReservedBelow: 100}); err != nil {
		t.Fatal(err)
	}
	s := mustCompile(t, Builtins()...)
	um := &User{Name: "u", Flags: []string{FlagUserManagement}}
	runChecks(t, s, []check{
		{"stats for all", Request{Scope: SubscribeSys, Topic: "$SYS/broker/uptime", User: bob}, true, "BuiltinSysStatistics"},
		{"output for user managers", Request{Scope: SubscribeSys, Topic: "$SYS/Coreflux/Command/Output", User: um}, true, "BuiltinSysCommandOutput"},
		{"output not for others", Request{Scope: SubscribeSys, Topic: "$SYS/Coreflux/Command/Output", User: bob}, false, ""},
		{"no wider $SYS for user managers", Request{Scope: SubscribeSys, Topic: "$SYS/Coreflux/#", User: um}, false, ""},
		{"no $SYS publish", Request{Scope: PublishSys, Topic: "$SYS/x", User: cfg}, false, ""},
		{"user management by flag", Request{Scope: UserManagementCreation, User: um}, true, "BuiltinUserManagementCreation"},
		{"actions by system flag", Request{Scope: ActionManagementRemove, User: cfg}, true, "BuiltinActionManagementRemove"},
	})
}

func TestScopes(t *testing.T) {
	for _, sc := range Scopes() {
		got, err := ParseScope(strings.ToLower(sc.String()))
		if err != nil || got != sc {
			t.Errorf("ParseScope(%q) = %v, %v", sc.String(), got, err)
		}
	}
	if got, err := ParseScope("ConnectorManagementCreation"); err != nil || got != RouteManagementCreation {
		t.Errorf("connector alias: %v, %v", got, err)
	}
	if _, err := ParseScope("Publsh"); err == nil || !strings.Contains(err.Error(), `"Publsh"`) {
		t.Errorf("ParseScope(Publsh) error = %v", err)
	}
	tests := []struct {
		name   string
		got    Scope
		expect Scope
	}{
		{"command topic", PublishScope("$SYS/Coreflux/Command"), CommandCall},
		{"command output publish", PublishScope("$SYS/Coreflux/Command/Output"), PublishSys},
		{"plain publish", PublishScope("a/b"), Publish},
		{"sys subscribe", SubscribeScope("$SYS/#"), SubscribeSys},
		{"shared sys subscribe", SubscribeScope("$share/g/$SYS/x"), SubscribeSys},
		{"wildcard subscribe", SubscribeScope("#"), Subscribe},
	}
	for _, tc := range tests {
		if tc.got != tc.expect {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.expect)
		}
	}
}

func ptr[T any](v T) *T { return &v }

type mapState map[string]string

func (m mapState) Lookup(topic string) ([]byte, bool) {
	v, ok := m[topic]
	return []byte(v), ok
}

// TestOpenScope: a scope whose lowest priority allows every topic without
// condition is decided at once, and only then: a lower DENY, a DENY at the
// same priority, or a '$' topic go through the rules.
func TestOpenScope(t *testing.T) {
	seeds := Seeds()
	deny := Rule{Name: "NoSecrets", Priority: 5, Scope: Publish, TopicFilter: "secret/#", Then: Deny}
	tie := Rule{Name: "TieDeny", Priority: SeedPriority, Scope: Publish, TopicFilter: "x/#", Then: Deny}
	tests := []struct {
		name  string
		rules []Rule
		topic string
		want  bool
		rule  string
	}{
		{"seeds only", seeds, "plant/a", true, "AllowPublishTopic"},
		{"lower deny applies", append(slices.Clone(seeds), deny), "secret/a", false, "NoSecrets"},
		{"lower deny elsewhere", append(slices.Clone(seeds), deny), "plant/a", true, "AllowPublishTopic"},
		{"deny at the same priority wins", append(slices.Clone(seeds), tie), "x/1", false, "TieDeny"},
		{"'$' topic is not covered by '#'", seeds, "$weird", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Compile(tt.rules, nil)
			if err != nil {
				t.Fatal(err)
			}
			d := set.Evaluate(&Request{Scope: Publish, Topic: tt.topic})
			if d.Allowed != tt.want || d.Rule != tt.rule {
				t.Errorf("Evaluate(%q) = %+v, want allowed %v by %q", tt.topic, d, tt.want, tt.rule)
			}
			// Only the seeds alone open the scope: any lower or tying
			// rule that can deny closes it.
			if open := tt.name == "seeds only"; set.Open(Publish, tt.topic) != open {
				t.Errorf("Open(%q) = %v, want %v", tt.topic, !open, open)
			}
		})
	}
}
