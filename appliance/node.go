package appliance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gantry/appliance/config"
	"gantry/broker"
	"gantry/broker/auth"
	"gantry/broker/store"
	"gantry/cluster"
	"gantry/cluster/dataplane"
	"gantry/drivers/engine"
	"gantry/lot/runtime"
)

// Version is the build's version, set with -ldflags at release time.
var Version = "dev"

// Node is one running Gantry node.
type Node struct {
	cfg     config.Config
	log     *slog.Logger
	started time.Time

	Broker   *broker.Server
	Users    *auth.Store
	authn    *auth.Authenticator
	throttle *auth.Throttle
	store    *store.Store // nil without durability

	// LoT runs the deployed LoT definitions and decides access.
	LoT *runtime.Engine
	// drivers runs the deployed connectors (wire_drivers.go).
	drivers *engine.Manager
	// Cluster is the control plane; nil when clustering is off, and then
	// clusterOff says why when it was asked for.
	Cluster    *cluster.Node
	clusterOff []string
	dataPlane  *dataplane.Plane // nil without clustering or a cluster user

	usersTopic   usersTopic          // $SYS/Coreflux/Config/Users (wire_users.go)
	clusterUsers *clusterUsers       // nil without clustering (wire_cluster_users.go)
	lotDefs      *clusterDefs        // LoT's definitions store, through the cluster when clustered (wire_cluster_lot.go)
	placement    *workPlacement      // where timers, ON START and exclusive connectors run; nil with clustering off (wire_cluster_work.go)
	boot         string              // random, drawn at start: this process in the cluster's LoT session (wire_cluster_work.go)
	keptSync     *keptSync           // KEEP TOPIC values to and from the other nodes; nil with clustering off (wire_cluster_kept.go)
	sessions     *dataplane.Sessions // sessions that follow the client; nil without the data plane (wire_sessions.go)

	tls   *tlsFiles      // nil without a TLS listener
	level *slog.LevelVar // nil when the logger was not made by NewLogger

	mu        sync.Mutex // guards listeners
	listeners map[string]net.Listener
	https     []*http.Server
	stop      chan struct{} // closed by Shutdown
	ready     atomic.Bool   // every listener bound and the stores open
	live      *liveness     // broker round-trip probe (wire_systemd.go); set by Start
	wg        sync.WaitGroup

	shutdownOnce sync.Once // Shutdown runs once; later calls return its result
	shutdownErr  error     // written inside shutdownOnce

	restart     chan struct{} // closed by requestRestart (see Restart)
	restartOnce sync.Once
}

// Restart is closed when the node asks to be started again, because
// settings it reads only at start changed (the setup wizard's cluster,
// node name or durability). The command line then shuts the node down
// and executes itself again with the same arguments; an embedding
// program may do the same or ignore it.
func (n *Node) Restart() <-chan struct{} { return n.restart }

// requestRestart closes Restart's channel, once.
func (n *Node) requestRestart(why string) {
	n.restartOnce.Do(func() {
		n.log.Info("restart requested", "component", "appliance", "why", why)
		close(n.restart)
	})
}

// New builds a node from a validated configuration. It opens the user
// store, creating the administrator root on first start. level, when not
// nil, is the level of log that Reload changes.
func New(cfg config.Config, log *slog.Logger, level *slog.LevelVar) (*Node, error) {
	b, err := broker.New(brokerOptions(&cfg, log))
	if err != nil {
		return nil, err
	}
	users, err := OpenUsers(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := ensureAdministrator(users, cfg.DataDir, log); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: log, level: level, Broker: b, Users: users,
		listeners: make(map[string]net.Listener), stop: make(chan struct{}), restart: make(chan struct{})}
	n.throttle = auth.NewThrottle()
	n.authn = auth.NewAuthenticator(users, n.throttle, log)
	b.SetAuthenticator(n.authn)
	if err := n.openDrivers(); err != nil {
		return nil, err
	}
	if err := n.openLoT(); err != nil {
		return nil, err
	}
	if cfg.Durability.Enabled {
		if err := n.openDurability(); err != nil {
			return nil, err
		}
	}
	if err := n.openCluster(); err != nil {
		if n.store != nil {
			n.store.Close()
		}
		return nil, err
	}
	return n, nil
}

// OpenUsers opens the user store of a data directory.
func OpenUsers(dataDir string) (*auth.Store, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("DataDir %q: %w", dataDir, err)
	}
	return auth.Open(dataDir)
}

func brokerOptions(cfg *config.Config, log *slog.Logger) broker.Options {
	m := &cfg.Mqtt
	o := broker.DefaultOptions()
	o.MaxPacketSize = uint32(m.MaxPacketSize)
	o.ReceiveMaximum = uint16(m.ReceiveMaximum)
	o.MaxInflight = uint16(m.MaxInflight)
	o.MaxQueuedMessages = m.MaxQueuedMessages
	if m.MaxSessionExpirySeconds != 0 {
		o.MaxSessionExpiry = m.MaxSessionExpirySeconds
	}
	o.TopicAliasMaximum = uint16(m.TopicAliasMaximum)
	o.MaxKeepAlive = uint16(m.MaxKeepAliveSeconds)
	o.ServerKeepAlive = uint16(m.ServerKeepAliveSeconds)
	o.MaxConnections = m.MaxConnections
	o.MaxConnectRate = m.MaxConnectRatePerSecond
	o.MaxSubscriptionsPerClient = m.MaxSubscriptionsPerClient
	o.MaxTopicLevels = m.MaxTopicLevels
	o.ConnectTimeout = time.Duration(m.ConnectTimeoutSeconds) * time.Second
	o.MaxOutboundBytes = m.MaxOutboundBytesPerClient
	if o.MaxOutboundBytes == 0 {
		o.MaxOutboundBytes = -1 // unlimited; 0 would mean the broker's default
	}
	o.StuckTimeout = time.Duration(m.StuckClientTimeoutSeconds) * time.Second
	o.RetainDisabled = !m.RetainAvailable
	o.Logger = log
	return o
}

// Start binds every configured listener, then serves them. A port that
// cannot be bound stops start-up with an error naming it.
func (n *Node) Start() error {
	n.started = time.Now()
	if err := n.LoT.Start(); err != nil {
		return err
	}
	m := &n.cfg.Mqtt
	lc := broker.ListenerConfig{AllowAnonymous: m.AllowAnonymous, AnonymousLoopbackOnly: m.AnonymousLoopbackOnly,
		MaxConnections: m.MaxConnectionsPerListener}
	if m.Port != 0 {
		l, err := n.listen("mqtt", m.BindIP, m.Port)
		if err != nil {
			return err
		}
		lc.Name = "tcp"
		n.serveMQTT(l, lc)
	}
	if m.CertFile != "" && m.TlsPort != 0 {
		if err := n.startTLS(lc); err != nil {
			return err
		}
	}
	if m.WebSocketPort != 0 {
		l, err := n.listen("websocket", m.BindIP, m.WebSocketPort)
		if err != nil {
			return err
		}
		lc.Name = "ws"
		mux := http.NewServeMux()
		mux.Handle("/mqtt", n.Broker.WebSocketHandler(lc))
		n.serveHTTP(l, mux)
	}
	if sec := n.cfg.Ops.SysIntervalSeconds; sec > 0 {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.runSys(time.Duration(sec)*time.Second, n.stop)
		}()
	}
	if n.cfg.Ops.Port != 0 {
		l, err := n.listen("ops", n.cfg.Ops.BindIP, n.cfg.Ops.Port)
		if err != nil {
			return err
		}
		// Operations requests are short (and the peer protocol of the
		// cluster arrives here): a client trickling a request body must
		// not hold a goroutine. A signed large body of the peer protocol
		// is given the time its length takes (signing.Requests moves the
		// deadlines for it), at most two at once.
		n.serveHTTP(l, n.opsHandler(), func(s *http.Server) {
			s.ReadTimeout, s.WriteTimeout, s.IdleTimeout = 10*time.Second, 30*time.Second, 2*time.Minute
		})
	}
	n.startPlacement() // wire_cluster_work.go
	if n.Cluster != nil {
		n.startClusterUsers()
		n.startClusterLoT()
		n.startKeptSync()
		n.startSessions() // wire_sessions.go
		n.Cluster.Start()
		if n.dataPlane != nil {
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.runDataPlane(n.stop)
			}()
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.runClusterSys(clusterSysInterval, n.stop)
		}()
	}
	n.publishUsers()
	if err := n.startSystemd(); err != nil {
		return err
	}
	n.ready.Store(true)
	return nil
}

func (n *Node) startTLS(lc broker.ListenerConfig) error {
	m := &n.cfg.Mqtt
	files, err := newTLSFiles(m.CertFile, m.KeyFile, m.ClientCaFile)
	if err != nil {
		return err
	}
	l, err := n.listen("mqtt-tls", m.BindIP, m.TlsPort)
	if err != nil {
		return err
	}
	n.tls = files
	lc.Name = "tls"
	n.serveMQTT(tls.NewListener(l, files.Config()), lc)
	return nil
}

// Reload applies what can change without a restart (SIGHUP): the TLS
// certificate, key and client CA files are read again, and the log level
// is set from level.
func (n *Node) Reload(level string) error {
	if n.level != nil {
		var l slog.Level
		if err := l.UnmarshalText([]byte(level)); err == nil {
			n.level.Set(l)
		}
	}
	if n.tls != nil {
		if err := n.tls.Reload(); err != nil {
			n.log.Error("TLS reload failed; the previous certificate stays in use", "component", "appliance", "err", err)
			return err
		}
		n.log.Info("TLS files reloaded", "component", "appliance")
	}
	return nil
}

func (n *Node) listen(name, ip string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s on %s: %w", name, addr, err)
	}
	n.mu.Lock()
	n.listeners[name] = l
	n.mu.Unlock()
	n.log.Info("listening", "component", "appliance", "listener", name, "addr", l.Addr().String())
	return l, nil
}

func (n *Node) serveMQTT(l net.Listener, lc broker.ListenerConfig) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.Broker.Serve(l, lc); err != nil && !errors.Is(err, broker.ErrServerClosed) {
			n.log.Error("listener failed", "component", "appliance", "listener", lc.Name, "err", err)
		}
	}()
}

func (n *Node) serveHTTP(l net.Listener, h http.Handler, opts ...func(*http.Server)) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	for _, o := range opts {
		o(srv)
	}
	n.mu.Lock()
	n.https = append(n.https, srv)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server failed", "component", "appliance", "addr", l.Addr().String(), "err", err)
		}
	}()
}

// Addr returns the bound address of a listener ("mqtt", "mqtt-tls",
// "websocket", "ops"), or nil.
func (n *Node) Addr(name string) net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.listeners[name]; l != nil {
		return l.Addr()
	}
	return nil
}

// Shutdown stops the HTTP servers and the broker (MQTT 5 clients receive
// DISCONNECT 0x8B), bounded by ctx. It may be called more than once
// (a signal handler and a deferred call): later calls wait for the first
// and return its result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(ctx) })
	return n.shutdownErr
}

func (n *Node) shutdown(ctx context.Context) error {
	n.mu.Lock()
	https := n.https
	n.mu.Unlock()
	n.stopSystemd()
	n.ready.Store(false)
	close(n.stop)
	for _, s := range https {
		s.Shutdown(ctx)
	}
	n.LoT.Stop()
	n.closeDrivers()
	cerr := n.shutdownCluster(ctx)
	err := n.Broker.Shutdown(ctx)
	if err == nil {
		err = cerr
	}
	n.wg.Wait()
	if n.store != nil {
		// After the broker: its last session records go in first.
		if cerr := n.store.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// ensureAdministrator creates root when the user store has no
// administrator (see auth.EnsureRoot) and says so; while the initial
// password file is still there it says so again, once per start.
func ensureAdministrator(users *auth.Store, dataDir string, log *slog.Logger) error {
	path, err := auth.EnsureRoot(users, dataDir)
	switch {
	case err != nil:
		return err
	case path != "":
		log.Warn("no administrator in the user store: created the administrator root with a random password; read it, then delete the file",
			"component", "auth", "file", path)
	default:
		if pending := auth.InitialRootPending(dataDir); pending != "" {
			log.Warn("the administrator root's initial password is still on disk; read it, change it, then delete the file",
				"component", "auth", "file", pending)
		}
	}
	return nil
}
