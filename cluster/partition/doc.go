// Package partition owns the partition map of a Gantry cluster: which
// node owns each partition of the QoS 1/2 traffic and which nodes hold its
// copies, the hash that puts a publisher into a partition, and the planner
// that computes the next map when the membership or the configuration
// changes.
//
// Everything here is pure: no I/O, no clock, no goroutines, no locks. The
// Raft leader plans a map with Rebalance and commits it; every node applies
// the committed map. Same inputs give the same output on every node and
// version (nodes are sorted, maps are never iterated), so a follower could
// recompute what the leader proposed.
//
// # Wire contract
//
// A publisher's partition is For(clientID, count): the 32-bit FNV-1a hash
// of the client id's bytes, modulo the partition count. Every node must
// agree on it forever; it never changes. Changing PartitionCount therefore
// reassigns every client: partition ids that exist in both counts keep
// their placement (and their stored messages, which the data plane still
// replays), partitions beyond the new count are retired (MoveRetire), new
// ones are placed from scratch.
//
// # The map
//
// Map.Partitions[p] is partition p's Assignment: Owner (accepts its
// writes), Replicas (every node holding a copy, owner first, then by name),
// Syncing (the replicas whose copy the data plane is still filling, by
// name) and Epoch. Map.Version increases with every change. Validate states
// the invariants; the decoders and Rebalance refuse a map that breaks one.
//
// Epoch is the data plane's fencing token: whenever Owner changes, Epoch is
// set to the new map's Version. It therefore strictly increases per
// partition, never exceeds Version, and a partition id that is retired and
// later re-created starts above every epoch it had before. A node that
// finds a higher epoch than the one it writes with has been deposed.
//
// # Rebalancing rules
//
// Rebalance(prev, nodes, count, rf) computes the next map. nodes are the
// live members; copies per partition are r = min(rf, len(nodes)).
//
//  1. Ownership moves only to a node holding a caught-up copy (a replica
//     not in Syncing). A lost owner is replaced by such a node (failover,
//     MovePromote); a balancing transfer goes to one (MoveTransfer). The
//     one exception is a fresh partition, with no copy recorded anywhere
//     (new, or emptied by Forget): it holds no data, so it goes to any
//     node (MoveAssign) and its first copies start caught up.
//  2. A partition with no live caught-up copy left is stranded: it gets
//     no owner (Epoch bumped, fencing the lost one), its Replicas keep the
//     lost nodes that hold the last caught-up copies, and the data plane
//     refuses its publishes (0x97) until one of them returns and is
//     promoted. Nothing hands it to a node without its data. When those
//     nodes are gone for good (removed from the membership), the caller
//     applies Map.Forget to them: the partition becomes fresh and is placed
//     anew. Its unreplicated messages are lost, which is what rf = 1, or
//     losing every copy at once, means.
//  3. A copy on a lost node is dropped, and a new copy is placed on
//     another node, in Syncing: the data plane fills it.
//  4. Two steps for a move: a joining node (or any node that should take
//     a copy for balance) first gets its copy as a syncing replica. The
//     data plane fills it and reports it caught up; the leader commits
//     Map.MarkCaughtUp(p, node). Only the next Rebalance may then make the
//     node owner, and only then does the copy it replaces go: a caught-up
//     copy is dropped only when every copy of the desired layout is caught
//     up and the desired owner owns the partition. So a voluntary move
//     never lowers the number of caught-up copies, and a partition never
//     has fewer than min(r, what it had) caught-up live copies, except
//     through losses. A syncing copy the layout no longer wants is dropped
//     at once.
//  5. Balance: owners differ by at most one partition between nodes, and
//     so do copies (every active partition has exactly r). The nodes that
//     get the remainder are those with the most now, so that as little as
//     possible moves. Balance holds once every syncing copy has caught up
//     and Rebalance has run again (a settled map); until then the owners of
//     partitions waiting for a copy stay where they are.
//  6. Minimal moves: placements start from what each node holds. A node
//     that joins takes only its fair share of owners and copies; a lost
//     node's partitions move only to the nodes holding their copies, and
//     its copies are re-created on the nodes below their share. Batches
//     (a lost node's partitions, the copies a new node needs) are matched
//     to the room below the targets with augmenting paths, so that no
//     chain of extra transfers is needed when a direct placement exists;
//     ties prefer the node sharing the fewest partitions with the owner,
//     which spreads each owner's copies over all other nodes, so that its
//     partitions spread over all survivors when it is lost.
//  7. Nothing changed gives the same map back: same Version, no moves.
//     Calling Rebalance again without a new catch-up report changes
//     nothing. From a settled map, one node joining or leaving settles in
//     two changing calls: the plan with the new copies, then, after they
//     caught up, the ownership transfers and the dropped copies.
//
// With no live node, every partition that had an owner is stranded and
// fresh ones stay without owner. A single node owns everything with one
// copy; rf above the node count gives every node a copy of everything.
//
// # Encodings
//
// MarshalJSON is the form of GET /cluster, with stable field names:
//
//	{"version":7,"partitions":[{"partition":0,"owner":"a",
//	  "replicas":["a","b"],"syncing":["b"],"epoch":7},…]}
//
// UnmarshalJSON reads it back strictly. AppendBinary is the compact form
// for the Raft log; all integers are uvarints:
//
//	format byte (1), version,
//	n names, n × (length, bytes)          distinct, non-empty, in order
//	count, count × (epoch, owner, m, m × replica)
//	owner:   0 for none, else name index + 1
//	replica: name index << 1 | 1 if syncing
//
// Decode refuses truncated or trailing bytes, an unknown format, counts
// the input cannot hold, and a map that fails Validate; it never panics.
//
// # Concurrency
//
// Functions and methods are safe for concurrent use. A Map is a value:
// nothing here writes into a Map it was given, and maps returned by
// MarkCaughtUp share unchanged assignments with their input, so treat the
// slices of a Map as read-only.
package partition
