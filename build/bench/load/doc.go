// Package load is Gantry's MQTT load generator: a raw-socket MQTT 3.1.1
// client built on the project's codec (gantry/broker/packet), the
// benchmark scenarios that drive it, and a trivial sink server that shows
// the generator is not the bottleneck.
//
// # Clients
//
// Every client is one TCP connection with a hand-rolled read buffer:
// packets are decoded in place (a PUBLISH decodes without allocating),
// acknowledgements are batched and written when the buffer runs dry, and
// a publisher encodes as many PUBLISH packets as its window allows into
// one write call. Clients may bind distinct loopback source addresses
// (127.0.0.2, 127.0.0.3, ...) so that tens of thousands of connections
// do not run out of ephemeral ports.
//
// # Payload
//
// Every payload starts with a 16-byte stamp: publisher index (uint32),
// sequence number (uint32) and the send time in nanoseconds since the
// run's epoch (int64, monotonic clock), all little-endian; the rest is
// padding up to the payload size. Subscribers check the sequence of every
// publisher: a gap is a lost message, a sequence number lower than the
// next expected one is a reordered (or duplicated) message. End-to-end
// latency is the receive time minus the stamp.
//
// # Flow control
//
// Closed-loop scenarios (fan-in, fan-out, pairs) measure the highest
// sustainable throughput without loss: each publisher keeps at most
// Window messages outstanding end to end towards each of its subscribers
// (sent, and neither received nor known lost by that subscriber), and at
// QoS 1 at most Inflight PUBLISH packets unacknowledged. A broker's PUBACK only says the
// message was queued, so without the end-to-end window a fast publisher
// would overflow a slow subscriber's queue. Open-loop scenarios (latency,
// overload) send at a fixed offered rate instead, stamping each message
// with the time it was due, so that a stalled broker shows up in the
// latency (no coordinated omission).
//
// # Offline session
//
// The Offline topology (the durable scenario) has no subscriber online
// while the publishers run: one subscriber subscribes with a persistent
// session (clean session 0) and disconnects first, so that the broker
// queues every message for it. Its publishers close the loop on PUBACKs
// only (Scenario.Window publishes unacknowledged each) and record each
// PUBACK's latency from the send time. After the run they hang up,
// Config.Restart may restart the broker, and the subscriber reconnects to
// its session: every acknowledged message must arrive, in order per
// publisher.
//
// # Sink
//
// Sink is an MQTT endpoint that accepts connections and subscriptions and
// swallows PUBLISH packets, acknowledging QoS 1 ones. Run against it
// (Config.Sink), a scenario measures how fast the generator alone can
// publish; the harness compares that with the brokers' figures.
//
// The benchmark harness (gantry/build/bench) starts the brokers, pins them
// to CPUs and reports; this package knows nothing of processes.
package load
