// Package signing authenticates every message between Gantry nodes that is
// not Raft itself (discovery announcements, bootstrap checks, data-plane
// control messages) with the cluster's SharedSecret.
//
// It owns the envelope byte layout and the keys derived from the secret;
// Requests adds the layout of signed HTTP requests and the replay cache
// of their ids. It does no I/O of its own beyond Requests.Post.
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
// the window: (sender, timestamp) never repeats. A message with an id of
// its own (a request, a data-plane link token) is made good once by a
// ReplayCache instead (replay.go): it remembers the ids it took for twice
// the window and refuses what was signed before it was made, since the
// ids an earlier process took are gone with it.
//
// # Requests
//
// Requests (requests.go) is the one mechanism of every node-to-node HTTP
// request that changes or reads state (the peer protocol's join, users,
// LoT and catch-up reports, the session exchange, kept values). The body
// travels as it is; the RequestHeader carries an envelope over
//
//	"gantry/request/v1\n" + JSON {method, path, node it is for,
//	                               request id (128 random bits),
//	                               SHA-256 of the body}
//
// and the reply's ReplyHeader one over "gantry/reply/v1\n" + JSON
// {request id, SHA-256 of the reply body}. So a request is good for one
// method, one path and one node, once: the receiver checks the header
// before it reads any of the body, refuses an id it accepted within
// twice the window and a request signed before this node started
// (ReplayCache, replay.go: a bounded cache in memory, so a restart must
// not open the window again; full, it refuses rather than grows,
// ErrCacheFull), reads at most the path's limit (http.MaxBytesReader),
// and lets at most LargeRequests bodies above LargeBody be read and
// served at once; such a body, and a reply above LargeBody, is given the
// time its length takes at BodyRate (the connection's deadlines moved),
// since the operations server's timeouts are meant for small requests. An id is spent only once the body proved to be the one
// signed, so a forged body sent first with a header read off the wire
// does not burn the legitimate request's id; a replay of a request taken
// already is refused before any of its body is read. A reply is
// good for its request only: a recorded one fed to another is refused
// (ErrNotReply), and so is a refusal's plain text, which is not signed.
// Refusals are counted by Reason (Stats) and logged once a minute per
// reason. The layout is not compatible with a build before it: nodes of
// one cluster run one build.
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
// behaves as one without a secret. A ReplayCache is safe for concurrent
// use (its mu guards its ids). Requests is safe for concurrent use: its
// ReplayCache holds the ids, its mu guards the log limiter, its counters
// are atomic, and a buffered channel holds the large-body slots.
package signing
