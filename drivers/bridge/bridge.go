package bridge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"gantry/drivers"
)

// Direction of a mapping.
const (
	Out  = "OUT"  // local → remote
	In   = "IN"   // remote → local
	Both = "BOTH" // both, without echo
)

// Route is one mapping: a local filter and a remote one.
type Route struct {
	Name      string
	Local     Pattern // SOURCE_TOPIC
	Remote    Pattern // DESTINATION_TOPIC
	Direction string
	QoS       byte
}

// Config is a parsed MQTT_BRIDGE.
type Config struct {
	URL            string // tcp://host:port or ssl://host:port
	ClientID       string
	Username       string
	Password       string
	TLS            *tls.Config // nil without USE_TLS
	KeepAlive      time.Duration
	ConnectTimeout time.Duration
	Routes         []Route
}

// Parse reads SOURCE_CONFIG (which must be BROKER SELF), DESTINATION_CONFIG
// and the mappings of an MQTT_BRIDGE.
func Parse(s *drivers.Spec, env drivers.Env, errs *[]error) *Config {
	c := &Config{}
	cs := s.Config // DESTINATION_CONFIG
	for _, b := range s.Source.Blocks {
		if b.Kind == "SOURCE_CONFIG" {
			src := drivers.NewSettings(b, env, errs)
			if !strings.EqualFold(src.String("BROKER", "SELF"), "SELF") {
				src.Errorf(b.KindPos, "SOURCE_CONFIG: only WITH BROKER SELF (this broker) is supported; put the remote broker in DESTINATION_CONFIG")
			}
			src.Finish()
		}
	}
	if cs == nil {
		return c
	}
	host := cs.String("BROKER_ADDRESS", cs.String("HOST", ""))
	if host == "" {
		cs.Errorf(cs.Block.KindPos, "%s needs WITH BROKER_ADDRESS \"<remote broker>\"", cs.Where())
	}
	useTLS := cs.Bool("USE_TLS", false)
	port := cs.Int("BROKER_PORT", map[bool]int{false: 1883, true: 8883}[useTLS], 1, 65535)
	scheme := "tcp"
	if useTLS {
		scheme = "ssl"
		c.TLS = tlsConfig(cs, host)
	}
	c.URL = scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
	c.ClientID = cs.String("CLIENT_ID", "gantry-bridge-"+s.Name)
	c.Username = cs.String("USERNAME", "")
	c.Password = cs.String("PASSWORD", "")
	c.KeepAlive = time.Duration(cs.Int("KEEP_ALIVE", 30, 1, 65535)) * time.Second
	c.ConnectTimeout = cs.Millis("CONNECTION_TIMEOUT", 5*time.Second, 100, 600_000)
	for _, m := range s.Mappings {
		c.Routes = append(c.Routes, parseRoute(m))
	}
	if len(c.Routes) == 0 {
		cs.Errorf(s.Source.TypePos, "MQTT_BRIDGE %s has no ADD MAPPING: nothing to bridge", s.Name)
	}
	return c
}

func parseRoute(m *drivers.Mapping) Route {
	ms := m.Settings
	r := Route{Name: m.Name}
	local := m.Prefix // the mapping's SOURCE_TOPIC, read by drivers.Parse
	remote := ms.String("DESTINATION_TOPIC", local)
	r.Direction = ms.OneOf("DIRECTION", Out, []string{Out, In, Both}, nil)
	r.QoS = byte(ms.Int("QOS", 0, 0, 2))
	var err error
	if local == "" {
		ms.Errorf(ms.Block.KindPos, "%s needs WITH SOURCE_TOPIC (the topics on this broker)", ms.Where())
		return r
	}
	if r.Local, err = ParsePattern(local); err != nil {
		ms.Errorf(ms.Block.KindPos, "%s SOURCE_TOPIC: %v", ms.Where(), err)
	}
	if r.Remote, err = ParsePattern(remote); err != nil {
		ms.Errorf(ms.Block.KindPos, "%s DESTINATION_TOPIC: %v", ms.Where(), err)
	}
	if !r.Local.Compatible(r.Remote) {
		ms.Errorf(ms.Block.KindPos, "%s: SOURCE_TOPIC %q and DESTINATION_TOPIC %q must have the same wildcards in the same order",
			ms.Where(), local, remote)
	}
	return r
}

func tlsConfig(cs *drivers.Settings, host string) *tls.Config {
	t := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	t.InsecureSkipVerify = cs.Bool("ALLOW_UNTRUSTED_CERTS", false)
	if p := cs.String("SERVER_CA_CERT_PATH", ""); p != "" {
		pem, err := os.ReadFile(p)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			cs.Errorf(cs.Pair("SERVER_CA_CERT_PATH").Value().Pos, "SERVER_CA_CERT_PATH %q: no PEM certificate could be read (%v)", p, err)
		}
		t.RootCAs = pool
	}
	if p := cs.String("CLIENT_CERT_PATH", ""); p != "" {
		key := cs.String("CLIENT_KEY_PATH", p)
		cert, err := tls.LoadX509KeyPair(p, key)
		if err != nil {
			cs.Errorf(cs.Pair("CLIENT_CERT_PATH").Value().Pos, "CLIENT_CERT_PATH %q / CLIENT_KEY_PATH %q: %v", p, key, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t
}

// Describe names the remote broker.
func (c *Config) Describe() string { return c.URL + " as " + c.ClientID }

// Local is the node's broker, as the bridge sees it.
type Local interface {
	Publish(topic string, payload []byte, qos byte, retain bool) error
}

// Reporter receives the bridge's state and counts.
type Reporter interface {
	State(connected bool, err error)
	Received() // a message from the remote broker was published here
	Sent()     // a message was sent to the remote broker
	Dropped(err error)
}

// Bridge runs one MQTT_BRIDGE: a paho client to the remote broker, which
// redials by itself with backoff.
type Bridge struct {
	cfg    *Config
	local  Local
	rep    Reporter
	client mqtt.Client

	minBackoff, maxBackoff time.Duration
	stop                   chan struct{} // closed by Stop: ends the first connection's retries
	stopOnce               sync.Once
	dialing                sync.WaitGroup

	mu     sync.Mutex           // guards recent
	recent map[uint64]time.Time // messages sent out lately, to drop their echo
}

// echoWindow is how long a message sent to the remote broker is
// remembered to drop its echo (a BOTH mapping receives what it sent).
const echoWindow = 5 * time.Second

// New makes a bridge; Run connects it.
func New(cfg *Config, local Local, rep Reporter, minBackoff, maxBackoff time.Duration) *Bridge {
	b := &Bridge{cfg: cfg, local: local, rep: rep, recent: map[uint64]time.Time{},
		minBackoff: minBackoff, maxBackoff: max(maxBackoff, minBackoff), stop: make(chan struct{})}
	// The first connection is retried here, not by paho (ConnectRetry),
	// whose retries report no error: a wrong certificate or address would
	// show as connecting, without a reason. After a connection paho
	// reconnects by itself and reports the loss.
	o := mqtt.NewClientOptions().AddBroker(cfg.URL).SetClientID(cfg.ClientID).SetUsername(cfg.Username).
		SetPassword(cfg.Password).SetCleanSession(true).SetKeepAlive(cfg.KeepAlive).SetConnectTimeout(cfg.ConnectTimeout).
		SetAutoReconnect(true).SetMaxReconnectInterval(maxBackoff).
		SetOrderMatters(false).SetOnConnectHandler(b.onConnect).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) { rep.State(false, err) })
	if cfg.TLS != nil {
		o.SetTLSConfig(cfg.TLS)
	}
	b.client = mqtt.NewClient(o)
	return b
}

// Start connects in the background, trying again with backoff until the
// first connection succeeds (each failure reported) or Stop.
func (b *Bridge) Start() {
	b.dialing.Add(1)
	go b.dial()
}

func (b *Bridge) dial() {
	defer b.dialing.Done()
	wait := b.minBackoff
	for {
		tok := b.client.Connect()
		select {
		case <-tok.Done():
		case <-b.stop:
			return
		}
		if tok.Error() == nil {
			return
		}
		b.rep.State(false, fmt.Errorf("connect %s: %w", b.cfg.URL, tok.Error()))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-b.stop:
			t.Stop()
			return
		}
		wait = min(2*wait, b.maxBackoff)
	}
}

// Stop ends the first connection's retries and disconnects, waiting at
// most 250 ms for work in progress.
func (b *Bridge) Stop() {
	b.stopOnce.Do(func() { close(b.stop) })
	b.dialing.Wait()
	b.client.Disconnect(250)
	b.rep.State(false, nil)
}

// onConnect subscribes the remote side of the IN and BOTH routes (again
// after every reconnect: the session is clean).
func (b *Bridge) onConnect(c mqtt.Client) {
	for _, r := range b.cfg.Routes {
		if r.Direction == Out {
			continue
		}
		tok := c.Subscribe(r.Remote.String(), r.QoS, func(_ mqtt.Client, m mqtt.Message) { b.fromRemote(r, m) })
		if tok.WaitTimeout(b.cfg.ConnectTimeout) && tok.Error() != nil {
			b.rep.State(false, fmt.Errorf("subscribe %s: %w", r.Remote, tok.Error()))
			return
		}
	}
	b.rep.State(true, nil)
}

func (b *Bridge) fromRemote(r Route, m mqtt.Message) {
	if r.Direction == Both && b.isEcho(m.Topic(), m.Payload()) {
		return
	}
	tp, ok := r.Remote.Map(m.Topic(), r.Local)
	if !ok {
		return
	}
	if err := b.local.Publish(tp, m.Payload(), min(m.Qos(), r.QoS), m.Retained()); err != nil {
		b.rep.Dropped(fmt.Errorf("publish %s here: %w", tp, err))
		return
	}
	b.rep.Received()
}

// LocalFilters are the filters to subscribe to on this broker.
func (b *Bridge) LocalFilters() []string {
	var out []string
	for _, r := range b.cfg.Routes {
		if r.Direction != In {
			out = append(out, r.Local.String())
		}
	}
	return out
}

// FromLocal sends a message of this broker to the remote one, for every
// OUT and BOTH route it matches. It does not wait for the remote broker.
func (b *Bridge) FromLocal(topic string, payload []byte, qos byte, retain bool) {
	for _, r := range b.cfg.Routes {
		if r.Direction == In {
			continue
		}
		tp, ok := r.Local.Map(topic, r.Remote)
		if !ok {
			continue
		}
		if !b.client.IsConnectionOpen() {
			b.rep.Dropped(errors.New("remote broker not connected"))
			continue
		}
		if r.Direction == Both {
			b.remember(tp, payload)
		}
		b.client.Publish(tp, min(qos, r.QoS), retain, payload)
		b.rep.Sent()
	}
}

func sum(topic string, payload []byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum64()
}

func (b *Bridge) remember(topic string, payload []byte) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.recent) > 10_000 {
		for k, at := range b.recent {
			if now.Sub(at) > echoWindow {
				delete(b.recent, k)
			}
		}
	}
	b.recent[sum(topic, payload)] = now
}

func (b *Bridge) isEcho(topic string, payload []byte) bool {
	k := sum(topic, payload)
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.recent[k]
	if ok {
		delete(b.recent, k)
	}
	return ok && time.Since(at) < echoWindow
}
