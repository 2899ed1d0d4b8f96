package opcua

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"

	"gantry/broker/topic"
	"gantry/drivers"
)

// ServerConfig is OPCUA_SERVER_CONFIG: an OPC UA server whose variables
// are the tags, each holding the current value of its topic.
type ServerConfig struct {
	Bind       string
	Port       int
	Advertised string
	Tags       []*drivers.Tag
	ids        map[*drivers.Tag]*ua.NodeID
}

// serverNamespace is the namespace URI of the tags (index 1).
const serverNamespace = "urn:gantry:connectors"

// ParseServer reads an OPCUA_SERVER. A tag's node is ns=1;s=<NODE_ID>,
// NODE_ID defaulting to the tag's name.
func ParseServer(s *drivers.Spec) *ServerConfig {
	c := &ServerConfig{ids: map[*drivers.Tag]*ua.NodeID{}}
	cs := s.Config
	if cs == nil {
		return c
	}
	c.Bind = cs.String("BIND_IP", "0.0.0.0")
	c.Port = cs.Int("PORT", 4840, 1, 65535)
	c.Advertised = cs.String("ADVERTISED_HOST", "")
	seen := map[string]string{}
	for _, t := range s.Tags() {
		name := t.Settings.String("NODE_ID", t.Name)
		if other, ok := seen[name]; ok {
			t.Settings.Errorf(t.Settings.Block.KindPos, "%s: node %q is tag %s's too", t.Settings.Where(), name, other)
		}
		seen[name] = t.Name
		if t.Writable && t.WriteTopic != "" {
			if err := topic.ValidateName(t.WriteTopic); err != nil {
				t.Settings.Errorf(t.Settings.Block.KindPos, "%s: DESTINATION_TOPIC must be a topic without wildcards (%v)", t.Settings.Where(), err)
			}
		}
		c.ids[t] = ua.NewStringNodeID(1, name)
		c.Tags = append(c.Tags, t)
	}
	return c
}

// Describe names the listener.
func (c *ServerConfig) Describe() string {
	d := "opc.tcp://" + c.Bind + ":" + strconv.Itoa(c.Port)
	if c.Advertised != "" {
		d += " as opc.tcp://" + c.Advertised + ":" + strconv.Itoa(c.Port)
	}
	return d
}

// Server serves the tags over OPC UA (security None, and
// Basic256Sha256 SignAndEncrypt), with the certificate of its PKI
// directory (see SetPKIDir): the same file on every node gives a SCADA
// client one server identity behind ADVERTISED_HOST.
type Server struct {
	cfg     *ServerConfig
	onWrite func(t *drivers.Tag, v drivers.Value)
	srv     *server.Server
	ns      *tagSpace

	pkiDir string // see SetPKIDir

	mu           sync.Mutex // guards vals, live and identityFile
	vals         map[*drivers.Tag]drivers.Value
	live         *server.Server // srv once started
	identityFile string         // where the certificate came from ("" when made for one start)
}

// SetPKIDir sets the directory whose own/private holds the server's
// certificate and key (see serverIdentity); call it before Start. Without
// one, Start makes a certificate for that start only.
func (s *Server) SetPKIDir(dir string) { s.pkiDir = dir }

// IdentityFile is the file the running server's certificate came from,
// or "" when it was made for this start only.
func (s *Server) IdentityFile() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identityFile
}

// NewServer makes a server; Start binds it.
func NewServer(c *ServerConfig, onWrite func(t *drivers.Tag, v drivers.Value)) *Server {
	return &Server{cfg: c, onWrite: onWrite, vals: map[*drivers.Tag]drivers.Value{}}
}

// tagSpace is the namespace of the tags: reads come from the current
// values, a client's write of a writable tag goes to onWrite.
//
// It is registered first, as ns=1, and delegates the nodes to a
// NodeNameSpace registered after it (ns=2, holding the objects folder the
// tags hang from): gopcua's NodeNameSpace has no write hook, and the
// server finds a node's namespace by the node id's index.
type tagSpace struct {
	*server.NodeNameSpace
	id    uint16
	s     *Server
	byKey map[string]*drivers.Tag
}

func (ns *tagSpace) Name() string    { return serverNamespace }
func (ns *tagSpace) ID() uint16      { return ns.id }
func (ns *tagSpace) SetID(id uint16) { ns.id = id }

func (ns *tagSpace) SetAttribute(nid *ua.NodeID, attr ua.AttributeID, dv *ua.DataValue) ua.StatusCode {
	t := ns.byKey[nid.String()]
	if t == nil || attr != ua.AttributeIDValue {
		return ns.NodeNameSpace.SetAttribute(nid, attr, dv)
	}
	if !t.Writable {
		return ua.StatusBadNotWritable
	}
	if dv == nil || dv.Value == nil {
		return ua.StatusBadTypeMismatch
	}
	v, err := convert(t, dv.Value)
	if err != nil {
		return ua.StatusBadTypeMismatch
	}
	if v.Kind == drivers.Number {
		if _, err := t.Raw(v.Num); err != nil {
			return ua.StatusBadOutOfRange
		}
	}
	ns.s.onWrite(t, v)
	return ua.StatusOK
}

// Start binds and serves; a failed bind is returned, not retried.
func (s *Server) Start() error {
	// gopcua's listener shares a port already bound: bind it plainly
	// first, so that a port in use is reported.
	addr := net.JoinHostPort(s.cfg.Bind, strconv.Itoa(s.cfg.Port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("opcua server: bind %s: %w", addr, err)
	}
	l.Close()
	hosts := []string{s.cfg.Bind}
	if s.cfg.Advertised != "" {
		hosts = []string{s.cfg.Advertised, s.cfg.Bind}
	}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	idn, err := serverIdentity(s.pkiDir, hosts)
	if err != nil {
		return err
	}
	der, key := idn.cert, idn.key
	s.mu.Lock()
	s.identityFile = idn.from
	s.mu.Unlock()
	opts := []server.Option{server.EndPoint(s.cfg.Bind, s.cfg.Port),
		server.EnableSecurity("None", ua.MessageSecurityModeNone),
		server.EnableSecurity("Basic256Sha256", ua.MessageSecurityModeSignAndEncrypt),
		server.EnableAuthMode(ua.UserTokenTypeAnonymous), server.Certificate(der), server.PrivateKey(key)}
	if s.cfg.Advertised != "" {
		opts = append(opts, server.EndPoint(s.cfg.Advertised, s.cfg.Port))
	}
	srv := server.New(opts...)
	ns := &tagSpace{s: s, byKey: map[string]*drivers.Tag{}}
	if idx := srv.AddNamespace(ns); idx != 1 {
		return fmt.Errorf("opcua server: the tags' namespace got index %d, want 1", idx)
	}
	base := server.NewNodeNameSpace(srv, serverNamespace+":objects")
	ns.NodeNameSpace = base
	root, err := srv.Namespace(0)
	if err != nil {
		return err
	}
	if r, ok := root.(*server.NodeNameSpace); ok {
		r.Objects().AddRef(base.Objects(), id.HasComponent, true)
	}
	for _, t := range s.cfg.Tags {
		nid := s.cfg.ids[t]
		ns.byKey[nid.String()] = t
		n := server.NewVariableNode(nid, nid.StringID(), func() *ua.DataValue { return s.value(t) })
		base.AddNode(n)
		base.Objects().AddRef(n, id.HasComponent, true)
	}
	s.srv, s.ns = srv, ns
	if err := srv.Start(context.Background()); err != nil {
		return fmt.Errorf("opcua server: bind %s: %w", addr, err)
	}
	s.mu.Lock()
	s.live = srv
	s.mu.Unlock()
	return nil
}

// value is a tag's current value as a data value.
func (s *Server) value(t *drivers.Tag) *ua.DataValue {
	s.mu.Lock()
	v, ok := s.vals[t]
	s.mu.Unlock()
	if !ok {
		return &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: ua.StatusBadWaitingForInitialData}
	}
	vr, err := variant(t, v)
	if err != nil {
		return &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: ua.StatusBadOutOfRange}
	}
	return &ua.DataValue{EncodingMask: ua.DataValueValue | ua.DataValueSourceTimestamp, Value: vr, SourceTimestamp: time.Now()}
}

// Set records a tag's current value and notifies subscribers.
func (s *Server) Set(t *drivers.Tag, v drivers.Value) {
	s.mu.Lock()
	s.vals[t] = v
	live := s.live
	s.mu.Unlock()
	if live != nil {
		live.ChangeNotification(s.cfg.ids[t])
	}
}

// Stop closes the listener and the sessions.
func (s *Server) Stop() {
	s.mu.Lock()
	live := s.live
	s.live = nil
	s.mu.Unlock()
	if live != nil {
		live.Close()
	}
}
