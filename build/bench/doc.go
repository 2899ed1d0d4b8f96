// Command bench compares Gantry with Mosquitto under the same load and
// writes the figures to docs/BENCHMARKS.md (issue #7).
//
//	go run ./build/bench -quick                  # the short run of make bench
//	go run ./build/bench                         # the full run (about an hour)
//	go run ./build/bench -scenarios fanin,latency -qos 1 -rounds 5
//
// For every scenario variant (scenario × QoS × payload size) it starts a
// fresh broker process for each run, Gantry and Mosquitto alternately
// (A B A B ...) for -rounds rounds, drives it with the load generator of
// gantry/build/bench/load and samples the broker's CPU time and resident
// memory from /proc. Figures are the median over the rounds; latency
// percentiles come from the rounds' merged histograms. The latency
// scenario's window is -latency-duration (4 s with -quick), as a p99
// needs more samples than a rate; its paced publishers' own timer
// lateness is not counted as latency but reported (see
// load.Result.GeneratorLate), and on Linux a delivery counts as received
// at the kernel's receive timestamp of the subscriber's read, so that the
// time it waited in the socket for the generator's goroutine is reported
// (load.Result.GeneratorReadLag) rather than counted. A QoS 1 message
// lost or reordered is a failure: the run is reported as FAIL and the
// command exits with status 1 after writing its report.
//
// # Durability
//
// The durable scenario (issue "Durability") measures QoS 1 publishes
// acknowledged per second, and their publish-to-PUBACK latency, when every
// message is queued for an offline persistent session: 50 publishers with
// 16 publishes outstanding each, one subscriber that subscribed with clean
// session 0 and disconnected before they started. Its variants alternate
// A B A B like the brokers: Gantry with durability on (fresh data directory
// per run; a PUBACK waits for the group-committed fsync) and off, and
// Mosquitto with persistence on and its default 30-minute autosave, which
// saves on that interval and not before a PUBACK. Gantry's queue limit is
// raised to its maximum (10,000,000) so that nothing is dropped, and the
// publishers stop, ending the window early, once they have sent that
// many. After each run the subscriber reconnects and must receive every
// acknowledged message, or the run fails; the durable Gantry is first
// killed with SIGKILL and restarted on its data directory. The report
// states the durable/in-memory ratio against the aim of 30%.
//
// The gantry binary serves no profiles; TestDurableProfile in
// gantry/build/bench/load runs the scenario against an in-process broker
// with a store and logs the store's commits (go test -cpuprofile).
//
// # CPU placement
//
// The primary mode, "pinned", runs the broker on -broker-cpus (taskset)
// and the load generator on -load-cpus (sched_setaffinity on every thread
// of this process, and GOMAXPROCS to match): it compares efficiency per
// core. Mode "unpinned" lets both use every CPU.
//
// # Generator check
//
// In the primary mode each closed-loop variant also runs once against the
// generator's own sink (this binary re-executed with -sink-listen, pinned
// like a broker), which swallows publishes without routing them. The
// sink's publish rate must clearly exceed every broker's; the report says
// so, or warns.
//
// # Output
//
// The tables are printed to stdout (progress goes to stderr) and, with
// -out, written into the "bench" section of that Markdown file (between
// the <!-- bench:begin --> and <!-- bench:end --> markers; the rest of the
// file is kept), together with the machine, the exact command and a PNG
// chart (-chart). The document holds exactly the tables printed.
//
// The harness needs Linux (/proc, taskset), a built bin/gantry (make
// build) and mosquitto 2.x. It raises its open-file limit to the hard
// limit; the connections scenario is capped below that limit.
package main
