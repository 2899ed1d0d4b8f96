package broker

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/topic"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("broker: server closed")

// Server is the MQTT broker. Create it with New, add hooks, then Serve one
// or more listeners. Hooks must be set before the first Serve.
type Server struct {
	opts Options

	subs     *topic.Tree[*session]
	retained RetainedStore
	persist  Persister // nil: state lives in memory only
	// resends are the peer messages whose routing had a failed write:
	// whom their resend is owed to (resend.go).
	resends peerResends

	auth  Authenticator
	authz Authorizer
	// reader is authz as a ReadAuthorizer, nil when it is not one.
	reader ReadAuthorizer
	// aclMu orders subscription decisions: SUBSCRIBE holds it shared from
	// its decision until the subscription is recorded,
	// ReauthorizeSubscriptions exclusively (access.go).
	aclMu sync.RWMutex
	// lingering holds a token per connection draining after a DISCONNECT
	// (linger.go).
	lingering chan struct{}
	hooks     []PublishHook
	subHook   SubscribeHook  // nil: none
	claimer   SessionClaimer // nil: none (handover.go)
	// publishMayBlock: a hook or the authorizer is not NonBlocking, so a
	// publish may wait in them (see conn.handle). Set before Serve.
	publishMayBlock bool
	observers       []Observer

	mu        sync.Mutex          // guards sessions, listeners, conns, closed
	sessions  map[string]*session // by client identifier
	listeners []net.Listener
	conns     map[*conn]struct{}
	closed    bool

	routers sync.Pool // *router scratch space for routing
	// deferred is where readers hand over the subscribers' writers they
	// run themselves (see conn.sendDeferred).
	deferred deferredStack
	stats    Stats
	limits   limits // client-protection limits' state (connect.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the server starts
}

// Stats are the broker's counters, updated atomically; read them with
// their Load methods.
type Stats struct {
	Connections      atomic.Int64
	Connects         atomic.Uint64
	Disconnects      atomic.Uint64
	MessagesIn       atomic.Uint64
	MessagesOut      atomic.Uint64
	BytesIn          atomic.Uint64
	BytesOut         atomic.Uint64
	Dropped          atomic.Uint64 // queue full, expired, or too large for the client
	AuthFailures     atomic.Uint64
	RefusedPublishes atomic.Uint64
	MalformedPackets atomic.Uint64
	StoreFailures    atomic.Uint64 // publishes refused because the store failed to write
	StoreWithdrawn   atomic.Uint64 // queued deliveries taken back: their write failed and their sender sends them again (entryWrite)
	// HandoverDuplicates counts queued deliveries dropped when a session
	// imported here (ImportSession) carried the same message, named by its
	// record (Message.Record): published while the session moved, it
	// reached both nodes.
	HandoverDuplicates atomic.Uint64
	Congestions        atomic.Uint64 // times a session queue filled up and publishers were paused
	PublisherPauses    atomic.Uint64 // times a publisher's reader waited for a congested session

	// Client-protection limits (see Options), counted when they bite.
	ConnectionsRefused      atomic.Uint64 // CONNECT beyond Options.MaxConnections or ListenerConfig.MaxConnections
	ConnectRateRefused      atomic.Uint64 // CONNECT beyond Options.MaxConnectRate
	ConnectTimeouts         atomic.Uint64 // no CONNECT within Options.ConnectTimeout
	TopicLevelsExceeded     atomic.Uint64 // topic or filter deeper than Options.MaxTopicLevels
	SlowConsumerDrops       atomic.Uint64 // QoS 0 messages dropped by Options.MaxOutboundBytes (also in Dropped)
	SlowConsumerDisconnects atomic.Uint64 // connections closed by Options.StuckTimeout

	// MessagesInByQoS and MessagesOutByQoS split MessagesIn and
	// MessagesOut by the QoS of the PUBLISH packet.
	MessagesInByQoS  [3]atomic.Uint64
	MessagesOutByQoS [3]atomic.Uint64
}

// QueueCounts returns the messages waiting in session queues and the QoS
// 1/2 messages in flight to clients, summed over the sessions. It takes
// every session's lock in turn: for metrics, not for the hot path, which
// keeps no global counter of them so that routing does not contend on one
// cache line.
func (s *Server) QueueCounts() (queued, inflight int) {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		sess.mu.Lock()
		queued += sess.queue.len()
		inflight += len(sess.inflight)
		sess.mu.Unlock()
	}
	return queued, inflight
}

// New returns a server with opts (zero fields take their defaults).
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:     opts,
		subs:     new(topic.Tree[*session]),
		retained: NewMemoryRetained(),
		sessions: make(map[string]*session),
		conns:    make(map[*conn]struct{}),
		ctx:      ctx,
		cancel:   cancel,
	}
	s.routers.New = func() any { return newRouter() }
	s.lingering = make(chan struct{}, lingerLimit)
	return s, nil
}

// SetAuthenticator sets the credential check (nil: anonymous policy only).
func (s *Server) SetAuthenticator(a Authenticator) { s.auth = a }

// SetAuthorizer sets the publish/subscribe access check (nil: allow all).
func (s *Server) SetAuthorizer(a Authorizer) {
	s.authz = a
	s.reader, _ = a.(ReadAuthorizer)
	s.notePublishMayBlock()
	s.ReauthorizeSubscriptions() // those restored from the store
}

// notePublishMayBlock records whether a publish may wait in a hook or the
// authorizer.
func (s *Server) notePublishMayBlock() {
	s.publishMayBlock = false
	if _, ok := s.authz.(NonBlocking); s.authz != nil && !ok {
		s.publishMayBlock = true
	}
	for _, h := range s.hooks {
		if _, ok := h.(NonBlocking); !ok {
			s.publishMayBlock = true
		}
	}
}

// SetRetainedStore replaces the in-memory retained store.
func (s *Server) SetRetainedStore(r RetainedStore) { s.retained = r }

// AddPublishHook appends a hook to the publish pipeline.
func (s *Server) AddPublishHook(h PublishHook) {
	s.hooks = append(s.hooks, h)
	s.notePublishMayBlock()
}

// AddObserver registers an event observer.
func (s *Server) AddObserver(o Observer) { s.observers = append(s.observers, o) }

// Stats returns the live counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Retained returns the retained message of topic (a topic name, not a
// filter), or false. The message must not be modified.
func (s *Server) Retained(topic string) (*Message, bool) {
	var found *Message
	s.retained.Match(topic, func(m *Message) bool {
		if m.Topic == topic {
			found = m
			return false
		}
		return true
	})
	return found, found != nil
}

// RetainedCount returns the number of retained messages.
func (s *Server) RetainedCount() int { return s.retained.Len() }

// SubscriptionCount returns the number of subscriptions of all sessions.
func (s *Server) SubscriptionCount() int { return s.subs.Count() }

// SessionCount returns the number of sessions, connected or not.
func (s *Server) SessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) emit(e Event) {
	for _, o := range s.observers {
		o.Observe(e)
	}
}

// goTracked starts f as a goroutine the server waits for on Close.
func (s *Server) goTracked(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Serve accepts connections on l until Close. It returns ErrServerClosed
// after Close.
func (s *Server) Serve(l net.Listener, lc ListenerConfig) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners = append(s.listeners, l)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(backoff*2, 5*time.Millisecond), time.Second)
				s.opts.Logger.Warn("accept failed; retrying", "component", "broker", "listener", lc.Name, "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
					return ErrServerClosed
				}
				continue
			}
			return err
		}
		backoff = 0
		s.ServeConn(nc, lc)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// ServeConn serves one accepted network connection (used by listeners that
// accept themselves, such as WebSocket). It returns at once.
func (s *Server) ServeConn(nc net.Conn, lc ListenerConfig) {
	c := newConn(s, nc, lc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.goTracked(c.serve)
}

// Close stops the listeners, disconnects every client (v5 clients get
// DISCONNECT 0x8B) and waits for every goroutine the server started.
func (s *Server) Close() error {
	return s.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx: when ctx ends first, remaining
// connections are closed without waiting for their buffers to drain.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ls := s.listeners
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range conns {
		c.disconnect(errShuttingDown)
	}
	s.stopTimers()
	done := make(chan struct{})
	go func() {
		s.cancel()
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range conns {
			c.nc.Close()
		}
		<-done
		return ctx.Err()
	}
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
