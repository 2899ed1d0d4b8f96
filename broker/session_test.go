package broker_test

import (
	"fmt"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// sessionCount waits until the server holds want sessions.
func sessionCount(t testing.TB, s *testServer, want int, within time.Duration) {
	t.Helper()
	eventually(t, within, func() error {
		if n := s.SessionCount(); n != want {
			return fmt.Errorf("%d sessions, want %d", n, want)
		}
		return nil
	})
}

// A v5 session with expiry 2 s keeps its subscription and its queued QoS
// 1 messages across a reconnect within the interval, and is gone, not
// before 2 s, once the interval passed offline.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "se-pub", CleanStart: true, KeepAlive: 30})
	cp := &paho.Connect{ClientID: "se", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(2)}}
	c := connectV5(t, s.addr, cp)
	c.sub(t, "se/t", 1)
	c.close()
	pub.pub(t, &paho.Publish{Topic: "se/t", QoS: 1, Payload: []byte("queued")})

	cp.CleanStart = false
	c = connectV5(t, s.addr, cp)
	if !c.connack.SessionPresent {
		t.Fatal("session not present within its expiry")
	}
	if m := recv(t, c.msgs, "the queued message"); string(m.Payload) != "queued" {
		t.Fatalf("payload %q", m.Payload)
	}
	pub.pub(t, &paho.Publish{Topic: "se/t", QoS: 1, Payload: []byte("live")})
	if m := recv(t, c.msgs, "a message on the kept subscription"); string(m.Payload) != "live" {
		t.Fatalf("payload %q", m.Payload)
	}
	c.close()
	closed := time.Now()
	pub.pub(t, &paho.Publish{Topic: "se/t", QoS: 1, Payload: []byte("lost")})
	sessionCount(t, s, 1, 5*time.Second) // only the publisher's
	if e := time.Since(closed); e < 1900*time.Millisecond {
		t.Fatalf("session ended %v after the disconnect, want 2 s", e)
	}
	c = connectV5(t, s.addr, cp)
	if c.connack.SessionPresent {
		t.Fatal("session present after its expiry")
	}
	noRecv(t, c.msgs, "a message of the expired session")
	pub.pub(t, &paho.Publish{Topic: "se/t", QoS: 1, Payload: []byte("x")})
	noRecv(t, c.msgs, "a message on the expired subscription")
}

// Session Expiry 0 (and v3.1.1 clean session 1): the session ends with
// the connection, and QoS 1 messages are not kept for it.
func TestSessionExpiryZero(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "sz-pub", CleanStart: true, KeepAlive: 30})
	cp := &paho.Connect{ClientID: "sz", CleanStart: true, KeepAlive: 30}
	c := connectV5(t, s.addr, cp)
	c.sub(t, "sz/t", 1)
	c.close()
	sessionCount(t, s, 1, waitTimeout)
	pub.pub(t, &paho.Publish{Topic: "sz/t", QoS: 1, Payload: []byte("x")})
	cp.CleanStart = false
	c = connectV5(t, s.addr, cp)
	if c.connack.SessionPresent {
		t.Fatal("session present after expiry 0")
	}
	noRecv(t, c.msgs, "a message for the ended session")
}

// The Session Expiry Interval sent in DISCONNECT replaces the CONNECT's;
// changing it from 0 to non-zero is a protocol error.
func TestSessionExpiryChangedInDisconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	for _, tc := range []struct {
		name       string
		connect    uint32
		disconnect uint32
		present    bool // right after the disconnect
		endsWithin time.Duration
		wantDisc   packet.ReasonCode // server DISCONNECT, 0: none
	}{
		{"60 to 0 ends at disconnect", 60, 0, false, 0, 0},
		{"60 to 1 ends after 1 s", 60, 1, true, 3 * time.Second, 0},
		{"0 to 60 is a protocol error", 0, 60, false, 0, packet.ProtocolError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := v5Connect("sed")
			cp.Props.SessionExpiry = tc.connect
			cp.Props.Set(packet.PropSessionExpiry)
			c, _ := connectRaw(t, s.addr, cp)
			c.subscribe(1, 0, sub("sed/t", 1))
			d := &packet.Disconnect{}
			d.Props.SessionExpiry = tc.disconnect
			d.Props.Set(packet.PropSessionExpiry)
			c.sendPackets(d)
			if got := c.expectClosed(waitTimeout); tc.wantDisc != 0 && (got == nil || got.ReasonCode != tc.wantDisc) {
				t.Fatalf("server DISCONNECT %+v, want %v", got, tc.wantDisc)
			} else if tc.wantDisc == 0 && got != nil {
				t.Fatalf("server DISCONNECT %+v", got)
			}
			if tc.present {
				cp.CleanStart = false
				c, ack := connectRaw(t, s.addr, cp)
				if !ack.SessionPresent {
					t.Fatal("session not present")
				}
				c.sendPackets(d) // disconnect again with the same expiry
				c.expectClosed(waitTimeout)
			}
			sessionCount(t, s, 0, max(tc.endsWithin, waitTimeout))
			cp.CleanStart = false
			cp.Props.SessionExpiry = 0
			c, ack := connectRaw(t, s.addr, cp)
			if ack.SessionPresent {
				t.Fatal("session present after it should have ended")
			}
			c.sendPackets(&packet.Disconnect{})
			c.expectClosed(waitTimeout)
			sessionCount(t, s, 0, waitTimeout)
		})
	}
}

// A queued message whose expiry passes while its session is offline is
// dropped; one that is still valid arrives with the time it has left.
func TestMessageExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := &paho.Connect{ClientID: "mx", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(60)}}
	c := connectV5(t, s.addr, cp)
	c.sub(t, "mx/#", 1)
	c.close()
	// Offline before the publishes: a message sent to a connection that is
	// still closing is in flight, and goes again on reconnect expired or not.
	eventually(t, waitTimeout, func() error {
		if n := s.Stats().Connections.Load(); n != 0 {
			return fmt.Errorf("%d connections still open", n)
		}
		return nil
	})
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "mx-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "mx/short", QoS: 1, Payload: []byte("s"),
		Properties: &paho.PublishProperties{MessageExpiry: u32(1)}})
	pub.pub(t, &paho.Publish{Topic: "mx/long", QoS: 1, Payload: []byte("l"),
		Properties: &paho.PublishProperties{MessageExpiry: u32(10)}})
	pub.pub(t, &paho.Publish{Topic: "mx/none", QoS: 1, Payload: []byte("n")})
	dropped := s.Stats().Dropped.Load()
	// Let 1.2 s pass on the clock: the short expiry elapses offline.
	time.Sleep(1200 * time.Millisecond)

	cp.CleanStart = false
	c = connectV5(t, s.addr, cp)
	m := recv(t, c.msgs, "the long-lived message")
	if m.Topic != "mx/long" {
		t.Fatalf("first delivery %s, want mx/long (mx/short expired)", m.Topic)
	}
	if e := m.Properties.MessageExpiry; e == nil || *e >= 10 || *e == 0 {
		t.Fatalf("Message Expiry Interval %v, want 1..9", e)
	}
	m = recv(t, c.msgs, "the message without expiry")
	if m.Topic != "mx/none" || m.Properties.MessageExpiry != nil {
		t.Fatalf("got %s with expiry %v", m.Topic, m.Properties.MessageExpiry)
	}
	noRecv(t, c.msgs, "the expired message")
	if got := s.Stats().Dropped.Load() - dropped; got != 1 {
		t.Fatalf("Stats().Dropped grew by %d, want 1", got)
	}
	// Delivered at once to an online subscriber, the interval is intact.
	pub.pub(t, &paho.Publish{Topic: "mx/live", QoS: 1, Payload: []byte("v"),
		Properties: &paho.PublishProperties{MessageExpiry: u32(30)}})
	m = recv(t, c.msgs, "live message")
	if e := m.Properties.MessageExpiry; e == nil || *e != 30 && *e != 29 {
		t.Fatalf("live Message Expiry Interval %v, want 30", e)
	}
}
