package opcua

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"gantry/drivers"
)

// Config is OPCUA_CONFIG.
type Config struct {
	Endpoint       string
	Mode           ua.MessageSecurityMode
	ModeName       string
	Policy         string // short name: None, Basic256Sha256, ...
	CertFile       string
	KeyFile        string
	Username       string
	Password       string
	RequestTimeout time.Duration
	Subscribe      bool // monitored items instead of polling
	AppURI         string
}

var modes = map[string]ua.MessageSecurityMode{"NONE": ua.MessageSecurityModeNone, "SIGN": ua.MessageSecurityModeSign,
	"SIGNANDENCRYPT": ua.MessageSecurityModeSignAndEncrypt}

var policies = []string{"NONE", "BASIC128RSA15", "BASIC256", "BASIC256SHA256", "AES128_SHA256_RSAOAEP", "AES256_SHA256_RSAPSS"}

var policyNames = map[string]string{"NONE": "None", "BASIC128RSA15": "Basic128Rsa15", "BASIC256": "Basic256",
	"BASIC256SHA256": "Basic256Sha256", "AES128_SHA256_RSAOAEP": "Aes128_Sha256_RsaOaep", "AES256_SHA256_RSAPSS": "Aes256_Sha256_RsaPss"}

// Parse reads OPCUA_CONFIG and each tag's NODE_ID.
func Parse(s *drivers.Spec) *Config {
	c := &Config{AppURI: "urn:gantry:connector:" + s.Name}
	cs := s.Config
	if cs == nil {
		return c
	}
	c.Endpoint = cs.String("ENDPOINT_URL", cs.String("ENDPOINT", ""))
	if u, err := url.Parse(c.Endpoint); c.Endpoint == "" || err != nil || u.Scheme != "opc.tcp" {
		cs.Errorf(cs.Block.KindPos, "%s needs WITH ENDPOINT_URL \"opc.tcp://<host>:4840\" (got %q)", cs.Where(), c.Endpoint)
	}
	c.ModeName = cs.OneOf("SECURITY_MODE", "NONE", []string{"NONE", "SIGN", "SIGNANDENCRYPT"},
		map[string]string{"SIGN_AND_ENCRYPT": "SIGNANDENCRYPT"})
	c.Mode = modes[c.ModeName]
	def := "BASIC256SHA256"
	if c.Mode == ua.MessageSecurityModeNone {
		def = "NONE"
	}
	c.Policy = policyNames[cs.OneOf("SECURITY_POLICY", def, policies, nil)]
	if (c.Policy == "None") != (c.Mode == ua.MessageSecurityModeNone) {
		cs.Errorf(cs.Block.KindPos, "%s: SECURITY_MODE %s does not go with SECURITY_POLICY %s", cs.Where(), c.ModeName, c.Policy)
	}
	c.CertFile = cs.String("CERTIFICATE_PATH", cs.String("CLIENT_CERT_PATH", ""))
	c.KeyFile = cs.String("PRIVATE_KEY_PATH", cs.String("CLIENT_KEY_PATH", ""))
	if (c.CertFile == "") != (c.KeyFile == "") {
		cs.Errorf(cs.Block.KindPos, "%s: give both CERTIFICATE_PATH and PRIVATE_KEY_PATH, or neither (a certificate is then made at start)", cs.Where())
	}
	c.Username = cs.String("USERNAME", "")
	c.Password = cs.String("PASSWORD", "")
	c.RequestTimeout = cs.Millis("REQUEST_TIMEOUT", cs.Millis("READ_TIMEOUT", 2*time.Second, 10, 600_000), 10, 600_000)
	c.Subscribe = cs.Bool("SUBSCRIBE", true)
	for _, t := range s.Tags() {
		ts := t.Settings
		id := ts.String("NODE_ID", ts.String("ADDRESS", ""))
		if id == "" {
			ts.Errorf(ts.Block.KindPos, "%s needs WITH NODE_ID \"ns=2;s=Temperature\"", ts.Where())
			continue
		}
		n, err := ua.ParseNodeID(id)
		if err != nil {
			ts.Errorf(ts.Block.KindPos, "%s NODE_ID %q: %v", ts.Where(), id, err)
			continue
		}
		t.Addr = n
	}
	return c
}

// Describe names the server.
func (c *Config) Describe() string { return c.Endpoint + " " + c.ModeName + "/" + c.Policy }

// Device is one OPC UA session.
type Device struct {
	cfg *Config
	mu  sync.Mutex // guards cli
	cli *opcua.Client
}

// New makes the device of a configuration.
func New(c *Config) *Device { return &Device{cfg: c} }

// Open implements drivers.Device: it finds the endpoint of the security
// asked for and opens a session. Reconnecting is the engine's (the
// library's own AutoReconnect is off).
func (d *Device) Open(ctx context.Context) error {
	c := d.cfg
	eps, err := opcua.GetEndpoints(ctx, c.Endpoint, opcua.DialTimeout(c.RequestTimeout))
	if err != nil {
		return fmt.Errorf("opcua: get endpoints: %w", err)
	}
	ep, err := opcua.SelectEndpoint(eps, c.Policy, c.Mode)
	if err != nil || ep == nil {
		return fmt.Errorf("opcua: %s offers no endpoint with %s/%s", c.Endpoint, c.ModeName, c.Policy)
	}
	ep.EndpointURL = c.Endpoint // servers advertise a host name of their own
	auth := ua.UserTokenTypeAnonymous
	opts := []opcua.Option{opcua.AutoReconnect(false), opcua.RequestTimeout(c.RequestTimeout), opcua.DialTimeout(c.RequestTimeout),
		opcua.SecurityPolicy(c.Policy), opcua.SecurityMode(c.Mode), opcua.ApplicationURI(c.AppURI), opcua.ApplicationName("Gantry")}
	if c.Username != "" {
		auth = ua.UserTokenTypeUserName
		opts = append(opts, opcua.AuthUsername(c.Username, c.Password))
	} else {
		opts = append(opts, opcua.AuthAnonymous())
	}
	if c.Mode != ua.MessageSecurityModeNone {
		if c.CertFile != "" {
			opts = append(opts, opcua.CertificateFile(c.CertFile), opcua.PrivateKeyFile(c.KeyFile))
		} else {
			cert, key, err := selfSigned(c.AppURI)
			if err != nil {
				return err
			}
			opts = append(opts, opcua.Certificate(cert), opcua.PrivateKey(key))
		}
	}
	opts = append(opts, opcua.SecurityFromEndpoint(ep, auth))
	cli, err := opcua.NewClient(c.Endpoint, opts...)
	if err != nil {
		return fmt.Errorf("opcua: %w", err)
	}
	if err := cli.Connect(ctx); err != nil {
		cli.Close(context.Background())
		return fmt.Errorf("opcua: connect: %w", err)
	}
	d.mu.Lock()
	d.cli = cli
	d.mu.Unlock()
	return nil
}

// selfSigned makes a client certificate for SignAndEncrypt when none is
// configured (servers that check certificates must trust it).
func selfSigned(uri string) ([]byte, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	u, _ := url.Parse(uri)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "Gantry connector"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(5, 0, 0), URIs: []*url.URL{u},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageContentCommitment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	return der, key, err
}

func (d *Device) client() *opcua.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cli
}

// Close implements drivers.Device.
func (d *Device) Close() error {
	d.mu.Lock()
	cli := d.cli
	d.cli = nil
	d.mu.Unlock()
	if cli == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return cli.Close(ctx)
}

var errClosed = errors.New("opcua: session closed")

// Read implements drivers.Device: one Read request for every tag.
func (d *Device) Read(ctx context.Context, b *drivers.Batch) error {
	cli := d.client()
	if cli == nil {
		return errClosed
	}
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	var idx []int
	for i, t := range b.Tags {
		if n, ok := t.Addr.(*ua.NodeID); ok {
			req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValue})
			idx = append(idx, i)
		}
	}
	res, err := cli.Read(ctx, req)
	if err != nil {
		return fmt.Errorf("opcua: read: %w", err)
	}
	if len(res.Results) != len(idx) {
		return fmt.Errorf("opcua: read of %d nodes returned %d results", len(idx), len(res.Results))
	}
	for k, i := range idx {
		b.Results[i] = result(b.Tags[i], res.Results[k])
	}
	return nil
}

// result converts a data value to the tag's value.
func result(t *drivers.Tag, dv *ua.DataValue) drivers.Result {
	if dv == nil {
		return drivers.Result{Err: &drivers.TagError{Err: fmt.Errorf("node %s: no value", t.Addr)}}
	}
	if dv.Status != ua.StatusOK {
		return drivers.Result{Err: &drivers.TagError{Err: fmt.Errorf("node %s: %v", t.Addr, dv.Status)}}
	}
	v, err := convert(t, dv.Value)
	if err != nil {
		return drivers.Result{Err: &drivers.TagError{Err: err}}
	}
	return drivers.Result{Value: v}
}

func convert(t *drivers.Tag, v *ua.Variant) (drivers.Value, error) {
	if v == nil {
		return drivers.Value{}, fmt.Errorf("node %s: no value", t.Addr)
	}
	switch x := v.Value().(type) {
	case bool:
		if t.Type == drivers.Bool {
			return drivers.BoolValue(x), nil
		}
		f := 0.0
		if x {
			f = 1
		}
		return drivers.NumberValue(t.Engineering(f)), nil
	case string:
		return drivers.TextValue(x), nil
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
		f := v.Float()
		switch x.(type) {
		case int8, int16, int32, int64:
			f = float64(v.Int())
		case uint8, uint16, uint32, uint64:
			f = float64(v.Uint())
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return drivers.Value{}, fmt.Errorf("node %s holds %v", t.Addr, f)
		}
		if t.Type == drivers.Bool {
			return drivers.BoolValue(f != 0), nil
		}
		return drivers.NumberValue(t.Engineering(f)), nil
	case nil:
		return drivers.Value{}, fmt.Errorf("node %s: empty value", t.Addr)
	default:
		return drivers.TextValue(strings.TrimSpace(fmt.Sprint(x))), nil
	}
}

// variant is the value to write, in the tag's DATA_TYPE (servers refuse a
// type other than the node's: give the tag the node's type).
func variant(t *drivers.Tag, v drivers.Value) (*ua.Variant, error) {
	switch t.Type {
	case drivers.Bool:
		return ua.NewVariant(v.Bool)
	case drivers.String:
		return ua.NewVariant(v.Str)
	}
	raw, err := t.Raw(v.Num)
	if err != nil {
		return nil, err
	}
	switch t.Type {
	case drivers.Int16:
		return ua.NewVariant(int16(raw))
	case drivers.UInt16:
		return ua.NewVariant(uint16(raw))
	case drivers.Int32:
		return ua.NewVariant(int32(raw))
	case drivers.UInt32:
		return ua.NewVariant(uint32(raw))
	case drivers.Float32:
		return ua.NewVariant(float32(raw))
	}
	return ua.NewVariant(raw)
}

// Write implements drivers.Device.
func (d *Device) Write(ctx context.Context, t *drivers.Tag, v drivers.Value) error {
	n, ok := t.Addr.(*ua.NodeID)
	if !ok {
		return &drivers.TagError{Err: fmt.Errorf("tag %s has no NODE_ID", t.Name)}
	}
	vr, err := variant(t, v)
	if err != nil {
		return &drivers.TagError{Err: err}
	}
	cli := d.client()
	if cli == nil {
		return errClosed
	}
	res, err := cli.Write(ctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{NodeID: n, AttributeID: ua.AttributeIDValue,
		Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: vr}}}})
	if err != nil {
		return fmt.Errorf("opcua: write: %w", err)
	}
	if len(res.Results) != 1 {
		return fmt.Errorf("opcua: write returned %d results", len(res.Results))
	}
	if res.Results[0] != ua.StatusOK {
		return &drivers.TagError{Err: fmt.Errorf("node %s: %v", n, res.Results[0])}
	}
	return nil
}

// keepAlive is how often a subscribed session is checked.
const keepAlive = time.Second

// serverTime is Server_ServerStatus_CurrentTime (i=2258).
var serverTime = ua.NewNumericNodeID(0, 2258)

// ping reads the server's clock.
func (d *Device) ping(ctx context.Context) error {
	cli := d.client()
	if cli == nil {
		return errClosed
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	res, err := cli.Read(rctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: serverTime, AttributeID: ua.AttributeIDValue}}})
	if err != nil {
		return fmt.Errorf("opcua: keep-alive read: %w", err)
	}
	if len(res.Results) != 1 || res.Results[0].Status != ua.StatusOK {
		return errors.New("opcua: keep-alive read returned no server time")
	}
	return nil
}

// Subscribe implements drivers.Subscriber: one subscription per batch,
// one monitored item per tag (its client handle is the tag's index).
func (d *Device) Subscribe(ctx context.Context, b *drivers.Batch, every time.Duration, fn func(i int, r drivers.Result)) error {
	cli := d.client()
	if cli == nil {
		return errClosed
	}
	notes := make(chan *opcua.PublishNotificationData, 64)
	sub, err := cli.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: every}, notes)
	if err != nil {
		return fmt.Errorf("opcua: subscribe: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		sub.Cancel(cctx)
		cancel()
	}()
	var reqs []*ua.MonitoredItemCreateRequest
	var idx []int
	for i, t := range b.Tags {
		if n, ok := t.Addr.(*ua.NodeID); ok {
			r := opcua.NewMonitoredItemCreateRequestWithDefaults(n, ua.AttributeIDValue, uint32(i))
			r.RequestedParameters.SamplingInterval = float64(every / time.Millisecond)
			reqs = append(reqs, r)
			idx = append(idx, i)
		}
	}
	res, err := sub.Monitor(ctx, ua.TimestampsToReturnNeither, reqs...)
	if err != nil {
		return fmt.Errorf("opcua: monitor: %w", err)
	}
	for k, r := range res.Results {
		if k < len(idx) && r.StatusCode != ua.StatusOK {
			i := idx[k]
			fn(i, drivers.Result{Err: &drivers.TagError{Err: fmt.Errorf("node %s: %v", b.Tags[i].Addr, r.StatusCode)}})
		}
	}
	// A subscription says nothing when the server goes away: a read of
	// the server's clock every second proves the session alive.
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-alive.C:
			if err := d.ping(ctx); err != nil {
				return err
			}
		case n := <-notes:
			if n.Error != nil {
				return fmt.Errorf("opcua: subscription: %w", n.Error)
			}
			dc, ok := n.Value.(*ua.DataChangeNotification)
			if !ok {
				continue
			}
			for _, item := range dc.MonitoredItems {
				i := int(item.ClientHandle)
				if i < len(b.Tags) {
					fn(i, result(b.Tags[i], item.Value))
				}
			}
		}
	}
}
