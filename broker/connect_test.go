package broker_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// A v5 session survives a disconnect when it has an expiry: the next
// clean-start-0 CONNECT finds it (session present), a clean-start-1
// CONNECT discards it.
func TestConnectSessionPresentV5(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	first := connectV5(t, s.addr, &paho.Connect{ClientID: "sp5", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(60)}})
	if first.connack.SessionPresent {
		t.Fatal("session present on the first connect")
	}
	first.close()
	for _, tc := range []struct {
		clean bool
		want  bool
	}{{false, true}, {false, true}, {true, false}, {false, true}} {
		c := connectV5(t, s.addr, &paho.Connect{ClientID: "sp5", CleanStart: tc.clean, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(60)}})
		if c.connack.SessionPresent != tc.want {
			t.Fatalf("clean start %v: session present %v, want %v", tc.clean, c.connack.SessionPresent, tc.want)
		}
		c.close()
	}
}

func TestConnectSessionPresentV311(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	clean := func(b bool) func(*mqtt.ClientOptions) {
		return func(o *mqtt.ClientOptions) { o.SetCleanSession(b) }
	}
	for i, tc := range []struct {
		clean bool
		want  bool
	}{{false, false}, {false, true}, {true, false}, {false, false}, {false, true}} {
		c := connectV3(t, s.addr, "sp3", clean(tc.clean))
		if got := c.token.SessionPresent(); got != tc.want {
			t.Fatalf("step %d clean session %v: session present %v, want %v", i, tc.clean, got, tc.want)
		}
		c.Disconnect(50)
	}
}

func TestConnectAssignedClientIDV5(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	ids := map[string]bool{}
	for range 2 {
		c := connectV5(t, s.addr, &paho.Connect{CleanStart: true, KeepAlive: 30})
		id := c.connack.Properties.AssignedClientID
		if id == "" || ids[id] {
			t.Fatalf("assigned client identifier %q (seen: %v)", id, ids)
		}
		ids[id] = true
		// The assigned identifier is the one the session is known by.
		c.sub(t, "assigned/"+id, 1)
		c.pub(t, &paho.Publish{Topic: "assigned/" + id, QoS: 1, Payload: []byte("x")})
		recv(t, c.msgs, "own message")
	}
}

func TestConnectEmptyClientIDV311(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	// Clean session 0 with an empty identifier: return code 2.
	c := dialRaw(t, s.addr, packet.V311)
	ack := c.connect(packet.Connect{Version: packet.V311, CleanStart: false, KeepAlive: 30})
	if ack.ReasonCode != packet.ClientIdentifierNotValid {
		t.Fatalf("CONNACK %v, want identifier rejected (2)", ack.ReasonCode)
	}
	c.expectClosed(waitTimeout)
	// The real client sees the same refusal.
	_, err := tryConnectV3(t, s.addr, "", func(o *mqtt.ClientOptions) { o.SetCleanSession(false) })
	if !errors.Is(err, packets.ErrorRefusedIDRejected) {
		t.Fatalf("paho v3 connect: %v, want identifier rejected", err)
	}
	// Clean session 1 with an empty identifier is accepted.
	connectRaw(t, s.addr, packet.Connect{Version: packet.V311, CleanStart: true, KeepAlive: 30})
}

// A second connection with the same client identifier takes the session
// over: the first receives DISCONNECT 0x8E, the second gets the session
// with its subscription and the messages queued for it.
func TestConnectTakeoverV5(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := func(clean bool) *paho.Connect {
		return &paho.Connect{ClientID: "takeover", CleanStart: clean, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(60)}}
	}
	first := connectV5(t, s.addr, cp(true))
	first.sub(t, "take/over", 1)
	second := connectV5(t, s.addr, cp(false))
	d := recv(t, first.disc, "DISCONNECT to the first client")
	if d.ReasonCode != byte(packet.SessionTakenOver) {
		t.Fatalf("first client got DISCONNECT 0x%02X, want 0x8E", d.ReasonCode)
	}
	if !second.connack.SessionPresent {
		t.Fatal("second client: session not present")
	}
	pub := connectV5(t, s.addr, &paho.Connect{ClientID: "takeover-pub", CleanStart: true, KeepAlive: 30})
	pub.pub(t, &paho.Publish{Topic: "take/over", QoS: 1, Payload: []byte("m")})
	if m := recv(t, second.msgs, "message on the taken-over subscription"); string(m.Payload) != "m" {
		t.Fatalf("payload %q", m.Payload)
	}
	noRecv(t, first.msgs, "message to the replaced client")
}

// A raw client with keep alive 1 s that sends nothing is disconnected
// with 0x8D after one and a half keep alives: not before 1 s, and well
// before 3 s.
func TestKeepAliveEnforced(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("ka")
	cp.KeepAlive = 1
	c, _ := connectRaw(t, s.addr, cp)
	start := time.Now()
	d := c.expectClosed(4 * time.Second)
	elapsed := time.Since(start)
	if elapsed < time.Second || elapsed > 3*time.Second {
		t.Fatalf("closed after %v, want about 1.5 s", elapsed)
	}
	if d == nil || d.ReasonCode != packet.KeepAliveTimeout {
		t.Fatalf("DISCONNECT %+v, want 0x8D", d)
	}
}

// A client that keeps sending PINGREQ within its keep alive stays.
func TestKeepAlivePingKeepsConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	cp := v5Connect("ka-ping")
	cp.KeepAlive = 1
	c, _ := connectRaw(t, s.addr, cp)
	for range 4 { // 2 s: past the 1.5 s the server allows without a packet
		c.sendPackets(packet.Pingreq{})
		expectPacket[packet.Pingresp](c)
		time.Sleep(500 * time.Millisecond) // the client's ping schedule, not a wait for a condition
	}
}

// Keep alive 0 turns the mechanism off: the connection is not closed by
// the CONNECT timeout's read deadline once connected.
func TestKeepAliveZeroNeverTimesOut(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{ConnectTimeout: 200 * time.Millisecond})
	c, _ := connectRaw(t, s.addr, v5Connect("ka-zero"))
	// Idle for several ConnectTimeouts: nothing may arrive, in particular
	// no DISCONNECT (bounded wait: proving absence).
	p, err := c.read(4 * 200 * time.Millisecond)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("idle keep-alive-0 connection: got %v, %v; want nothing", p, err)
	}
	c.sendPackets(packet.Pingreq{})
	expectPacket[packet.Pingresp](c)
}

// Options.MaxKeepAlive caps the keep alive (0 counts as infinite) and
// the CONNACK tells the client with Server Keep Alive; the capped value
// is enforced.
func TestServerKeepAliveCapped(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxKeepAlive: 1})
	for _, tc := range []struct {
		asked  uint16
		want   uint16
		capped bool
	}{{60, 1, true}, {0, 1, true}, {1, 0, false}} {
		cp := v5Connect("ska")
		cp.KeepAlive = tc.asked
		c, ack := connectRaw(t, s.addr, cp)
		if got := ack.Props.IsSet(packet.PropServerKeepAlive); got != tc.capped || ack.Props.ServerKeepAlive != tc.want {
			t.Fatalf("keep alive %d: Server Keep Alive set=%v value=%d, want set=%v value=%d",
				tc.asked, got, ack.Props.ServerKeepAlive, tc.capped, tc.want)
		}
		if tc.asked == 60 {
			start := time.Now()
			if d := c.expectClosed(4 * time.Second); d == nil || d.ReasonCode != packet.KeepAliveTimeout {
				t.Fatalf("DISCONNECT %+v, want 0x8D", d)
			}
			if e := time.Since(start); e < time.Second {
				t.Fatalf("closed after %v, before the capped keep alive", e)
			}
		}
		c.nc.Close()
	}
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	for _, tc := range []struct {
		name string
		wire []byte
		v    packet.Version // CONNACK format expected
		want packet.ReasonCode
	}{
		{"v5 authentication method", func() []byte {
			cp := v5Connect("auth")
			cp.Props.AuthMethod = "SCRAM-SHA-256"
			cp.Props.Set(packet.PropAuthMethod)
			return cp.Append(nil)
		}(), packet.V5, packet.BadAuthenticationMethod},
		{"v3 unsupported protocol level 6", rawConnect("MQTT", 6), packet.V311, packet.UnsupportedProtocolVersion},
		{"v3 unsupported protocol level 3 named MQTT", rawConnect("MQTT", 3), packet.V311, packet.UnsupportedProtocolVersion},
		{"v5 level with the v3.1 protocol name", rawConnect("MQIsdp", 5), packet.V5, packet.UnsupportedProtocolVersion},
		{"v5 will topic with wildcard", func() []byte {
			cp := v5Connect("will-wild")
			cp.WillFlag, cp.WillTopic, cp.WillPayload = true, "a/#", []byte("x")
			return cp.Append(nil)
		}(), packet.V5, packet.TopicNameInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.addr, tc.v)
			c.send(tc.wire)
			ack := expectPacket[*packet.Connack](c)
			if ack.ReasonCode != tc.want || ack.SessionPresent {
				t.Fatalf("CONNACK %v (session present %v), want %v", ack.ReasonCode, ack.SessionPresent, tc.want)
			}
			c.expectClosed(waitTimeout)
		})
	}
}

// rawConnect is a minimal CONNECT with any protocol name and level.
func rawConnect(name string, level byte) []byte {
	body := []byte{0, byte(len(name))}
	body = append(body, name...)
	body = append(body, level, 0x02, 0, 30) // clean start, keep alive 30
	if level == 5 {
		body = append(body, 0) // no properties
	}
	body = append(body, 0, 2, 'i', 'd')
	return append([]byte{0x10, byte(len(body))}, body...)
}

// No CONNECT within Options.ConnectTimeout: the socket is closed.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{ConnectTimeout: 300 * time.Millisecond})
	c := dialRaw(t, s.addr, packet.V5)
	start := time.Now()
	if d := c.expectClosed(3 * time.Second); d != nil {
		t.Fatalf("DISCONNECT before CONNECT: %+v", d)
	}
	if e := time.Since(start); e < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the connect timeout", e)
	}
	// Half a CONNECT is no better.
	c = dialRaw(t, s.addr, packet.V5)
	cp := v5Connect("slow")
	c.send(cp.Append(nil)[:5])
	c.expectClosed(3 * time.Second)
}

type acceptAlice struct{}

func (acceptAlice) Authenticate(info *broker.ConnInfo) error {
	if info.Username == "alice" && string(info.Password) == "secret" {
		return nil
	}
	return errors.New("no")
}

func TestAnonymousRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serveOn(t, broker.Options{}, l, broker.ListenerConfig{Name: "tcp"},
		func(s *broker.Server) { s.SetAuthenticator(acceptAlice{}) })
	for _, tc := range []struct {
		name     string
		v        packet.Version
		user     string
		password string
		want     packet.ReasonCode
		wantV3   byte
	}{
		{"v5 anonymous", packet.V5, "", "", packet.NotAuthorized, 0},
		{"v5 wrong password", packet.V5, "alice", "guess", packet.BadUserNameOrPassword, 0},
		{"v5 good password", packet.V5, "alice", "secret", packet.Success, 0},
		{"v3 anonymous", packet.V311, "", "", packet.NotAuthorized, 5},
		{"v3 wrong password", packet.V311, "alice", "guess", packet.BadUserNameOrPassword, 4},
		{"v3 good password", packet.V311, "alice", "secret", packet.Success, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := packet.Connect{Version: tc.v, CleanStart: true, KeepAlive: 30, ClientID: "anon"}
			if tc.user != "" {
				cp.UsernameFlag, cp.Username = true, tc.user
				cp.PasswordFlag, cp.Password = true, []byte(tc.password)
			}
			c := dialRaw(t, s.addr, tc.v)
			c.send(cp.Append(nil))
			if tc.v != packet.V5 {
				// Check the v3 return code byte itself.
				c.nc.SetReadDeadline(time.Now().Add(waitTimeout))
				var b [4]byte
				if _, err := io.ReadFull(c.br, b[:]); err != nil {
					t.Fatal(err)
				}
				if b[0] != 0x20 || b[1] != 2 || b[3] != tc.wantV3 {
					t.Fatalf("v3 CONNACK % x, want return code %d", b, tc.wantV3)
				}
				if tc.want != packet.Success {
					c.expectClosed(waitTimeout)
				}
				return
			}
			ack := expectPacket[*packet.Connack](c)
			if ack.ReasonCode != tc.want {
				t.Fatalf("CONNACK %v, want %v", ack.ReasonCode, tc.want)
			}
			if tc.want != packet.Success {
				c.expectClosed(waitTimeout)
			}
		})
	}
}

// remoteListener makes every accepted connection report addr as its
// remote address, to play a client from another host.
type remoteListener struct {
	net.Listener
	addr net.Addr
}

type remoteConn struct {
	net.Conn
	addr net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.addr }

func (l remoteListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{nc, l.addr}, nil
}

func TestAnonymousLoopbackOnly(t *testing.T) {
	t.Parallel()
	lc := broker.ListenerConfig{Name: "tcp", AllowAnonymous: true, AnonymousLoopbackOnly: true}
	for _, tc := range []struct {
		name   string
		remote net.Addr // nil: the real loopback address
		want   packet.ReasonCode
	}{
		{"loopback", nil, packet.Success},
		{"ipv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 5000}, packet.Success},
		{"remote", &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 5000}, packet.NotAuthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if tc.remote != nil {
				l = remoteListener{l, tc.remote}
			}
			s := serveOn(t, broker.Options{}, l, lc)
			c := dialRaw(t, s.addr, packet.V5)
			if ack := c.connect(v5Connect("loop")); ack.ReasonCode != tc.want {
				t.Fatalf("CONNACK %v, want %v", ack.ReasonCode, tc.want)
			}
		})
	}
}

// The paho v3 client reports the refusal codes as its errors.
func TestAnonymousRefusedV3Client(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serveOn(t, broker.Options{}, l, broker.ListenerConfig{Name: "tcp"},
		func(s *broker.Server) { s.SetAuthenticator(acceptAlice{}) })
	_, err = tryConnectV3(t, s.addr, "anon3")
	if err == nil || !strings.Contains(err.Error(), packets.ErrorRefusedNotAuthorised.Error()) {
		t.Fatalf("anonymous v3: %v, want not authorised", err)
	}
	connectV3(t, s.addr, "alice3", func(o *mqtt.ClientOptions) { o.SetUsername("alice").SetPassword("secret") })
}

// Shutdown disconnects every client, v5 ones with DISCONNECT 0x8B, and
// refuses new connections.
func TestShutdownDisconnectsClients(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	c5, _ := connectRaw(t, s.addr, v5Connect("sd5"))
	c3, _ := connectRaw(t, s.addr, packet.Connect{Version: packet.V311, CleanStart: true, KeepAlive: 30, ClientID: "sd3"})
	p := connectV5(t, s.addr, &paho.Connect{ClientID: "sd-paho", CleanStart: true, KeepAlive: 30})
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	c5.expectDisconnect(packet.ServerShuttingDown)
	if d := c3.expectClosed(waitTimeout); d != nil {
		t.Fatalf("v3 client got DISCONNECT %+v", d)
	}
	if d := recv(t, p.disc, "DISCONNECT at the paho client"); d.ReasonCode != byte(packet.ServerShuttingDown) {
		t.Fatalf("paho client got DISCONNECT 0x%02X", d.ReasonCode)
	}
	if nc, err := net.DialTimeout("tcp", s.addr, waitTimeout); err == nil {
		nc.Close()
		t.Fatal("listener still accepting after Shutdown")
	}
}

// onlyGateways admits clients whose identifier starts with "gw", anonymous
// or not (a broker.ConnectAuthorizer); it allows every publish and
// subscription.
type onlyGateways struct{}

func (onlyGateways) CanPublish(*broker.ConnInfo, string) bool   { return true }
func (onlyGateways) CanSubscribe(*broker.ConnInfo, string) bool { return true }
func (onlyGateways) CanConnect(info *broker.ConnInfo) bool {
	return strings.HasPrefix(info.ClientID, "gw")
}

// TestConnectAuthorizer: an Authorizer that can admit connections decides
// after the credentials, for anonymous clients too (v5 0x87, v3 code 5).
func TestConnectAuthorizer(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{}, func(s *broker.Server) { s.SetAuthorizer(onlyGateways{}) })
	for _, tc := range []struct {
		id   string
		v    packet.Version
		want packet.ReasonCode
	}{
		{"gw1", packet.V5, packet.Success},
		{"laptop", packet.V5, packet.NotAuthorized},
		{"laptop", packet.V311, packet.NotAuthorized},
	} {
		t.Run(tc.id+"/v"+strconv.Itoa(int(tc.v)), func(t *testing.T) {
			c := dialRaw(t, s.addr, tc.v)
			c.send((&packet.Connect{Version: tc.v, CleanStart: true, KeepAlive: 30, ClientID: tc.id}).Append(nil))
			ack := expectPacket[*packet.Connack](c)
			if ack.ReasonCode != tc.want {
				t.Fatalf("CONNACK %v, want %v", ack.ReasonCode, tc.want)
			}
			if tc.want != packet.Success {
				c.expectClosed(waitTimeout)
			}
		})
	}
}
