// Command chaos is Gantry's fault-injection suite: it runs 3 and 5 real
// bin/gantry processes as one cluster, loads them with MQTT 5 publishers
// (QoS 1 and 2) and persistent subscribers on every node, injects faults
// (kill -9 of a follower, of a partition owner, of the leader; SIGSTOP and
// SIGCONT; a network partition of a minority and of the leader; every
// node restarted at once; a rolling restart; a full disk on one node) and
// checks the recorded history: nothing acknowledged is missing at any
// subscriber, no QoS 2 message is delivered twice to a subscriber whose
// node did not fail over, each publisher's order is kept except across a
// failover, no two owners hold one partition in one epoch, and how long
// each fault took to recover from. Jepsen's NATS analysis is the model.
//
// make chaos runs the whole matrix for CHAOS_DURATION and prints a table;
// make test runs a short deterministic selection (chaos_test.go).
//
// Layout. Without root every node binds its own loopback address
// (127.a.b.1..n, the default ports), as the appliance's multi-process tests
// do; partitions and the full disk then are skipped with a message. As
// root every node runs in its own network namespace on one bridge
// (10.x.y.1..n; the harness reaches them from the bridge's .254), and a
// partition adds blackhole routes to the other side's addresses in the
// namespaces of both sides, so nothing crosses between them while the
// harness still reaches every node; the full-disk node's data directory is
// a small tmpfs.
//
// Concurrency: each publisher and subscriber is one goroutine; they write
// the history (history.mu) that the checker reads once they stopped. The
// fault runner is the main goroutine; the epoch watcher polls GET /cluster
// on its own goroutine into ownerLog (its own mutex).
package main
