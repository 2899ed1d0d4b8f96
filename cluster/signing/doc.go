// Package signing authenticates every message between Gantry nodes that is
// not Raft itself (discovery announcements, bootstrap checks, data-plane
// control messages) with the cluster's SharedSecret.
//
// It owns the envelope byte layout and the keys derived from the secret,
// and nothing else: it does no I/O and keeps no per-peer state.
//
// # Envelope
//
// Sign wraps a payload; Verify unwraps it:
//
//	offset  size  field
//	0       2     magic "GS"
//	2       1     version, 1
//	3       1     flags: bit 0 set = a MAC follows the payload
//	4       8     timestamp: sender's wall clock, Unix nanoseconds, big-endian
//	12      n     payload (the caller's message, opaque here)
//	12+n    32    HMAC-SHA256 over bytes [0, 12+n), only when bit 0 is set
//
// The MAC key is HMAC-SHA256(secret, "gantry/signing/envelope/v1"), so the
// raw secret never keys two different uses; Sum uses another derived key
// ("gantry/signing/value/v1") for values that cannot carry an envelope,
// such as DNS-SD TXT records. MACs are compared in constant time.
//
// # Replay window
//
// Verify rejects an envelope whose timestamp is more than Window (one
// minute by default, DefaultWindow) before or after the receiver's clock:
// a recorded message can be replayed only within that window, and the
// nodes' clocks must agree to within it (run NTP; the Coreflux reference
// already asks for synchronised clocks). Sign stamps strictly increasing
// timestamps per Signer, so a receiver that remembers the last timestamp
// accepted from each sender (discovery does) also rejects replays inside
// the window: (sender, timestamp) never repeats.
//
// # No secret
//
// With an empty secret, Sign writes unsigned envelopes (flag bit 0 clear)
// and Verify accepts only unsigned ones; the timestamp window still
// applies. Enabled reports whether a secret is set, so the caller can log
// the once-per-start warning the reference asks for. A node with a secret
// rejects unsigned envelopes (ErrUnsigned), and a node without one rejects
// signed envelopes (ErrUnexpectedSignature) instead of accepting what it
// cannot check: a secret set on some nodes only shows up as a clear error
// on both sides rather than as a half-working cluster.
//
// # Concurrency
//
// A Signer is immutable after New except for the last-timestamp counter,
// which is atomic: every method is safe for concurrent use. A nil *Signer
// behaves as one without a secret.
package signing
