// Package cluster is Gantry's control plane: Raft leadership
// (hashicorp/raft), start-up (rejoin, join, or form exactly one cluster),
// membership driven by discovery, and the partition map the data plane
// builds on. It follows the Coreflux clustering reference; DESIGN.md's
// roadmap puts moving messages between nodes in a later part.
//
// # Identity
//
// A node is its NodeName: it is the Raft server ID, and addresses are only
// where a name can be reached now. The leader follows a member to a new
// address as soon as discovery and the peer protocol show it there
// (raft.AddVoter with the same ID rewrites the address; hashicorp/raft
// dials the new one as soon as the entry is appended), so a node restarted
// on another node's old address is each member at its own new address.
//
// # Start-up
//
// A node with Raft state in DataDir rejoins at once, also when every node
// restarts together: each remembers the configuration. A node without
// state starts Raft empty and waits to be added; meanwhile it asks the
// peers discovery lists who they are (GET /cluster/peer, signed), and asks
// each one that belongs to a cluster to add it (POST /cluster/join; only
// the leader acts). After BootstrapGrace, if no peer belongs to a cluster
// and, with BootstrapPeerCheck, every peer answered for this ClusterId (a
// peer that answers for another one holds the node back too, and the log
// and Status.Waiting say so rather than that it does not answer: the
// ClusterId or the discovery list needs fixing), the fresh node that
// comes first (by NodeName among those that answered; by address against
// those that did not, possible only without the check) bootstraps a
// one-member cluster; the others wait, and its leader adds them. Every
// fresh node computes the same order, so exactly one cluster forms.
//
// The advertised host name (Options.AdvertisedHost) is looked up again
// every ReconcileInterval until it resolves or BootstrapGrace has passed,
// as the reference says. While a node advertises a name that does not
// resolve yet, it neither asks to be added nor forms a cluster, so no
// leader records it under a name nobody resolves; when the appliance fell
// back to an interface address because the default name (the NodeName)
// did not resolve at start, the name is advertised once it resolves. After
// the grace the node goes on with what it has and logs why.
//
// # Membership (leader)
//
// Every ReconcileInterval the leader asks discovery for the peers, adds
// those of its ClusterId that are not members as non-voters and gives them
// their vote once their own configuration lists them and they answer its
// heartbeats (so an unreachable Raft port never costs the majority). It
// does not wait for the next round to do so: after adding a member it asks
// it every heartbeat interval (awaitCatchUp) and promotes it as soon as the
// member knows the entry that added it to be committed. Status counts a
// member in membersAlive only once it votes, and the leader only once the
// configuration that gave the vote is committed, so a cluster looks
// complete only when losing its leader still leaves a majority. It
// follows members that moved, removes a member
// silent for MemberRemovalGrace (its failed heartbeats, as hashicorp/raft
// reports them), removes a member Kubernetes discovery stopped listing for
// MemberAbsentFromDiscovery once a TCP probe of its cluster port fails,
// resigns when a reachable peer has not joined after MemberAddResign, and
// commits a new partition map when the set of live members (members heard
// within FailoverDelay) changed it.
//
// # Timing
//
// hashicorp/raft draws a follower's election timeout from [T, 2T) and the
// leader heartbeats every T/10. Gantry sets T = ElectionTimeoutLowerMs, so
// with the defaults (150, 300) the timeout is drawn from exactly the
// documented range; an ElectionTimeoutUpperMs other than twice the lower
// bound is validated but the library keeps 2T. Heartbeats go out every
// T/10, more often than HeartbeatThreshold (0.25) asks, which only makes
// failure detection faster. The leader's lease is T, so a frozen or cut-off
// leader stops acting as one within T. With RaftTransport "Deadline" every
// Raft RPC, and the dial, has ElectionRpcTimeoutMs to complete, so a
// frozen peer (SIGSTOP: its kernel still accepts connections) costs a
// vote at most that long; "Tcp" keeps the library's 10 s.
//
// # Replicated state
//
// One FSM (fsm.go) applies a versioned JSON command envelope: the
// cluster's session (formed once), the partition map and the users. Apply is
// deterministic and refuses a newer envelope version. A map is applied
// only when its Version is newer than the current one, so a deposed
// leader's late proposal cannot roll it back; each partition's Epoch rises
// whenever its owner changes, for the data plane to fence a stale owner.
// A caughtUp command (caughtup.go) marks one syncing copy caught up, and
// applies only while the map still lists it syncing: the partition's owner
// sends it once the data plane filled the copy, through the leader
// (POST CaughtUpPath from a follower). With SetCopiesReported (the data
// plane replicates) the leader's rebalance waits for those reports before
// it moves owners onto new copies; without, it marks them caught up at
// once, as there is nothing to copy.
//
// # Users
//
// The user store is the cluster's (users.go): State.Users is every user
// (the records of broker/auth, hashes included) with a version, in the
// log and in snapshots. A change carries the whole new set and the
// version it was computed from, and applies only on top of that version
// (compare and set) and only when an administrator remains, so a change
// computed on a stale copy, or one that removes the last administrator,
// is refused deterministically on every node. UpdateUsers computes the
// change on this node's copy and commits it: on the leader directly
// (changes serialised by usersMu, so a commit makes base+1), from a
// follower through POST UsersPath to the leader, signed; on a conflict it
// waits for the newer set and computes again. It returns once this node's
// OnState callbacks ran for the new version (fsm.usersApplied), which is
// when the appliance has written users.json. A leader whose cluster has
// no users yet proposes its own (SetLocalUsers, seedUsers): the first
// cluster adopts its bootstrapping node's users.
//
// # LoT in a cluster
//
// LoT's definitions are the cluster's (lot.go, lot_fsm.go): State.LoT
// holds every definition (kind, name, source: the cluster does not read
// LoT) and the version of the last change, the Raft index of its entry.
// A change carries the version it was checked on and applies only on top
// of it (compare and set), all or nothing: a delete of a definition the
// cluster lacks refuses it, deterministically on every node. A follower
// passes a change to the leader through POST LoTPath, signed; a leader
// whose cluster has no definitions yet adopts its own (SetLocalLoT,
// AdoptLoT) first. The appliance checks a change before it commits it and
// applies what was committed to its local store.
//
// The owner map of the work that runs in one place (lot_work.go) is in
// State.LoT.Work: one owner and one standby per item, planned by the
// leader over the members heard within FailoverDelay (PlanWork) and
// committed when it changes; a map with an older Version is ignored.
// InContact tells an owner whether it may run its work: it leads (with
// its term's log applied), or has heard from the leader within the fence
// the appliance gives (shorter than FailoverDelay, so it stops before the
// leader moves the work) and, since it last lost contact or started, has
// applied the log up to the commit index the leader reported afterwards
// (askCommit, over the peer protocol): a node that comes back never runs
// work from a stale map. ON START runs are claimed through the leader
// (ClaimStart; State.LoT.Started) before they run, so each runs at most
// once per code version.
//
// # Messages between nodes
//
// Raft traffic on the cluster port is neither signed nor encrypted, as in
// the reference: keep it on a private network. Everything else between
// nodes (the peer protocol here, discovery announcements) is signed with
// SharedSecret through cluster/signing; without a secret it is unsigned
// and the appliance logs a warning. The signature's timestamp bounds a
// replay to its window; a peer question (GET /cluster/peer) also carries
// a fresh nonce that the signed answer must echo, so a recorded answer
// is refused at once (a host in discovery cannot pass for another node).
// Every POST of the peer protocol (join, users, LoT, catch-up) goes
// through the node's signing.Requests (Node.Requests): signed for its
// method, path, target node and a fresh request id, taken once, bounded
// per path, its reply signed for that id; the appliance shares the same
// Requests with the session and kept-value exchanges.
// The data plane (cluster/dataplane) links every member to every other;
// Topology ring runs as the mesh, by decision: with interest routing the
// mesh sends a message only to nodes that want it, and the reference's
// ring (two neighbours, no relay) would only lose messages beyond 3 nodes.
//
// # Concurrency
//
// New and Start are called once, Shutdown once; the other methods may be
// called from any goroutine. The node runs three goroutines (Raft
// observations, the control loop, discovery's own work), one resolving
// its advertised name during the grace (resolveAdvertised), and while it
// leads one per member catching up (awaitCatchUp), all started by goRun
// and stopped by Shutdown (goRun starts nothing once Shutdown began).
// Node.mu guards the join attempts, the catch-up watches and the state
// callbacks; changeMu serialises membership changes and may be held
// across a Raft future, and is taken before mu, never after; usersMu
// serialises user changes on the leader, is held across a Raft future and
// is never held with changeMu or mu; the work fence (lot_work.go) has its
// own mutex, held for no I/O, and starts one askCommit goroutine at a time
// through goRun; liveness has
// its own mutex; mu and liveness's are never held across network I/O or a
// Raft future.
package cluster
