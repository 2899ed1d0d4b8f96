// Package dataplane moves messages between the nodes of a Gantry cluster:
// a message published on one node reaches the subscribers of every node.
//
// # Links
//
// Each node keeps one link to every other member of the Raft
// configuration: an MQTT 5 connection to the peer's broker port
// (Cluster.DataPlaneMqttPort) as the cluster user
// (Cluster.DataPlaneUsername). Its password is a link token: a statement
// of cluster, sender, receiver and a random id signed with SharedSecret
// (cluster/signing) and fresh within the signing window, so a node never
// needs the cluster user's own password; the receiver admits the token
// (Authenticator) and passes every other login on. A token admits one
// connection: the receiver takes its id once (a signing.ReplayCache
// over twice the window) and refuses a token signed before its process
// started, so one read off the wire (a link without TLS) is no use once
// its link logged in, across a restart of the receiver too; each dial
// makes a new one. A refused token is counted with the forged frames
// (bad, or for another node or cluster) or the replayed ones. Only the cluster user may publish or
// subscribe under InternalPrefix (Authorizer); it publishes frames to
// $cluster/v1/frames. A link pings every second and counts as down once
// the peer answered nothing for 3 s (a half-open connection: the peer
// frozen, or the network cut); its keep alive is 2 s, so the peer's broker
// drops it after 3 s of silence too. A link reconnects with backoff (100 ms doubling to
// 5 s) and never holds a client's connection: the publish hook only
// appends to the link's queue. With Options.TLS (Cluster.UseTls) a link is
// a TLS connection, verified as the appliance's configuration says.
//
// # Frames
//
// A frame (cluster/wire) is the payload of one PUBLISH: the sender, its
// incarnation (boot), and records, each one message with its number in
// the sender's reliable stream to that receiver (0 for best effort). The
// whole frame is signed. The receiver drops, and counts, a frame whose
// signature fails (forged, or another SharedSecret), one whose timestamp
// is not newer than the last accepted from that sender or whose boot is
// older (replayed), and one that does not decode. A message is encoded
// once and its bytes shared by every peer's queue; a frame carries up to
// 256 KB of records (less when the peer's Maximum Packet Size says so).
//
// # What travels
//
// Every message that enters a node from its clients, LoT, connectors or
// wills is queued for every peer, except topics beginning with '$' ($SYS
// and the LoT command topic are per node). A message from a peer is
// delivered to local subscribers and retained store through
// broker.Server.DeliverBatch (no publish hooks), so it never travels on
// and never triggers LoT.
//
//   - QoS 0 (Cluster.DataPlaneEnabled) is best effort: queued only while
//     the link is up, written once, dropped when the link goes down or more
//     than 8 MB wait.
//   - QoS 1/2 (Cluster.ReplicationEnabled; otherwise they travel like QoS
//     0) are reliable: appended to this node's outbox, one stream numbered
//     1, 2, ... that every peer consumes with its own cursor. A record
//     stays until every peer confirmed the frame that carried it (the
//     PUBACK of the frame's QoS 1 PUBLISH, which the peer sends only once
//     what the frame delivered is durable there: offline queues of
//     persistent sessions, retained messages) and is sent again after a
//     reconnect. At most ReplicationForwardQueueEntries records are kept;
//     beyond that the oldest goes, counted for every peer that had not
//     confirmed it (coreflux_replication_forward_dropped_total). The
//     receiver remembers the highest number it delivered per sender and
//     stream and drops a record it already had, so a frame sent again
//     after a lost PUBACK is not delivered twice.
//
// With durability the outbox, the peers' cursors and what was received
// from each sender are in DataDir/dataplane.db (Options.DataDir): a
// publisher's PUBACK waits for the record's write (one group commit, one
// fsync, for all that arrived meanwhile: a frame appended to the store's
// write-ahead log, DataDir/dataplane.db.wal/, and applied to bbolt by a
// checkpoint every few MiB; storelog.go), a restarted node resumes its
// stream where it was (same stream identity, numbers go on) and every
// peer from its cursor, a peer that never confirmed anything included.
// A record travels to the peers while its own write runs, so that the
// copies' writes overlap the origin's: record numbers are reserved on
// disk ahead of use (the lease, leaseStep at a time), and a restarted
// node numbers on above the reservation, so a number a peer may hold from
// before a crash is never given to another message. A restarted receiver
// still drops what it had delivered. Without durability the outbox is in
// memory and a restart starts a new stream.
// A peer without a link (down, or not yet in the membership after a
// restart) keeps its records until it returns or the bound pushes them
// out; the hook keeps nothing while the node has no peer at all.
//
// Retained messages travel reliably whatever their QoS, so a node that
// was down gets the retained values published meanwhile. A node without
// a retained history of its own (in memory, or a new data directory)
// asks each peer for its whole retained store when the link comes up
// (retained.go, retainedSync) and holds every SUBACK, and so the retained
// messages a SUBSCRIBE reads, until each live peer has answered (15 s at
// most). Versions are a hybrid logical clock (at least the wall clock in
// microseconds), so what such a node writes before its catch-up arrives
// still ranks above what it wrote before it went down. A deleted topic's
// version (a tombstone) is kept 24 h, sent in catch-ups meanwhile, then
// pruned; a link that comes up after its stream dropped records for the
// peer sends it a catch-up.
//
// # Interest
//
// A message crosses the network only to the peers that have a session
// (online or offline persistent, in-process clients included) whose filter
// matches it; retained messages go to every peer. Each node announces its
// filters to every peer over its own link (interest.go): a snapshot first
// on every connection and again every 5 s (removals travel that way), and
// each new filter at once from the SUBSCRIBE that added it
// (broker.SubscribeHook): the SUBACK waits until every peer whose link is
// up confirmed the addition, so a message published on any node after
// the SUBACK reaches the subscriber. A peer that answers nothing for 3 s
// (frozen, or the network cut without a FIN) has its link closed, and is
// waited for only until its own keep alive on this node's link has run
// out (3 s after the last write): from then on it takes this node's
// interest for stale, and the snapshot of the next connection brings it
// up to date; 10 s bound it all (a live peer whose disk stalls the
// confirmation). A filter stays pending
// until that announcement is over, and a SUBACK for a pending filter (a
// second SUBSCRIBE of it, or one a snapshot carries first) waits for the
// same announcement. A peer's announced
// interest counts from the snapshot on its current connection until that
// connection ends; meanwhile, and for a peer never heard from, everything
// goes to it. The sender decides when it writes a record, so a subscription
// added while a record waited for a link still gets it; records passed
// over count as confirmed with the next frame.
//
// # Shared subscriptions
//
// A shared group ($share/{group}/{filter}) spread over several nodes gets
// each message once. The node a message enters serves every group that
// has a member there (the broker's own routing); for every other group it
// picks one of the peers that announced a member, in turn, and names the
// group in that peer's record (wire.Record.Groups). A message from a peer
// reaches only the shared subscriptions its record names
// (broker.Message.PeerGroups); its plain subscribers get it as usual. A
// member counts on its node whether it is connected or not (an offline
// persistent member's messages are queued), and a peer whose interest is
// not known gets no group's messages until it is.
//
// A peer that is down gets its reliable backlog when it returns, including
// messages for its offline persistent sessions. Frames to one peer are in
// publish order, so a publisher's messages arrive in order.
//
// # Partition copies and the quorum write (quorum.go, copies.go, fill.go)
//
// With Options.Replication a QoS 1/2 publish is a write to the copies of
// its publisher's partition (partition.For(client id), the committed map
// handed over by SetMap): its record in this node's stream names the
// partition and its epoch, goes to every other copy whether it wants the
// topic or not, and a copy stores it in its copy log (chunks of the
// copychunks bucket, copychunks.go) in the
// same group commit as its deliveries, before it confirms the frame. The
// publisher's acknowledgement (broker.ErrDeferred) waits until own write
// (when this node is a copy) plus confirmations reach a majority of the
// partition's replicas; admit refuses at once (0x97) without a map, an
// owner, enough reachable copies or room in the window, and the sweep
// refuses what waits past the timeout. A node that knows a higher epoch for
// the partition and is no longer one of its copies stores nothing and
// answers the frame 0x97 (errStaleCopy): the sender counts none of that
// frame's copies there. A peer that is not a copy gets a quorum record
// only once it was decided, and never a refused one (take waits for it).
//
// This writes from the node the publisher is connected to, not through the
// partition's owner as the seed describes: one hop less, and no pause
// while a lost owner is replaced. The owner's part is what the copies need
// beyond single writes: it fills a new (syncing) copy from its own, a chunk
// at a time, and reports it (Options.CaughtUp, committed by the leader); and
// when a node leaves the map every copy re-delivers that node's records of
// the replay window, with their origin identity, which receivers check
// against what they delivered (receiver.delivered, replaySet).
//
// Two-phase delivery: a copy delivers a record marked Decide (a quorum
// write of its sender's own stream) only once a frame header's Decided
// covers it (outbox.decidedLocked: every write up to it decided), and
// drops it, from its copy log too, when the header names it refused
// (outbox.refuse decides a refusal under outbox.mu, so no header covers a
// refused record without naming it). A header alone goes out when the
// peer holds records the decisions release. Held records are in memory
// (senderState.held) and, with a store, in the held bucket, written with
// the copy and removed once the delivery is durable; they are delivered
// without a decision when their sender's boot changes or it leaves the
// partition map (releaseFrom). Refused records are marked in the outbox
// store (refusedMark), so a restarted origin names them again and sends
// them to nobody.
//
// # Sessions (sessions.go, sessions_export.go, sessions_directory.go, sessions_links.go)
//
// A persistent session is the cluster's, held by one node at a time: the
// node its client last connected to. A CONNECT on any node first claims
// the client's session from every other member (broker.SessionClaimer,
// before the session attaches and the CONNACK leaves), over the peer
// protocol on the operations port (POST /cluster/sessions/..., JSON
// signed with SharedSecret through signing.Requests: for its path and
// node, once, bounded per path by sessionLimits, the reply signed for its
// request; the node's Requests, shared by UseRequests. A request-response
// exchange, which the one-way frames of the links are not):
//
//  1. takeover: each member closes its connection of that client
//     (DISCONNECT 0x8E; the will is published at once, or waits for its
//     delay, as for a takeover on one node) and answers whether it holds
//     the session, with its subscriptions. With a clean start it discards
//     the session instead, publishing a pending will (the session ended).
//  2. The claiming node installs the subscriptions (no retained messages:
//     they are resumed) and announces them as a SUBSCRIBE does
//     (SubscriptionsAdded, waiting for the peers' confirmation): from
//     then on what is published anywhere reaches this node.
//  3. export: only then does the holder hand the session over whole (in
//     flight in send order with packet identifiers, queued in order,
//     inbound QoS 2 identifiers), lent (sessions_export.go: out of its
//     memory and tree, still in its store) until the claiming node,
//     which pulls it in bounded parts, confirms it stored them all;
//     without that confirmation the holder takes it back and hands it
//     over again. First it asks every peer whose link is up to flush its stream to it
//     (POST /cluster/sessions/flush: the peer answers once the holder
//     confirmed every record it had appended, at most 3 s), so that a
//     record a peer passed over for the claiming node, before it knew
//     the new subscriptions, is in the export rather than arriving at
//     the holder after it and lost. The
//     claiming node puts it ahead of what it queued since step 2, and the
//     client gets session present = 1, its in-flight messages again
//     (DUP) and then the queue.
//
// Step 2 before step 3, and the flush, are what keep a message published
// during the handover from being lost: every record a peer appended
// before it knew the claim reaches the holder before the export, and
// every record after it reaches the claiming node. A message published
// in the window between the announcement and the export (milliseconds,
// the flush included) reaches both, and both queue it; the claiming node
// keeps one. Every message names its record in its origin's stream
// (broker.Message.Record: origin, boot, seq): receive.go names what a
// peer sends (a replay and a released copy by their origin's record),
// InterceptPublish what is published here (nameLocal: the record the
// outbox gave it, which the peers receive it under), and the queue
// entries keep the name, on disk too, and in the export (wireEntry.Rec).
// The claiming node drops its own queued copy of each message the export
// carries, and, for 10 s, a copy that arrives only after the import (a
// peer's stream to it lagging behind its stream to the holder, or the
// holder's own publish): broker.Stats.HandoverDuplicates. A message
// published here while Cluster.QuorumGateEnabled is off has no name (the
// outbox numbers it inside replicate, in quorum.go): a copy of it may
// still arrive twice. A peer whose link to the holder is down during the
// handover cannot flush: a record it passed over for the claiming node
// and delivers to the holder only later is lost for the session.
//
// The directory: every node pushes the list of its persistent sessions
// (subscriptions, expiry, connected or since when not, and when it took
// each: its claim time) to every member, at once after a change and whole
// every 30 s, and exchanges it with a peer as soon as its link to that
// peer comes up (sessions_links.go: a restarted node knows the others'
// sessions at once). A member whose link is down, or up but silent for
// 1.5 s (frozen), is waited for 300 ms at most by a claim. When no member that answered holds the session but the
// directory lists it on a member that did not answer (down), the claiming
// node takes the subscriptions from it (session present = 1) and queues,
// from the partition copies it holds (sessions_copies.go), every record
// the subscriptions match that entered the cluster since the session went
// offline (since 10 s before the holder's last push, when the client was
// connected to it): what the holder had queued, or would have, each named
// by its origin's record as the copies keep it. The
// messages that member queued follow again when it returns: the new holder's
// push lists the session with a newer claim, and the returning node hands
// its copy over (POST /cluster/sessions/handover; returnSession), behind
// what the client got meanwhile; a message of it still queued here from
// the copies is dropped (the same record), but one the client had from
// them already arrives again, as does what the returning node received
// again from its peers' backlogs after its restart.
// The claims are kept in DataDir/sessions-since.json with durability.
//
// Expiry runs where the session is: only its holder has it (a confirmed
// export deletes the session; a lent one does not expire), and a directory entry whose expiry passed is
// ignored; the holder's next push drops it.
//
// Still to come: the returning holder's queue without what the client
// had from the copies (the new holder would have to remember what it
// delivered), asking the other copies for the partitions this node holds
// no copy of (clusters larger than ReplicationFactor), or a copy still
// syncing (a map not settled yet).
//
// Topology ring is not built, by decision: the reference's ring sends QoS
// 0 to two neighbours without relaying (the mesh up to 3 nodes, lost
// messages beyond), while the mesh here sends a message only to the nodes
// that want it and the links are a full mesh anyway (reliable stream,
// quorum, interest); ring runs as mesh (docs/cluster.md).
//
// # Concurrency
//
// The session exchange runs on the connecting client's reader
// (ClaimSession: it blocks that connection only, at most claimWait per
// step, 300 ms for a member whose link is down, a part of the handover
// claimWait and the time PartBytes takes at 256 KiB/s), on the operations
// server's handlers, and in one goroutine (Sessions.Run, the directory
// pushes, started by the appliance); Sessions.mu guards its claims and
// directory and is held for no I/O or broker call; Sessions.lmu its lends
// (an answer being written holds its lend open: answering, answered).
//
// InterceptPublish runs on publishers' goroutines and never blocks: it
// encodes once and appends to the outbox under its mutex; with a store the
// acknowledgement is deferred (broker.ErrDeferred) and resolved by the
// store's goroutine after its commit. Each link runs two goroutines (dial
// and write; read acknowledgements), started by SetPeers and stopped by
// Stop; the store runs one, the quorum write two (runSweep: timeouts;
// runMaps: fills and replays, on map changes). Plane.mu guards the set of links; outbox.mu
// guards the outbox and every peer's stream; senderState.mu orders the
// frames of one sender; store.mu guards the writes waiting for the
// store's goroutine; quorumGate.mu the writes waiting for a majority,
// copyLog.mu the copies' keys, fillState.mu the fills, replaySet.mu the
// replayed ids; Plane.rmu guards the peers' announced interest,
// read for every message (also under outbox.mu, from addBestEffort). No
// lock is held across network I/O or a bbolt transaction; lock order:
// localInterest.mu, Plane.mu, outbox.mu, Plane.rmu, store.mu; and
// senderState.mu, receiver.mu, replaySet.mu, copyLog.mu, store.mu.
package dataplane
