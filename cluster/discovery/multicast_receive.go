package discovery

import (
	"errors"
	"net"
	"time"

	"gantry/cluster/signing"
)

// What Multicast does with a received datagram, in order:
//
//  1. the envelope must verify (signing.Verify: MAC, timestamp window);
//  2. the payload must decode as an announcement of this cluster;
//  3. an announcement with this node's name is dropped (a different
//     incarnation means a second node uses the name: warned);
//  4. per node name, the envelope timestamp must be later than the last
//     accepted one: an equal one is the same datagram heard on another
//     interface (dropped silently), an earlier one is a replay (warned).
//
// Warnings are rate-limited per kind and source address, so a forged
// announcement every second costs one log line a minute.

// receive handles one datagram from src.
func (m *Multicast) receive(b []byte, src net.IP) {
	msg, err := m.signer.Verify(b)
	if err != nil {
		m.rejected(b, src, err)
		return
	}
	a, err := decodeAnnouncement(msg.Payload)
	if err != nil {
		m.limited.Warn("malformed|"+src.String(), "discovery: malformed announcement dropped",
			"from", src.String(), "err", err)
		return
	}
	if a.ClusterID != m.self.ClusterID {
		m.limited.Debug("foreign|"+a.ClusterID, "discovery: announcement of another cluster ignored",
			"from", src.String(), "clusterId", a.ClusterID, "peer", a.NodeName)
		return
	}
	if a.NodeName == m.self.NodeName {
		if a.Incarnation != m.self.Incarnation {
			m.limited.Warn("samename|"+src.String(), "discovery: another node announces this node's NodeName; give every node a unique NodeName",
				"from", src.String(), "nodeName", a.NodeName)
		}
		return
	}
	m.accept(a, msg.SentAt, src)
}

// rejected logs why an envelope failed, telling a neighbouring cluster
// (debug) from a forgery or a misconfigured node of this one (warning).
func (m *Multicast) rejected(b []byte, src net.IP, err error) {
	from := src.String()
	peek, perr := signing.Peek(b)
	if perr != nil {
		m.limited.Debug("garbage|"+from, "discovery: datagram that is not a Gantry announcement ignored",
			"from", from, "bytes", len(b))
		return
	}
	claimed, derr := decodeAnnouncement(peek.Payload)
	if derr == nil && claimed.ClusterID != m.self.ClusterID {
		m.limited.Debug("foreign|"+claimed.ClusterID, "discovery: announcement of another cluster ignored",
			"from", from, "clusterId", claimed.ClusterID, "err", err)
		return
	}
	args := []any{"from", from, "claimedNode", claimed.NodeName, "err", err}
	switch {
	case errors.Is(err, signing.ErrStale):
		m.limited.Warn("stale|"+from, "discovery: stale announcement dropped", args...)
	case errors.Is(err, signing.ErrUnsigned), errors.Is(err, signing.ErrUnexpectedSignature):
		m.limited.Warn("secret|"+from, "discovery: announcement from a node with a different SharedSecret setting dropped", args...)
	default:
		m.limited.Warn("forged|"+from, "discovery: announcement with a bad signature dropped: forged, or another SharedSecret", args...)
	}
}

// accept records a verified announcement of a peer.
func (m *Multicast) accept(a announcement, sentAt time.Time, src net.IP) {
	now := m.now()
	ip := src.String()
	m.mu.Lock()
	h := m.heard[a.NodeName]
	if h != nil && !sentAt.After(h.sentAt) {
		last := h.sentAt
		m.mu.Unlock()
		if sentAt.Before(last) {
			m.limited.Warn("replay|"+ip, "discovery: replayed announcement dropped",
				"from", ip, "peer", a.NodeName, "sentAt", sentAt, "lastAccepted", last)
		}
		return
	}
	found := h == nil || h.expired || now.Sub(h.lastSeen) > m.opts.ExpireAfter
	if h == nil {
		h = &heardNode{srcs: map[string]time.Time{}}
		m.heard[a.NodeName] = h
	}
	moved := h.ann.RaftAddr != a.RaftAddr || h.ann.Incarnation != a.Incarnation
	h.ann, h.sentAt, h.lastSeen, h.expired = a, sentAt, now, false
	h.srcs[ip] = now
	prevIP := h.srcIP
	h.srcIP = h.chooseSource(now, m.opts.ExpireAfter)
	moved = moved || prevIP != h.srcIP
	p := h.peer()
	m.mu.Unlock()

	switch {
	case found:
		m.log.Info("discovery: found peer", "peer", p.NodeName, "raftAddr", p.RaftAddr, "opsAddr", p.OpsAddr)
	case moved:
		m.log.Info("discovery: peer changed address or restarted", "peer", p.NodeName, "raftAddr", p.RaftAddr)
	}
}

// chooseSource keeps the source IP in use while it is still heard from,
// so that a peer on two shared LANs does not flip between addresses, and
// otherwise takes the most recent one. Called with Multicast.mu held.
func (h *heardNode) chooseSource(now time.Time, expire time.Duration) string {
	for ip, at := range h.srcs {
		if now.Sub(at) > expire {
			delete(h.srcs, ip)
		}
	}
	if _, ok := h.srcs[h.srcIP]; ok {
		return h.srcIP
	}
	best, bestAt := "", time.Time{}
	for ip, at := range h.srcs {
		if at.After(bestAt) {
			best, bestAt = ip, at
		}
	}
	return best
}

// expire logs peers that stopped announcing, and forgets them once their
// last timestamp is beyond the replay window (until then it still guards
// against replays of their announcements).
func (m *Multicast) expire() {
	now := m.now()
	keep := m.opts.ExpireAfter + max(m.signer.Window(), 0)
	var lost []string
	m.mu.Lock()
	for name, h := range m.heard {
		age := now.Sub(h.lastSeen)
		if age > m.opts.ExpireAfter && !h.expired {
			h.expired = true
			lost = append(lost, name)
		}
		if age > keep {
			delete(m.heard, name)
		}
	}
	m.mu.Unlock()
	for _, name := range lost {
		m.log.Info("discovery: peer stopped announcing", "peer", name, "after", m.opts.ExpireAfter)
	}
}
