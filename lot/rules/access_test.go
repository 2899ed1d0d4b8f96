package rules

import (
	"testing"

	"gantry/broker/topic"
)

func TestSubscriptionAccess(t *testing.T) {
	noSub := Rule{Name: "NoSub", Priority: 100, Scope: Subscribe, TopicFilter: "test/nosubscribe", Then: Deny}
	own := ifElse("OwnTree", 100, Subscribe, "emanuel/#", UserIs("emanuel"), Allow, Deny)
	dev := ifElse("DevOwn", 200, Subscribe, "devices/+/#", ClientIDIsTopicPosition(2), Allow, Deny)
	devDeny := ifElse("DevHide", 200, Subscribe, "hidden/+/#", ClientIDIsTopicPosition(2), Deny, NoEffect)
	s := mustCompile(t, append(Seeds(), noSub, own, dev, devDeny)...)
	for _, c := range []struct {
		filter, client string
		user           *User
		want           Access
	}{
		{"#", "c", bob, Checked},
		{"test/+", "c", bob, Checked},
		{"+/nosubscribe", "c", bob, Checked},
		{"test/nosubscribe", "c", bob, Refused},
		{"$share/g/test/nosubscribe", "c", bob, Refused},
		{"test/other", "c", bob, Granted},
		{"other/#", "c", bob, Granted},
		{"#", "c", root, Granted},
		{"emanuel/#", "c", bob, Refused},
		{"emanuel/#", "c", emanuel, Granted},
		{"emanuel/+/x", "c", bob, Refused},
		{"devices/gw1/#", "gw1", bob, Granted},
		{"devices/gw2/#", "gw1", bob, Refused},
		{"devices/+/t", "gw1", bob, Checked},
		{"devices/#", "gw1", bob, Checked},
		{"hidden/gw1/x", "gw1", bob, Refused},
		{"hidden/+/x", "gw1", bob, Checked}, // the level may be gw1: not granted whole
		{"hidden/gw2/x", "gw1", bob, Granted},
	} {
		got := s.Subscription(&Request{Scope: SubscribeScope(c.filter), Topic: c.filter, ClientID: c.client, User: c.user})
		if got != c.want {
			t.Errorf("%s by %s/%s: %v, want %v", c.filter, c.client, c.user.Name, got, c.want)
		}
	}
}

// Granted and Refused are promises about every topic of the filter:
// checked against Evaluate on each topic of a sample.
func TestSubscriptionAgreesWithTopics(t *testing.T) {
	s := mustCompile(t, append(Seeds(),
		Rule{Name: "D1", Priority: 100, Scope: Subscribe, TopicFilter: "a/b/#", Then: Deny},
		Rule{Name: "A1", Priority: 50, Scope: Subscribe, TopicFilter: "a/b/c", Then: Allow},
		Rule{Name: "D2", Priority: 300, Scope: Subscribe, TopicFilter: "+/x", Then: Deny},
		ifElse("P", 150, Subscribe, "d/+/#", ClientIDIsTopicPosition(2), Allow, NoEffect),
		Rule{Name: "D3", Priority: 160, Scope: Subscribe, TopicFilter: "d/#", Then: Deny},
	)...)
	topics := []string{"a", "a/b", "a/b/c", "a/b/d", "a/x", "b/x", "x", "d/me", "d/me/t", "d/you/t", "d", "a/b/c/d"}
	filters := []string{"#", "+", "+/#", "a/#", "a/b/#", "a/b/+", "a/b/c", "+/x", "a/+", "d/#", "d/me/#", "d/+/t", "d/you/#", "+/+/+"}
	for _, f := range filters {
		acc := s.Subscription(&Request{Scope: Subscribe, Topic: f, ClientID: "me", User: bob})
		var allowed, denied int
		for _, tp := range topics {
			if !topic.Matches(f, tp) {
				continue
			}
			if s.Evaluate(&Request{Scope: Subscribe, Topic: tp, ClientID: "me", User: bob}).Allowed {
				allowed++
			} else {
				denied++
			}
		}
		switch {
		case acc == Granted && denied > 0, acc == Refused && allowed > 0:
			t.Errorf("%s: %v, but %d topics allowed and %d denied", f, acc, allowed, denied)
		}
	}
}

func TestSubscriptionDoesNotAllocate(t *testing.T) {
	s := mustCompile(t, append(Seeds(), Rule{Name: "NoSub", Priority: 100, Scope: Subscribe, TopicFilter: "test/nosubscribe", Then: Deny})...)
	r := &Request{Scope: Subscribe, Topic: "#", User: bob}
	if n := testing.AllocsPerRun(100, func() { s.Subscription(r) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
