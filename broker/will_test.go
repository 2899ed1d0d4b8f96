package broker_test

import (
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// willConnect is a raw v5 CONNECT with a will on topic, with the given
// will delay and session expiry (seconds, 0 = none).
func willConnect(id, topic string, delay, expiry uint32) packet.Connect {
	cp := v5Connect(id)
	cp.WillFlag, cp.WillQoS, cp.WillTopic, cp.WillPayload = true, 1, topic, []byte("gone:"+id)
	if delay > 0 {
		cp.WillProps.WillDelay = delay
		cp.WillProps.Set(packet.PropWillDelay)
	}
	if expiry > 0 {
		cp.Props.SessionExpiry = expiry
		cp.Props.Set(packet.PropSessionExpiry)
	}
	return cp
}

// watch connects a v5 client subscribed to filter.
func watch(t *testing.T, s *testServer, id, filter string) *v5Client {
	t.Helper()
	w := connectV5(t, s.addr, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	w.sub(t, filter, 1)
	return w
}

// The will is published when the connection ends abnormally or with
// DISCONNECT 0x04, not with a normal DISCONNECT 0x00.
func TestWillOnDisconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "will-watch", "will/#")
	for _, tc := range []struct {
		name string
		end  func(c *rawClient)
		want bool
	}{
		{"normal disconnect 0x00", func(c *rawClient) { c.sendPackets(&packet.Disconnect{}) }, false},
		{"disconnect with will 0x04", func(c *rawClient) {
			c.sendPackets(&packet.Disconnect{ReasonCode: packet.DisconnectWithWill})
		}, true},
		{"socket closed", func(c *rawClient) { c.nc.Close() }, true},
		{"protocol violation", func(c *rawClient) { c.send([]byte{0x10, 0}) }, true}, // second CONNECT
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "will/" + tc.name
			c, _ := connectRaw(t, s.addr, willConnect("will-v5", topic, 0, 0))
			tc.end(c)
			if !tc.want {
				noRecv(t, w.msgs, "will after a normal disconnect")
				return
			}
			m := recv(t, w.msgs, "the will")
			if m.Topic != topic || string(m.Payload) != "gone:will-v5" || m.QoS != 1 {
				t.Fatalf("will %s %q QoS %d", m.Topic, m.Payload, m.QoS)
			}
		})
	}
}

func TestWillV311(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "will3-watch", "will3/#")
	withWill := func(topic string) func(*mqtt.ClientOptions) {
		return func(o *mqtt.ClientOptions) { o.SetWill(topic, "bye", 1, true) }
	}
	// A clean DISCONNECT discards the will.
	c := connectV3(t, s.addr, "w3a", withWill("will3/a"))
	c.Disconnect(50)
	noRecv(t, w.msgs, "will after DISCONNECT")
	// A broken connection publishes it, retained as asked.
	c = connectV3(t, s.addr, "w3b", withWill("will3/b"))
	c.breakConn()
	if m := recv(t, w.msgs, "the will"); m.Topic != "will3/b" || string(m.Payload) != "bye" {
		t.Fatalf("will %s %q", m.Topic, m.Payload)
	}
	late := watch(t, s, "will3-late", "will3/b")
	if m := recv(t, late.msgs, "the retained will"); !m.Retain || string(m.Payload) != "bye" {
		t.Fatalf("retained will %+v", m)
	}
}

// The will waits for its Will Delay Interval; a reconnect within the
// delay cancels it.
func TestWillDelay(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "wd-watch", "wd/#")

	c, _ := connectRaw(t, s.addr, willConnect("wd-late", "wd/late", 1, 30))
	c.nc.Close()
	start := time.Now()
	m := recv(t, w.msgs, "the delayed will")
	if e := time.Since(start); e < 900*time.Millisecond {
		t.Fatalf("will published after %v, before its 1 s delay", e)
	}
	if m.Topic != "wd/late" {
		t.Fatalf("will topic %s", m.Topic)
	}

	cp := willConnect("wd-back", "wd/back", 1, 30)
	c, _ = connectRaw(t, s.addr, cp)
	c.nc.Close()
	cp.CleanStart = false
	c, _ = connectRaw(t, s.addr, cp)
	// Bounded wait past the 1 s delay: the will must not come.
	select {
	case m := <-w.msgs:
		t.Fatalf("will %s published although the client came back", m.Topic)
	case <-time.After(1500 * time.Millisecond):
	}
	c.sendPackets(&packet.Disconnect{})
	c.expectClosed(waitTimeout)
}

// A will delay longer than the session expiry: the will is published
// when the session ends.
func TestWillDelayLongerThanSessionExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "wde-watch", "wde/#")
	c, _ := connectRaw(t, s.addr, willConnect("wde", "wde/t", 60, 1))
	c.nc.Close()
	start := time.Now()
	recv(t, w.msgs, "the will at session end")
	if e := time.Since(start); e < 900*time.Millisecond || e > 4*time.Second {
		t.Fatalf("will published after %v, want about 1 s (session expiry)", e)
	}
	sessionCount(t, s, 1, waitTimeout)
}

// The will carries its properties (v5) to the subscribers; its Message
// Expiry counts from when it is published.
func TestWillProperties(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	w := watch(t, s, "wp-watch", "wp/#")
	cp := willConnect("wp", "wp/t", 0, 0)
	cp.WillProps.ContentType = "text/plain"
	cp.WillProps.ResponseTopic = "wp/reply"
	cp.WillProps.CorrelationData = []byte{7}
	cp.WillProps.UserProperties = []packet.UserProperty{{Key: "k", Value: "v"}}
	cp.WillProps.PayloadFormat = 1
	cp.WillProps.MessageExpiry = 30
	cp.WillProps.Set(packet.PropPayloadFormat)
	cp.WillProps.Set(packet.PropMessageExpiry)
	c, _ := connectRaw(t, s.addr, cp)
	c.nc.Close()
	m := recv(t, w.msgs, "the will")
	p := m.Properties
	switch {
	case p.ContentType != "text/plain" || p.ResponseTopic != "wp/reply" || string(p.CorrelationData) != "\x07":
		t.Fatalf("will properties %+v", p)
	case len(p.User) != 1 || p.User[0].Key != "k" || p.User[0].Value != "v":
		t.Fatalf("will user properties %v", p.User)
	case p.PayloadFormat == nil || *p.PayloadFormat != 1:
		t.Fatalf("will payload format %v", p.PayloadFormat)
	case p.MessageExpiry == nil || *p.MessageExpiry < 29 || *p.MessageExpiry > 30:
		t.Fatalf("will message expiry %v, want 30", p.MessageExpiry)
	}
}
