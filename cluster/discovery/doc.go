// Package discovery finds the other nodes of a Gantry cluster, in the four
// modes of Cluster.Discovery: Seeds (a configured list), Kubernetes (the A
// records of a headless Service), Multicast (signed UDP announcements on
// one LAN) and Zeroconf (DNS-SD over mDNS, a Gantry extension that also
// advertises the web console to operators' laptops).
//
// It owns finding candidate peers and nothing else: membership, the
// bootstrap decision and removal of members belong to package cluster,
// which consumes this package through its own small interface.
//
// # Contract
//
// Every mode implements Source:
//
//   - Peers(ctx) returns the peers known now, sorted by node name then
//     address, never this node itself when the mode can tell (Seeds and
//     Kubernetes compare addresses; Multicast and Zeroconf node names). It
//     never blocks on the network except for Seeds and Kubernetes, which
//     resolve names on each call (each lookup bounded to 3 s). A non-nil
//     error with a non-empty list means a partial list (some seed did not
//     resolve yet); the caller logs it and calls again later, which is the
//     retry. NodeName and ClusterID are "" when the mode cannot know them
//     (Seeds, Kubernetes); OpsAddr is "" unless announced.
//   - Run(ctx) does the background work until ctx ends and then returns
//     nil, having stopped every goroutine it started; it returns earlier
//     only with an error that stops the mode for good (the multicast port
//     cannot be opened). Seeds has no background work; Kubernetes looks
//     the Service up every Interval; Multicast announces and listens;
//     Zeroconf registers and browses. Zeroconf's Run returns no sooner
//     than 4 s after its last registration (a library goroutine that
//     cannot be stopped earlier, see zeroconfProbeTime).
//
// Peers and the Kubernetes absence queries may be called from any
// goroutine, concurrently with Run. Run may be active once at a time per
// value.
//
// # Addresses
//
// Multicast and Zeroconf announce RaftAddr and OpsAddr as host:port. An
// empty host (":9200") asks the receivers to use the address the
// announcement came from (Multicast: the datagram's source; Zeroconf: the
// announcing host's A record in the receiver's subnet). Pass an empty
// host unless Cluster.AdvertisedHost was set explicitly: its default, the
// node name, is often not resolvable on a factory LAN, and a source
// address is right for a gateway with several NICs. Seeds and Kubernetes
// report resolved ip:port addresses.
//
// # Kubernetes absences
//
// The leader removes a member that the Service stopped listing, after
// MemberAbsentFromDiscoverySeconds and a failed TCP probe. Kubernetes
// remembers when each address stopped being listed (Absent,
// AbsentSince); Probe is the TCP check. A failing DNS lookup changes
// nothing (an outage is not an absence); "no such host" is an empty
// Service.
//
// # Signing
//
// Multicast announcements travel in a signing envelope (package
// cluster/signing): HMAC-SHA256 with SharedSecret and a timestamp checked
// against a one-minute window, plus a per-sender check that timestamps
// increase, so forged announcements, those of another secret and replays
// are dropped. Zeroconf TXT records carry an HMAC of their values
// (zeroconf_txt.go). Announcements of another ClusterId are ignored
// quietly (debug level): two clusters may share a LAN. Without a
// SharedSecret everything is unsigned and accepted; the caller logs the
// warning once, using signing.Signer.Enabled.
//
// # Logging
//
// Each mode logs through the injected *slog.Logger with component
// "discovery": peers found, lost or moved at info level; problems as
// warnings, each kind and source at most once a minute with a count of
// the repeats held back (warn.go), so a forged announcement every second
// costs one line a minute. zeroconf v1.0.0 itself writes a few lines to
// the standard library's log package (no usable IPv6 interface, for
// example); they cannot be routed through slog.
//
// # Locks
//
// Each mode has at most one mutex (mu), guarding its table of peers or
// addresses; it is never held across network I/O or logging, and no
// other lock is taken while it is held.
package discovery
