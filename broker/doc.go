// Package broker is Gantry's MQTT 3.1, 3.1.1 and 5.0 server: connections,
// sessions, the subscription tree, retained messages, wills, flow control
// and the in-process client. It knows nothing of the cluster, LoT or the
// device drivers; they plug in through the small interfaces of hooks.go
// (Authenticator, Authorizer, PublishHook, Observer, RetainedStore).
//
// # Goroutines
//
// Each network connection has one reader goroutine (conn.serve), which
// decodes packets and routes the messages it receives itself; it hands
// itself over to a fresh goroutine after CONNECT and after 2 s without a
// byte, so an idle connection keeps a small stack, and it holds a pooled
// read buffer only while bytes arrive (readbuf.go). A writer goroutine
// runs only while something is queued for the connection: wakeWriter
// starts it, and it exits once it has written everything, coalescing what
// is queued into one write call (on TLS and WebSocket, pieces of at most
// 64 KiB); its buffers come from a pool. The reader of a publisher takes
// the writer's part itself where that is cheaper: before it reads on, it
// writes what it routed to up to four subscribers whose writers were idle,
// then the publisher's acknowledgements, each with one non-blocking write
// (conn.sendDeferred); what a socket does not take at once, a writer
// goroutine sends. A reader whose socket is empty hands those subscribers
// to the server's deferred stack and yields first, so that on one core the
// readers made ready by one poll deliver in arrival order, before any of
// their acknowledgements (deferredStack). Plain TCP sockets are read and written with raw system
// calls (package rawsock). A WebSocket connection has one more goroutine,
// which pumps its frames into a pipe (see wsConn).
// Routing never blocks on a socket: it appends a delivery to each matching
// session's bounded queue and wakes that session's writer; a full queue of
// a connected client pauses the publishers instead (backpressure).
// Session timers (expiry, will delay) run on time.AfterFunc goroutines.
// Every other goroutine is started through Server.goTracked and ends on
// Shutdown.
//
// # Locks
//
// Lock order: Server.aclMu (subscription decisions, access.go) before
// Server.mu, session.mu and the subscription tree; conn.ackMu before
// session.mu; Server.mu before session.mu;
// session.mu before conn.outMu; session.mu before the persister's own lock
// (Persist is called under session.mu and never blocks on I/O). The
// subscription tree and the retained index have their own read-write
// locks and are never held while another lock is taken, as is the
// deferred stack's mutex, a store ticket's and the peer resends' (resend.go).
// No lock is held during network I/O.
//
// # A failed write
//
// A queued delivery whose write failed is taken back from its session's
// queue when its publisher sends the message again, a client refused with
// 0x80 or a peer node that got no confirmation (durable.go, entryWrite):
// the session then holds the message once, from the attempt that was
// written. A peer's resend names the same record (Message.Record) and
// reaches only the sessions that took theirs back (resend.go); a later
// record of the same peer written meanwhile is taken back too, so that
// the resend queues them in the peer's order (peerorder.go).
//
// # Sessions between nodes
//
// handover.go is the seam the cluster moves sessions through: a
// SessionClaimer sees every network CONNECT before its session attaches
// (it may block: it asks the other nodes), TakeOver closes this node's
// connection of a client (0x8E), ExportSession removes a session and
// returns it whole, ImportSession adds one. Without a claimer nothing of
// it runs.
//
// # Publish pipeline
//
// An inbound QoS 1/2 publish passes the PublishHooks in order. A hook may
// defer its verdict; the reader goes on with the next packet, and
// acknowledgements and routing happen in arrival order when the head of
// the connection's pending queue completes (conn.drainAcksLocked).
//
// An in-process publish (Server.PublishMessage: LoT, connectors, wills,
// the console) passes the same hooks and routing, and then waits where a
// network publisher's acknowledgement waits: for QoS 1/2, for the store
// barrier behind the writes its routing caused (a failed write is
// returned as 0x80, as a PUBACK would carry it), and for a congested
// subscriber (Server.awaitRoom, shared with the network reader). It
// blocks its caller's goroutine meanwhile: an in-process publisher needs
// no pending queue, since its next publish starts after this one ended.
//
// # Access on the hot path
//
// A subscription the Authorizer grants whole costs routing nothing but
// one atomic load per delivery (session.readCheck); only a session with a
// subscription that overlaps denied topics (SubscribeChecked) has each
// message's topic checked by the ReadAuthorizer (access.go).
//
// # Memory on the hot path
//
// Delivering a message to N subscribers allocates nothing per
// subscriber: deliveries are values in each session's queue, encoded
// into the writer's reused buffer. A message a network client publishes
// allocates only its topic string when nothing but sessions' deliveries
// can keep it (not retained, no publish hooks, no persister): its
// payload buffer (size-classed) and its Message value come from pools
// and go back when the last holder releases them (message.go, acquire).
// The holders are the publisher's reader while it routes, each queue
// entry, each inflight entry and each outgoing copy while the writer
// encodes it. Whatever reads such a message must hold a reference; a
// holder that never releases leaves the message to the garbage
// collector, which is always safe. In-process clients get a copy. Other
// messages (retained, wills, LoT's, those hooks or the persister see)
// are ordinary allocations, topic and payload in one buffer.
package broker
