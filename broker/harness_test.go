package broker_test

// The test harness: a broker on 127.0.0.1:0, real MQTT clients (paho.golang
// for MQTT 5, paho.mqtt.golang for 3.1.1), and a raw-socket client built on
// the codec for what no real client can express (malformed packets,
// withheld acknowledgements, explicit topic aliases, raw DUP flags).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/internal/leakcheck"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// TestMain fails the run when a goroutine of package broker outlives the
// tests: every test shuts its server down in t.Cleanup, so by now none
// may remain (test code is package broker_test and does not match).
func TestMain(m *testing.M) {
	leakcheck.Main(m, "package broker", leakcheck.Running("gantry/broker."))
}

// eventually polls cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

const (
	waitTimeout = 5 * time.Second        // generous bound for something that must happen
	quietPeriod = 300 * time.Millisecond // bounded wait proving that something does NOT happen
)

// testServer is a broker serving one TCP listener.
type testServer struct {
	*broker.Server
	addr string
}

var anonymousTCP = broker.ListenerConfig{Name: "tcp", AllowAnonymous: true}

// startServer starts a broker with opts on 127.0.0.1:0 with an anonymous
// listener; setup runs before Serve (hooks must be set before it).
func startServer(t testing.TB, opts broker.Options, setup ...func(*broker.Server)) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, opts, l, anonymousTCP, setup...)
}

// serveOn starts a broker serving l with lc; t.Cleanup shuts it down.
func serveOn(t testing.TB, opts broker.Options, l net.Listener, lc broker.ListenerConfig, setup ...func(*broker.Server)) *testServer {
	t.Helper()
	srv, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(srv)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, lc) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, broker.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{Server: srv, addr: l.Addr().String()}
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// recv waits for one value on ch.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// noRecv checks that nothing arrives on ch during quietPeriod.
func noRecv[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	case <-time.After(quietPeriod): // bounded wait: proving absence
	}
}

// ---- MQTT 5 client (paho.golang) ----

// v5Client is a connected paho.golang client whose received messages go
// to msgs and whose server DISCONNECT goes to disc.
type v5Client struct {
	*paho.Client
	nc      net.Conn
	connack *paho.Connack
	msgs    chan *paho.Publish
	disc    chan *paho.Disconnect
}

// connectV5 connects a paho.golang client with cp (ClientID, CleanStart,
// Properties...); cfg may adjust the client configuration. It fails the
// test when the connection is refused.
func connectV5(t testing.TB, addr string, cp *paho.Connect, cfg ...func(*paho.ClientConfig)) *v5Client {
	t.Helper()
	c, err := tryConnectV5(t, addr, cp, cfg...)
	if err != nil {
		t.Fatalf("v5 connect %q: %v", cp.ClientID, err)
	}
	return c
}

func tryConnectV5(t testing.TB, addr string, cp *paho.Connect, cfg ...func(*paho.ClientConfig)) (*v5Client, error) {
	t.Helper()
	c := &v5Client{nc: dial(t, addr), msgs: make(chan *paho.Publish, 1024), disc: make(chan *paho.Disconnect, 1)}
	conf := paho.ClientConfig{
		Conn: c.nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				c.msgs <- pr.Packet
				return true, nil
			},
		},
		OnServerDisconnect: func(d *paho.Disconnect) { c.disc <- d },
	}
	for _, f := range cfg {
		f(&conf)
	}
	c.Client = paho.NewClient(conf)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	c.connack = ca
	if err != nil {
		c.nc.Close()
		return c, err
	}
	t.Cleanup(c.close)
	return c, nil
}

// close disconnects normally (if still connected) and waits for the
// client's goroutines.
func (c *v5Client) close() {
	c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	select {
	case <-c.Done():
	case <-time.After(waitTimeout):
	}
}

// sub subscribes to one filter and checks the granted code.
func (c *v5Client) sub(t testing.TB, filter string, qos byte) {
	t.Helper()
	c.subWith(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: qos}}}, qos)
}

func (c *v5Client) subWith(t testing.TB, s *paho.Subscribe, want ...byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sa, err := c.Subscribe(ctx, s)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if len(want) > 0 && string(sa.Reasons) != string(want) {
		t.Fatalf("SUBACK reasons = %v, want %v", sa.Reasons, want)
	}
}

// pub publishes and waits for the QoS 1/2 handshake to complete.
func (c *v5Client) pub(t testing.TB, p *paho.Publish) *paho.PublishResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := c.Publish(ctx, p)
	if err != nil {
		t.Fatalf("publish %q: %v", p.Topic, err)
	}
	return r
}

// ---- MQTT 3.1.1 client (paho.mqtt.golang) ----

// v3Client is a connected paho.mqtt.golang client; received messages go
// to msgs; nc is its socket (to simulate a network failure).
type v3Client struct {
	mqtt.Client
	token *mqtt.ConnectToken
	msgs  chan mqtt.Message

	mu sync.Mutex
	nc net.Conn
}

func connectV3(t testing.TB, addr, clientID string, configure ...func(*mqtt.ClientOptions)) *v3Client {
	t.Helper()
	c, err := tryConnectV3(t, addr, clientID, configure...)
	if err != nil {
		t.Fatalf("v3 connect %q: %v", clientID, err)
	}
	return c
}

func tryConnectV3(t testing.TB, addr, clientID string, configure ...func(*mqtt.ClientOptions)) (*v3Client, error) {
	t.Helper()
	c := &v3Client{msgs: make(chan mqtt.Message, 1024)}
	o := mqtt.NewClientOptions().
		AddBroker("tcp://" + addr).
		SetClientID(clientID).
		SetProtocolVersion(4).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(waitTimeout).
		SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { c.msgs <- m }).
		SetCustomOpenConnectionFn(func(u *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
			nc, err := net.DialTimeout("tcp", u.Host, waitTimeout)
			c.mu.Lock()
			c.nc = nc
			c.mu.Unlock()
			return nc, err
		})
	for _, f := range configure {
		f(o)
	}
	c.Client = mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(waitTimeout) {
		return nil, errors.New("v3 connect timed out")
	}
	c.token = tok.(*mqtt.ConnectToken)
	if err := tok.Error(); err != nil {
		return c, err
	}
	t.Cleanup(func() { c.Disconnect(50) })
	return c, nil
}

// breakConn closes the socket under the client: an abnormal disconnect.
func (c *v3Client) breakConn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nc.Close()
}

func (c *v3Client) sub(t testing.TB, filter string, qos byte) {
	t.Helper()
	tok := c.Subscribe(filter, qos, nil)
	if !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
		t.Fatalf("v3 subscribe %q: %v", filter, tok.Error())
	}
}

func (c *v3Client) pub(t testing.TB, topic string, qos byte, retain bool, payload string) {
	t.Helper()
	tok := c.Publish(topic, qos, retain, payload)
	if !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
		t.Fatalf("v3 publish %q: %v", topic, tok.Error())
	}
}

// ---- raw client on the codec ----

// rawClient speaks MQTT byte by byte through the codec.
type rawClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
	v  packet.Version
}

func dialRaw(t testing.TB, addr string, v packet.Version) *rawClient {
	t.Helper()
	nc := dial(t, addr)
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc), v: v}
}

// connectRaw dials and connects with cp (its Version decides the
// client's), failing unless the CONNACK is a success.
func connectRaw(t testing.TB, addr string, cp packet.Connect) (*rawClient, *packet.Connack) {
	t.Helper()
	c := dialRaw(t, addr, cp.Version)
	ack := c.connect(cp)
	if ack.ReasonCode != packet.Success {
		t.Fatalf("raw connect %q refused: %v", cp.ClientID, ack.ReasonCode)
	}
	return c, ack
}

// v5Connect is a raw v5 CONNECT with clean start and the given properties.
func v5Connect(id string) packet.Connect {
	return packet.Connect{Version: packet.V5, CleanStart: true, ClientID: id}
}

// connect sends cp and returns the CONNACK, whatever its code.
func (c *rawClient) connect(cp packet.Connect) *packet.Connack {
	c.t.Helper()
	c.send(cp.Append(nil))
	return expectPacket[*packet.Connack](c)
}

func (c *rawClient) send(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("raw write: %v", err)
	}
}

// encode appends any client packet in the client's version.
func (c *rawClient) encode(dst []byte, p any) []byte {
	switch p := p.(type) {
	case *packet.Connect:
		return p.Append(dst)
	case *packet.Publish:
		return p.Append(dst, c.v)
	case *packet.Ack:
		return p.Append(dst, c.v)
	case *packet.Subscribe:
		return p.Append(dst, c.v)
	case *packet.Unsubscribe:
		return p.Append(dst, c.v)
	case *packet.Disconnect:
		return p.Append(dst, c.v)
	case *packet.Auth:
		return p.Append(dst, c.v)
	case packet.Pingreq:
		return packet.AppendPingreq(dst)
	}
	panic(fmt.Sprintf("rawClient: cannot encode %T", p))
}

// sendPackets encodes ps into one write.
func (c *rawClient) sendPackets(ps ...any) {
	c.t.Helper()
	var b []byte
	for _, p := range ps {
		b = c.encode(b, p)
	}
	c.send(b)
}

// read reads and decodes one packet within timeout.
func (c *rawClient) read(timeout time.Duration) (any, error) {
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	var hdr []byte
	for len(hdr) < 5 {
		b, err := c.br.ReadByte()
		if err != nil {
			return nil, err
		}
		hdr = append(hdr, b)
		if len(hdr) > 1 && b&0x80 == 0 {
			break
		}
	}
	h, _, err := packet.DecodeFixedHeader(hdr)
	if err != nil {
		return nil, fmt.Errorf("server sent a bad fixed header % x: %w", hdr, err)
	}
	body := make([]byte, h.Remaining)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, err
	}
	p, err := packet.Decode(h, body, c.v)
	if err != nil {
		return nil, fmt.Errorf("server sent an undecodable %v: %w", h.Type, err)
	}
	return p, nil
}

// expectPacket reads the next packet and fails unless it is a T.
func expectPacket[T any](c *rawClient) T {
	c.t.Helper()
	p, err := c.read(waitTimeout)
	if err != nil {
		c.t.Fatalf("waiting for %T: %v", *new(T), err)
	}
	v, ok := p.(T)
	if !ok {
		c.t.Fatalf("got %T %+v, want %T", p, p, *new(T))
	}
	return v
}

// expectPublish reads the next packet, which must be a PUBLISH.
func (c *rawClient) expectPublish() *packet.Publish {
	c.t.Helper()
	return expectPacket[*packet.Publish](c)
}

// expectAck reads the next packet, which must be an ack of type typ.
func (c *rawClient) expectAck(typ packet.Type) *packet.Ack {
	c.t.Helper()
	a := expectPacket[*packet.Ack](c)
	if a.Type != typ {
		c.t.Fatalf("got %v %d, want %v", a.Type, a.PacketID, typ)
	}
	return a
}

// expectClosed reads until the server closes the connection, within
// timeout, and returns the DISCONNECT it sent first, if any. Any other
// packet fails the test.
func (c *rawClient) expectClosed(timeout time.Duration) *packet.Disconnect {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var d *packet.Disconnect
	for {
		p, err := c.read(time.Until(deadline))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("connection still open after %v", timeout)
			}
			return d // EOF or reset: closed
		}
		switch p := p.(type) {
		case *packet.Disconnect:
			if d != nil {
				c.t.Fatalf("second DISCONNECT %+v", p)
			}
			d = p
		default:
			c.t.Fatalf("got %T %+v while waiting for the connection to close", p, p)
		}
	}
}

// expectDisconnect waits for DISCONNECT with code rc and the close.
func (c *rawClient) expectDisconnect(rc packet.ReasonCode) {
	c.t.Helper()
	d := c.expectClosed(waitTimeout)
	if d == nil {
		c.t.Fatalf("closed without DISCONNECT, want DISCONNECT %v", rc)
	}
	if d.ReasonCode != rc {
		c.t.Fatalf("DISCONNECT %v, want %v", d.ReasonCode, rc)
	}
}

// expectSilence checks that nothing arrives during quietPeriod (bounded
// wait: proving absence).
func (c *rawClient) expectSilence() {
	c.t.Helper()
	p, err := c.read(quietPeriod)
	if err == nil {
		c.t.Fatalf("unexpected %T %+v", p, p)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("connection failed: %v", err)
	}
}

// subscribe sends SUBSCRIBE and returns the SUBACK.
func (c *rawClient) subscribe(pid uint16, subID uint32, subs ...packet.Subscription) *packet.Suback {
	c.t.Helper()
	s := &packet.Subscribe{PacketID: pid, Subscriptions: subs}
	if subID != 0 {
		s.Props.SubscriptionIDs = []uint32{subID}
	}
	c.sendPackets(s)
	sa := expectPacket[*packet.Suback](c)
	if sa.PacketID != pid {
		c.t.Fatalf("SUBACK id %d, want %d", sa.PacketID, pid)
	}
	return sa
}

func sub(filter string, qos byte) packet.Subscription {
	return packet.Subscription{Filter: filter, Options: packet.SubOptions{QoS: qos}}
}

// rawPublish builds a PUBLISH.
func rawPublish(topic string, qos byte, pid uint16, payload string) *packet.Publish {
	return &packet.Publish{Topic: []byte(topic), QoS: qos, PacketID: pid, Payload: []byte(payload)}
}

func ack(typ packet.Type, pid uint16) *packet.Ack { return &packet.Ack{Type: typ, PacketID: pid} }

// u32 is a *uint32 for paho's optional properties.
func u32(v uint32) *uint32 { return &v }
