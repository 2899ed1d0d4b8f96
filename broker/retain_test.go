package broker_test

import (
	"fmt"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// A retained message is set, replaced and cleared (empty payload); a new
// subscription receives it with the retain flag, while live forwards to
// existing subscribers carry no retain flag.
func TestRetainedLifecycle(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "ret-pub", CleanStart: true, KeepAlive: 30})
	live := watch(t, s, "ret-live", "ret/#")
	live3 := connectV3(t, s.addr, "ret-live3")
	live3.sub(t, "ret/#", 1)

	// fresh subscribes anew and returns what it got within quietPeriod.
	fresh := func(name string) []*paho.Publish {
		c := watch(t, s, "ret-fresh-"+name, "ret/#")
		defer c.close()
		var got []*paho.Publish
		for {
			select {
			case m := <-c.msgs:
				got = append(got, m)
				continue
			case <-time.After(quietPeriod): // bounded wait: all retained messages are sent at once
			}
			return got
		}
	}

	for _, v := range []string{"v1", "v2"} {
		pub.pub(t, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true, Payload: []byte(v)})
		if m := recv(t, live.msgs, "live forward"); m.Retain || string(m.Payload) != v {
			t.Fatalf("live v5 forward %q retain %v, want %q without retain", m.Payload, m.Retain, v)
		}
		if m := recv(t, live3.msgs, "live v3 forward"); m.Retained() || string(m.Payload()) != v {
			t.Fatalf("live v3 forward %q retain %v", m.Payload(), m.Retained())
		}
		got := fresh(v)
		if len(got) != 1 || !got[0].Retain || string(got[0].Payload) != v || got[0].Topic != "ret/a" {
			t.Fatalf("new subscription got %+v, want retained %q", got, v)
		}
		if n := s.RetainedCount(); n != 1 {
			t.Fatalf("RetainedCount %d", n)
		}
	}
	// A retained message on a second topic: both are sent.
	pub.pub(t, &paho.Publish{Topic: "ret/b", QoS: 0, Retain: true, Payload: []byte("b")})
	recv(t, live.msgs, "live forward")
	if got := fresh("two"); len(got) != 2 {
		t.Fatalf("new subscription got %d retained messages, want 2", len(got))
	}
	// A v3 subscriber sees the retain flag too.
	c3 := connectV3(t, s.addr, "ret-fresh3")
	c3.sub(t, "ret/a", 1)
	if m := recv(t, c3.msgs, "retained at v3"); !m.Retained() || string(m.Payload()) != "v2" {
		t.Fatalf("v3 retained %q retain %v", m.Payload(), m.Retained())
	}
	// Clearing: an empty retained payload removes it (and is forwarded).
	pub.pub(t, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true})
	if m := recv(t, live.msgs, "the clearing message"); len(m.Payload) != 0 {
		t.Fatalf("clearing message payload %q", m.Payload)
	}
	got := fresh("cleared")
	if len(got) != 1 || got[0].Topic != "ret/b" {
		t.Fatalf("after clearing ret/a a new subscription got %+v, want only ret/b", got)
	}
	if n := s.RetainedCount(); n != 1 {
		t.Fatalf("RetainedCount %d, want 1", n)
	}
}

// Retain As Published keeps the retain flag of live forwards.
func TestRetainAsPublished(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	c := connectV5(t, s.addr, &paho.Connect{ClientID: "rap", CleanStart: true, KeepAlive: 30})
	c.subWith(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "rap/t", QoS: 1, RetainAsPublished: true}}})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "rap-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "rap/t", QoS: 1, Retain: true, Payload: []byte("r")})
	pub.pub(t, &paho.Publish{Topic: "rap/t", QoS: 1, Payload: []byte("n")})
	if m := recv(t, c.msgs, "retained publish"); !m.Retain {
		t.Fatal("retain flag dropped despite Retain As Published")
	}
	if m := recv(t, c.msgs, "plain publish"); m.Retain {
		t.Fatal("retain flag on a non-retained publish")
	}
}

// Retain Handling 0 sends retained messages on every subscribe, 1 only
// when the subscription is new, 2 never.
func TestRetainHandling(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "rh-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "rh/t", QoS: 1, Retain: true, Payload: []byte("kept")})
	for _, tc := range []struct {
		handling byte
		want     [2]bool // retained sent on the first, the repeated subscribe
	}{{0, [2]bool{true, true}}, {1, [2]bool{true, false}}, {2, [2]bool{false, false}}} {
		c, _ := connectRaw(t, s.addr, v5Connect("rh"))
		for i, want := range tc.want {
			opts := packet.SubOptions{QoS: 1, RetainHandling: tc.handling}
			c.subscribe(uint16(i+1), 0, packet.Subscription{Filter: "rh/t", Options: opts})
			if !want {
				c.expectSilence()
				continue
			}
			m := c.expectPublish()
			if !m.Retain || string(m.Payload) != "kept" {
				t.Fatalf("handling %d: got %q retain %v", tc.handling, m.Payload, m.Retain)
			}
			c.sendPackets(ack(packet.PUBACK, m.PacketID))
		}
		c.nc.Close()
	}
}

// A shared subscription receives no retained messages.
func TestSharedSubscriptionGetsNoRetained(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "shr-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "shr/t", QoS: 1, Retain: true, Payload: []byte("kept")})
	shared := watch(t, s, "shr-shared", "$share/g/shr/t")
	noRecv(t, shared.msgs, "retained message on a shared subscription")
	plain := watch(t, s, "shr-plain", "shr/t")
	if m := recv(t, plain.msgs, "retained message"); !m.Retain {
		t.Fatal("retained message without retain flag")
	}
	// Live messages still reach the shared subscription.
	pub.pub(t, &paho.Publish{Topic: "shr/t", QoS: 1, Payload: []byte("live")})
	if m := recv(t, shared.msgs, "live message"); string(m.Payload) != "live" {
		t.Fatalf("got %q", m.Payload)
	}
}

// A retained message published once the subscriber has its SUBACK
// reaches it once, as a live forward - not a second time as one of the
// retained messages of its new subscription. The many retained messages
// matched by the first filter make the broker's retained lookup last.
func TestRetainedPublishedAfterSubackDeliveredOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxQueuedMessages: 100000})
	in := s.NewClient("rsa-loader", broker.OriginBroker, nil)
	t.Cleanup(in.Close)
	const bulk = 20000
	for i := range bulk {
		if err := in.Publish(fmt.Sprintf("rsa/bulk/%d", i), []byte("b"), 0, true); err != nil {
			t.Fatal(err)
		}
	}
	pub, _ := connectRaw(t, s.addr, v5Connect("rsa-pub"))
	for round := range 3 {
		c, _ := connectRaw(t, s.addr, v5Connect(fmt.Sprintf("rsa-sub-%d", round)))
		tp := fmt.Sprintf("rsa/new%d/t", round)
		c.sendPackets(&packet.Subscribe{PacketID: 1, Subscriptions: []packet.Subscription{
			sub("rsa/bulk/#", 0), sub(fmt.Sprintf("rsa/new%d/#", round), 0), sub("end/rsa", 0)}})
		expectPacket[*packet.Suback](c)
		p := rawPublish(tp, 0, 0, "fresh")
		p.Retain = true
		pub.sendPackets(p, rawPublish("end/rsa", 0, 0, "end"))
		// The bulk retained messages, the new one and the marker, in any
		// interleaving; then nothing (a second copy would follow).
		copies := 0
		for range bulk + 2 {
			if m := c.expectPublish(); string(m.Topic) == tp {
				copies++
			}
		}
		c.expectSilence()
		if copies != 1 {
			t.Fatalf("round %d: %s delivered %d times, want once", round, tp, copies)
		}
		c.nc.Close()
	}
}
