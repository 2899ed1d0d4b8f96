package broker_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// aliased is a raw PUBLISH with a topic alias (topic may be empty).
func aliased(topic string, alias uint16, pid uint16, payload string) *packet.Publish {
	p := rawPublish(topic, 1, pid, payload)
	p.Props.TopicAlias = alias
	p.Props.Set(packet.PropTopicAlias)
	return p
}

// Inbound topic aliases: a PUBLISH with topic and alias sets the alias,
// one with the alias only uses it; subscribers see the full topic.
func TestTopicAliasInbound(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{TopicAliasMaximum: 5})
	w := watch(t, s, "tai-watch", "tai/#")
	c, ack := connectRaw(t, s.addr, v5Connect("tai"))
	if ack.Props.TopicAliasMaximum != 5 {
		t.Fatalf("CONNACK Topic Alias Maximum %d, want 5", ack.Props.TopicAliasMaximum)
	}
	steps := []struct {
		pub  *packet.Publish
		want string
	}{
		{aliased("tai/one", 1, 1, "a"), "tai/one"},
		{aliased("", 1, 2, "b"), "tai/one"},
		{aliased("tai/two", 5, 3, "c"), "tai/two"},
		{aliased("", 5, 4, "d"), "tai/two"},
		{aliased("tai/three", 1, 5, "e"), "tai/three"}, // remapped
		{aliased("", 1, 6, "f"), "tai/three"},
		{rawPublish("tai/plain", 1, 7, "g"), "tai/plain"},
		{aliased("", 5, 8, "h"), "tai/two"},
	}
	for _, st := range steps {
		c.sendPackets(st.pub)
		c.expectAck(packet.PUBACK)
		m := recv(t, w.msgs, st.want)
		if m.Topic != st.want || string(m.Payload) != string(st.pub.Payload) {
			t.Fatalf("subscriber got %s %q, want %s %q", m.Topic, m.Payload, st.want, st.pub.Payload)
		}
		if m.Properties.TopicAlias != nil {
			t.Fatalf("inbound alias leaked to the subscriber: %d", *m.Properties.TopicAlias)
		}
	}
}

// A topic alias of 0, above the advertised maximum, or any alias when the
// maximum is 0, is refused with DISCONNECT 0x94; an unknown alias with an
// empty topic is a protocol error.
func TestTopicAliasInvalid(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{TopicAliasMaximum: 3})
	none := startServer(t, broker.Options{})
	for _, tc := range []struct {
		name string
		srv  *testServer
		pub  *packet.Publish
		want packet.ReasonCode
	}{
		{"above maximum", s, aliased("tx/a", 4, 1, "x"), packet.TopicAliasInvalid},
		{"zero", s, aliased("tx/a", 0, 1, "x"), packet.TopicAliasInvalid},
		{"maximum 0", none, aliased("tx/a", 1, 1, "x"), packet.TopicAliasInvalid},
		{"unknown alias", s, aliased("", 2, 1, "x"), packet.ProtocolError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := connectRaw(t, tc.srv.addr, v5Connect("tx"))
			c.sendPackets(tc.pub)
			c.expectDisconnect(tc.want)
		})
	}
}

// Outbound aliases: with Topic Alias Maximum 2 the client gets the topic
// and an alias the first time, then the alias with an empty topic; a
// third topic goes without alias.
func TestTopicAliasOutbound(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("tao")
	cp.Props.TopicAliasMaximum = 2
	cp.Props.Set(packet.PropTopicAliasMaximum)
	c, _ := connectRaw(t, s.addr, cp)
	c.subscribe(1, 0, sub("tao/#", 0))
	// A v5 client without Topic Alias Maximum gets plain topics.
	plain, _ := connectRaw(t, s.addr, v5Connect("tao-plain"))
	plain.subscribe(1, 0, sub("tao/#", 0))

	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "tao-pub", CleanStart: true, KeepAlive: 30})
	order := []string{"tao/a", "tao/a", "tao/b", "tao/c", "tao/b", "tao/c", "tao/a"}
	for _, tp := range order {
		pub.pub(t, &paho.Publish{Topic: tp, QoS: 1, Payload: []byte(tp)})
	}
	aliases := map[uint16]string{}
	for i, tp := range order {
		m := c.expectPublish()
		if string(m.Payload) != tp {
			t.Fatalf("delivery %d: payload %q, want %q", i, m.Payload, tp)
		}
		hasAlias := m.Props.IsSet(packet.PropTopicAlias)
		switch {
		case hasAlias && (m.Props.TopicAlias == 0 || m.Props.TopicAlias > 2):
			t.Fatalf("delivery %d: alias %d beyond the client's maximum 2", i, m.Props.TopicAlias)
		case hasAlias && len(m.Topic) > 0:
			aliases[m.Props.TopicAlias] = string(m.Topic)
		case hasAlias:
			if aliases[m.Props.TopicAlias] != tp {
				t.Fatalf("delivery %d: alias %d means %q, want %q", i, m.Props.TopicAlias, aliases[m.Props.TopicAlias], tp)
			}
		case string(m.Topic) != tp:
			t.Fatalf("delivery %d: topic %q, want %q", i, m.Topic, tp)
		}
		// The second and later deliveries of tao/a and tao/b use the alias only.
		repeat := slices.Index(order, tp) < i
		if tp != "tao/c" && repeat && (!hasAlias || len(m.Topic) != 0) {
			t.Fatalf("delivery %d of %s: topic %q alias %v, want the alias alone", i, tp, m.Topic, hasAlias)
		}
		if tp == "tao/c" && (hasAlias || string(m.Topic) != tp) {
			t.Fatalf("delivery %d of tao/c: topic %q alias %v, want the topic (aliases exhausted)", i, m.Topic, hasAlias)
		}
	}
	for _, tp := range order {
		m := plain.expectPublish()
		if string(m.Topic) != tp || m.Props.IsSet(packet.PropTopicAlias) {
			t.Fatalf("plain client got topic %q alias %v", m.Topic, m.Props.IsSet(packet.PropTopicAlias))
		}
	}
}

// Response Topic, Correlation Data, User Properties (order and repeated
// keys), Payload Format Indicator and Content Type reach the subscriber
// unchanged; a request/response round trip works on them.
func TestPropertiesPassThrough(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	responder := connectV5(t, s.addr, &paho.Connect{ClientID: "resp", CleanStart: true, KeepAlive: 30})
	responder.sub(t, "svc/request", 1)
	requester := connectV5(t, s.addr, &paho.Connect{ClientID: "req", CleanStart: true, KeepAlive: 30})
	requester.sub(t, "svc/reply/req", 1)

	user := paho.UserProperties{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "a", Value: "3"}, {Key: "ünï", Value: ""}}
	corr := []byte{0, 1, 2, 0xFF}
	for qos := byte(0); qos <= 2; qos++ {
		requester.pub(t, &paho.Publish{Topic: "svc/request", QoS: qos, Payload: []byte(`{"q":1}`),
			Properties: &paho.PublishProperties{
				ResponseTopic:   "svc/reply/req",
				CorrelationData: corr,
				User:            user,
				PayloadFormat:   paho.Byte(1),
				ContentType:     "application/json",
			}})
		req := recv(t, responder.msgs, "request")
		p := req.Properties
		switch {
		case p == nil:
			t.Fatal("request arrived without properties")
		case p.ResponseTopic != "svc/reply/req" || !bytes.Equal(p.CorrelationData, corr):
			t.Fatalf("response topic %q correlation %x", p.ResponseTopic, p.CorrelationData)
		case !slices.Equal(p.User, user):
			t.Fatalf("user properties %v, want %v", p.User, user)
		case p.PayloadFormat == nil || *p.PayloadFormat != 1 || p.ContentType != "application/json":
			t.Fatalf("payload format %v content type %q", p.PayloadFormat, p.ContentType)
		}
		responder.pub(t, &paho.Publish{Topic: p.ResponseTopic, QoS: 1, Payload: fmt.Appendf(nil, "answer %d", qos),
			Properties: &paho.PublishProperties{CorrelationData: p.CorrelationData}})
		resp := recv(t, requester.msgs, "response")
		if !bytes.Equal(resp.Properties.CorrelationData, corr) || string(resp.Payload) != fmt.Sprintf("answer %d", qos) {
			t.Fatalf("response %q correlation %x", resp.Payload, resp.Properties.CorrelationData)
		}
		if resp.Properties.ContentType != "" || resp.Properties.PayloadFormat != nil || len(resp.Properties.User) != 0 {
			t.Fatalf("response carries properties it was not sent with: %+v", resp.Properties)
		}
	}
}
