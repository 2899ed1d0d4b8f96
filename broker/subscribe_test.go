package broker_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// Wildcards: '+' one level, '#' the level and all below, '$' topics
// hidden from filters starting with a wildcard. One client per filter
// receives exactly the topics its filter matches; a final marker every
// client subscribes to proves nothing more is on its way.
func TestTopicMatching(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	matches := map[string][]string{
		"sport/+":         {"sport/tennis", "sport/"},
		"sport/#":         {"sport", "sport/tennis", "sport/tennis/player1", "sport/"},
		"#":               {"sport", "sport/tennis", "sport/tennis/player1", "sport/", "/finance"},
		"+":               {"sport"},
		"+/+":             {"sport/tennis", "sport/", "/finance"},
		"/+":              {"/finance"},
		"sport/+/player1": {"sport/tennis/player1"},
		"+/tennis/#":      {"sport/tennis", "sport/tennis/player1"},
		"$SYS/#":          {"$SYS/monitor", "$SYS"},
		"$SYS/+":          {"$SYS/monitor"},
		"+/monitor":       nil,
		"sport/tennis":    {"sport/tennis"},
	}
	topics := []string{"sport", "sport/tennis", "sport/tennis/player1", "sport/", "/finance", "$SYS/monitor", "$SYS"}
	clients := map[string]*rawClient{}
	for f := range matches {
		c, _ := connectRaw(t, s.addr, v5Connect("match "+f))
		sa := c.subscribe(1, 0, sub(f, 1), sub("marker/end", 1))
		if !slices.Equal(sa.ReasonCodes, []packet.ReasonCode{1, 1}) {
			t.Fatalf("SUBACK for %q: %v", f, sa.ReasonCodes)
		}
		clients[f] = c
	}
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "match-pub", CleanStart: true, KeepAlive: 30})
	for _, tp := range append(topics, "marker/end") {
		pub.pub(t, &paho.Publish{Topic: tp, QoS: 1, Payload: []byte(tp)})
	}
	for f, c := range clients {
		var got []string
		for {
			m := c.expectPublish()
			c.sendPackets(ack(packet.PUBACK, m.PacketID))
			if string(m.Topic) == "marker/end" {
				break
			}
			got = append(got, string(m.Topic))
		}
		if want := matches[f]; !slices.Equal(got, want) {
			t.Errorf("filter %q received %q, want %q", f, got, want)
		}
	}
}

// Invalid filters get 0x8F (v3: 0x80) in their SUBACK slot; the valid
// ones of the same SUBSCRIBE are granted.
func TestInvalidFilters(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	bad := []string{"a/#/b", "a+", "a/b#", "#/a", "+a/b", "$share/g", "$share//a", "$share/g+/a", "$share/g/a/#/b"}
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c, _ := connectRaw(t, s.addr, packet.Connect{Version: v, CleanStart: true, KeepAlive: 30, ClientID: "badf"})
			subs := []packet.Subscription{sub("ok/+", 1)}
			for _, f := range bad {
				subs = append(subs, sub(f, 1))
			}
			sa := c.subscribe(3, 0, subs...)
			wantBad := packet.TopicFilterInvalid
			if v != packet.V5 {
				wantBad = packet.UnspecifiedError // v3 failure 0x80
			}
			if sa.ReasonCodes[0] != packet.GrantedQoS1 {
				t.Fatalf("valid filter: %v", sa.ReasonCodes[0])
			}
			for i, f := range bad {
				if rc := sa.ReasonCodes[i+1]; rc != wantBad {
					t.Errorf("filter %q: %v, want %v", f, rc, wantBad)
				}
			}
			// The connection is still usable.
			c.sendPackets(rawPublish("ok/x", 1, 9, "p"))
			var got []packet.Type // PUBACK and the PUBLISH, in either order
			for range 2 {
				p, err := c.read(waitTimeout)
				if err != nil {
					t.Fatal(err)
				}
				switch p := p.(type) {
				case *packet.Publish:
					got = append(got, packet.PUBLISH)
				case *packet.Ack:
					got = append(got, p.Type)
				}
			}
			if !slices.Contains(got, packet.PUBLISH) || !slices.Contains(got, packet.PUBACK) {
				t.Fatalf("got %v, want PUBACK and PUBLISH", got)
			}
		})
	}
}

// A PUBLISH whose topic holds a wildcard (or is empty without an alias)
// closes the connection, v5 with DISCONNECT 0x90.
func TestPublishInvalidTopic(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "badt-watch", "#")
	for _, tp := range []string{"a/+", "a/#", "+", "#", ""} {
		for _, v := range []packet.Version{packet.V5, packet.V311} {
			t.Run(fmt.Sprintf("v%d %q", v, tp), func(t *testing.T) {
				c, _ := connectRaw(t, s.addr, packet.Connect{Version: v, CleanStart: true, KeepAlive: 30, ClientID: "badt"})
				c.sendPackets(rawPublish(tp, 1, 1, "x"))
				d := c.expectClosed(waitTimeout)
				if v == packet.V5 && (d == nil || d.ReasonCode != packet.TopicNameInvalid && !(tp == "" && d.ReasonCode == packet.ProtocolError)) {
					t.Fatalf("DISCONNECT %+v, want 0x90", d)
				}
			})
		}
	}
	noRecv(t, w.msgs, "a message with an invalid topic")
}

// No Local: a client does not receive its own publishes on that
// subscription, but does receive other clients' ones.
func TestNoLocal(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	a := connectV5(t, s.addr, &paho.Connect{ClientID: "nl-a", CleanStart: true, KeepAlive: 30})
	a.subWith(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: "nl/local", QoS: 1, NoLocal: true},
		{Topic: "nl/plain", QoS: 1},
	}}, 1, 1)
	b := connectV5(t, s.addr, &paho.Connect{ClientID: "nl-b", CleanStart: true, KeepAlive: 30})
	a.pub(t, &paho.Publish{Topic: "nl/local", QoS: 1, Payload: []byte("own")})
	a.pub(t, &paho.Publish{Topic: "nl/plain", QoS: 1, Payload: []byte("own plain")})
	if m := recv(t, a.msgs, "own message without No Local"); m.Topic != "nl/plain" {
		t.Fatalf("got own message on %s", m.Topic)
	}
	b.pub(t, &paho.Publish{Topic: "nl/local", QoS: 1, Payload: []byte("other")})
	if m := recv(t, a.msgs, "another client's message"); string(m.Payload) != "other" {
		t.Fatalf("got %q", m.Payload)
	}
	noRecv(t, a.msgs, "own message")
}

// Subscription identifiers come back with the messages; two overlapping
// subscriptions of one client with different identifiers give one
// delivery carrying both identifiers, at the higher QoS.
func TestSubscriptionIdentifiers(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	p := connectV5(t, s.addr, &paho.Connect{ClientID: "sid-paho", CleanStart: true, KeepAlive: 30})
	id := 42
	p.subWith(t, &paho.Subscribe{Properties: &paho.SubscribeProperties{SubscriptionIdentifier: &id},
		Subscriptions: []paho.SubscribeOptions{{Topic: "psid/paho", QoS: 1}}})

	c, _ := connectRaw(t, s.addr, v5Connect("sid-raw"))
	c.subscribe(1, 7, sub("sid/+", 0))
	c.subscribe(2, 9, sub("sid/#", 1))
	c.subscribe(3, 0, sub("sid/x", 2)) // a third overlap, without identifier

	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "sid-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "psid/paho", QoS: 1, Payload: []byte("1")})
	m := recv(t, p.msgs, "message with identifier")
	if m.Properties.SubscriptionIdentifier == nil || *m.Properties.SubscriptionIdentifier != 42 {
		t.Fatalf("subscription identifier %v, want 42", m.Properties.SubscriptionIdentifier)
	}
	for _, tc := range []struct {
		topic string
		qos   byte
		ids   []uint32
	}{
		{"sid/a", 1, []uint32{7, 9}},
		{"sid/x", 2, []uint32{7, 9}},
		{"sid/a/b", 1, []uint32{9}},
	} {
		pub.pub(t, &paho.Publish{Topic: tc.topic, QoS: 2, Payload: []byte("p")})
		m := c.expectPublish()
		ids := slices.Clone(m.Props.SubscriptionIDs)
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		if string(m.Topic) != tc.topic || m.QoS != tc.qos || !slices.Equal(ids, tc.ids) {
			t.Fatalf("got %s QoS %d ids %v, want %s QoS %d ids %v", m.Topic, m.QoS, ids, tc.topic, tc.qos, tc.ids)
		}
		if m.QoS == 2 {
			c.sendPackets(ack(packet.PUBREC, m.PacketID))
			c.expectAck(packet.PUBREL)
			c.sendPackets(ack(packet.PUBCOMP, m.PacketID))
		} else {
			c.sendPackets(ack(packet.PUBACK, m.PacketID))
		}
	}
	c.expectSilence() // one delivery per message
}

// Shared subscriptions: each message goes to exactly one member of a
// group, round robin; every group gets every message; a plain subscriber
// of the same filter too.
func TestSharedSubscriptions(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	group := func(name string, n int) []*v5Client {
		var cs []*v5Client
		for i := range n {
			c := connectV5(t, s.addr, &paho.Connect{ClientID: fmt.Sprintf("sh-%s-%d", name, i), CleanStart: true, KeepAlive: 30})
			c.sub(t, "$share/"+name+"/sh/+", 1)
			cs = append(cs, c)
		}
		return cs
	}
	g, h := group("g", 3), group("h", 2)
	plain := watch(t, s, "sh-plain", "sh/+")
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "sh-pub", CleanStart: true, KeepAlive: 30})
	const n = 30
	for i := range n {
		pub.pub(t, &paho.Publish{Topic: "sh/t", QoS: 1, Payload: fmt.Appendf(nil, "%d", i)})
	}
	for name, members := range map[string][]*v5Client{"g": g, "h": h} {
		counts := make([]int, len(members))
		seen := map[string]int{}
		take := func() int {
			total := 0
			for i, c := range members {
				for len(c.msgs) > 0 {
					seen[string((<-c.msgs).Payload)]++
					counts[i]++
				}
				total += counts[i]
			}
			return total
		}
		eventually(t, waitTimeout, func() error {
			if got := take(); got < n {
				return fmt.Errorf("group %s received %d of %d messages", name, got, n)
			}
			return nil
		})
		<-time.After(quietPeriod) // bounded wait: no extra copies may follow
		if got := take(); got != n {
			t.Errorf("group %s received %d deliveries of %d messages", name, got, n)
		}
		even := n / len(members)
		for i, got := range counts {
			if got < even/2 || got > even*3/2 {
				t.Errorf("group %s: member %d got %d of %d messages, not round robin (%v)", name, i, got, n, counts)
			}
		}
		for i := range n {
			if c := seen[fmt.Sprint(i)]; c != 1 {
				t.Errorf("group %s: message %d delivered %d times", name, i, c)
			}
		}
	}
	for range n {
		recv(t, plain.msgs, "message at the plain subscriber")
	}
}
