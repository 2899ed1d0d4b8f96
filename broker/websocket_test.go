package broker_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/coder/websocket"
	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// wsServer mounts the broker's WebSocket handler at /mqtt.
func wsServer(t *testing.T, s *testServer) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mqtt", s.WebSocketHandler(broker.ListenerConfig{Name: "ws", AllowAnonymous: true}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/mqtt"
}

// connectWS connects a paho.golang v5 client over WebSocket.
func connectWS(t *testing.T, url, id string) *v5Client {
	t.Helper()
	return connectWSWith(t, url, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
}

func connectWSWith(t *testing.T, url string, cp *paho.Connect) *v5Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"mqtt"}})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Subprotocol() != "mqtt" {
		t.Fatalf("subprotocol %q", ws.Subprotocol())
	}
	c := &v5Client{nc: websocket.NetConn(context.Background(), ws, websocket.MessageBinary),
		msgs: make(chan *paho.Publish, 100), disc: make(chan *paho.Disconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{
		Conn: c.nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet
			return true, nil
		}},
		OnServerDisconnect: func(d *paho.Disconnect) { c.disc <- d },
	})
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect over WebSocket: %v", err)
	}
	c.connack = ca
	t.Cleanup(c.close)
	return c
}

// MQTT 5 over WebSocket: publish and subscribe through the handler, with
// a TCP client and a v3.1.1 WebSocket client on the same broker.
func TestWebSocket(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	url := wsServer(t, s)
	a := connectWS(t, url, "ws-a")
	b := connectWS(t, url, "ws-b")
	tcp := watch(t, s, "ws-tcp", "ws/#")
	a.sub(t, "ws/#", 2)
	for qos := byte(0); qos <= 2; qos++ {
		b.pub(t, &paho.Publish{Topic: "ws/t", QoS: qos, Payload: []byte{'0' + qos}})
		if m := recv(t, a.msgs, "message over WebSocket"); m.QoS != qos || string(m.Payload) != string('0'+rune(qos)) {
			t.Fatalf("got QoS %d %q", m.QoS, m.Payload)
		}
		recv(t, tcp.msgs, "message at the TCP client")
	}
	// A large message crosses WebSocket frames intact.
	big := strings.Repeat("0123456789", 20000)
	tcp.pub(t, &paho.Publish{Topic: "ws/big", QoS: 1, Payload: []byte(big)})
	if m := recv(t, a.msgs, "large message"); string(m.Payload) != big {
		t.Fatalf("large payload corrupted (%d bytes)", len(m.Payload))
	}

	// paho.mqtt.golang speaks 3.1.1 over WebSocket (gorilla) too.
	v3 := connectV3(t, "", "ws-v3", func(o *mqtt.ClientOptions) {
		o.Servers = nil
		o.AddBroker(url)
		o.CustomOpenConnectionFn = nil
	})
	v3.pub(t, "ws/v3", 1, false, "from v3")
	if m := recv(t, a.msgs, "v3 message"); string(m.Payload) != "from v3" {
		t.Fatalf("got %q", m.Payload)
	}
}

// Without the mqtt subprotocol the WebSocket is closed.
func TestWebSocketRequiresSubprotocol(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	url := wsServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return // refused at the handshake: fine
	}
	defer ws.CloseNow()
	_, _, err = ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read: %v, want close 1008", err)
	}
}

// Over WebSocket too, a client whose session is taken over receives
// DISCONNECT 0x8E before the connection closes, a silent one 0x8D, and
// one of a server shutting down 0x8B.
func TestWebSocketServerDisconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	url := wsServer(t, s)
	first := connectWS(t, url, "ws-take")
	connectWS(t, url, "ws-take")
	if d := recv(t, first.disc, "DISCONNECT 0x8E over WebSocket"); d.ReasonCode != 0x8E {
		t.Fatalf("DISCONNECT 0x%02X, want 0x8E", d.ReasonCode)
	}
	// A raw client over WebSocket that stays silent past its keep alive.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"mqtt"}})
	if err != nil {
		t.Fatal(err)
	}
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	t.Cleanup(func() { nc.Close() })
	raw := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc), v: packet.V5}
	cp := v5Connect("ws-ka")
	cp.KeepAlive = 1
	if ack := raw.connect(cp); ack.ReasonCode != packet.Success {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	raw.expectDisconnect(packet.KeepAliveTimeout)

	other := connectWS(t, url, "ws-other")
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, other.disc, "DISCONNECT 0x8B over WebSocket"); d.ReasonCode != 0x8B {
		t.Fatalf("DISCONNECT 0x%02X, want 0x8B", d.ReasonCode)
	}
}
