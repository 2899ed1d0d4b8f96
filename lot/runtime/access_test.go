package runtime

import (
	"context"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// TestNarrowDenyFiltersWildcards: a DENY on one topic refuses only the
// subscriptions wholly inside it; "#", "test/+" and "+/nosubscribe" are
// granted and do not receive the denied topic, live or retained. A rule
// change re-decides subscriptions already made.
func TestNarrowDenyFiltersWildcards(t *testing.T) {
	h := newHarness(t)
	h.mustCommand(`-addRule DEFINE RULE NoSub WITH PRIORITY 100 FOR Subscribe TO TOPIC "test/nosubscribe" DENY`)
	h.root.publishRetained(t, "test/nosubscribe", "retained-secret")
	h.root.publishRetained(t, "test/open", "retained-open")

	bob := h.connect("bob", "bob-acl")
	wantCodes(t, "bob subscribes", bob.subscribe(t, "#", "test/+", "+/nosubscribe", "test/nosubscribe"), 0, 0, 0, 0x87)
	if got := bob.await(t, "test/open"); got != "retained-open" {
		t.Errorf("retained test/open: %q", got)
	}
	h.root.publish(t, "test/nosubscribe", "live-secret", 1)
	h.root.publish(t, "test/open", "live-open", 1)
	h.settle(bob)
	if got := bob.on("test/nosubscribe"); len(got) != 0 {
		t.Errorf("bob received the denied topic: %q", got)
	}
	if got := bob.on("test/open"); len(got) < 3 { // retained via # and test/+, then live at least once
		t.Errorf("test/open: %q, want the retained and the live message", got)
	}

	// The rule goes: the same subscriptions now read the topic.
	h.mustCommand("-removeRule NoSub")
	h.root.publish(t, "test/nosubscribe", "after-removal", 1)
	h.settle(bob)
	if got := bob.on("test/nosubscribe"); len(got) == 0 || got[0] != "after-removal" {
		t.Errorf("after -removeRule: %q, want after-removal", got)
	}

	// A new rule narrows a subscription granted whole before.
	bob.subscribe(t, "other/#")
	h.mustCommand(`-addRule DEFINE RULE Hidden WITH PRIORITY 100 FOR Subscribe TO TOPIC "other/hidden" IF USER IS "bob" THEN DENY`)
	h.root.publish(t, "other/hidden", "hidden", 1)
	h.root.publish(t, "other/x", "visible", 1)
	h.settle(bob)
	if got := bob.on("other/hidden"); len(got) != 0 {
		t.Errorf("bob received other/hidden after the rule was added: %q", got)
	}
	if got := bob.on("other/x"); len(got) == 0 {
		t.Error("bob lost other/x")
	}
	// alice is not concerned by the rule.
	alice := h.connect("alice", "alice-acl")
	wantCodes(t, "alice subscribes", alice.subscribe(t, "other/#"), 0)
	h.root.publish(t, "other/hidden", "for-alice", 1)
	h.settle(alice)
	if got := alice.on("other/hidden"); len(got) != 1 {
		t.Errorf("alice on other/hidden: %q", got)
	}
}

// publishRetained publishes a retained QoS 1 message.
func (c *client) publishRetained(t testing.TB, topic, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1, Retain: true}); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}
