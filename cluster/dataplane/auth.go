package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/cluster/signing"
)

// maxTokens bounds the link token ids a receiver remembers (for twice the
// signing window): a link dials at most every 100 ms, so 6 peers take a
// few thousand at worst; only verified tokens enter, so no one without
// the secret fills it.
const maxTokens = 16384

// token is the password a link presents to peer: a signed statement of
// cluster, sender, receiver and a fresh random id. The receiver takes
// each id once (checkToken), so a token read off the wire (a link without
// UseTls) admits nobody: its link used it. Each dial makes a new one.
//
// The layout is not that of builds before the id: nodes of one cluster
// run one build.
func (p *Plane) token(peer string) []byte {
	var id [16]byte
	rand.Read(id[:])
	return p.opts.Signer.Sign([]byte(tokenLabel + p.opts.ClusterID + "\x00" + p.opts.NodeName + "\x00" + peer + "\x00" + hex.EncodeToString(id[:])))
}

// checkToken verifies a link's password and spends its id.
func (p *Plane) checkToken(password []byte) error {
	env, err := p.opts.Signer.Verify(password)
	if err != nil {
		return err
	}
	parts := strings.Split(string(env.Payload), "\x00")
	if len(parts) != 5 || parts[0]+"\x00" != tokenLabel || parts[1] != p.opts.ClusterID || parts[3] != p.opts.NodeName || parts[4] == "" {
		return errBadToken
	}
	return p.tokens.Take(parts[4], env.SentAt)
}

// replayedToken reports whether checkToken refused a token that is
// genuine but spent, or signed before this process started: counted
// with the replayed frames, the others with the forged ones.
func replayedToken(err error) bool {
	return errors.Is(err, signing.ErrReplayed) || errors.Is(err, signing.ErrBeforeStart) || errors.Is(err, signing.ErrCacheFull)
}

// Authenticator wraps next: a link of a peer (the cluster user with a link
// token for its password) is admitted by the token; everything else,
// including the cluster user with its own password, goes to next.
func (p *Plane) Authenticator(next broker.Authenticator) broker.Authenticator {
	return &linkAuthenticator{p: p, next: next}
}

type linkAuthenticator struct {
	p    *Plane
	next broker.Authenticator
}

func (a *linkAuthenticator) Authenticate(info *broker.ConnInfo) error {
	// Without a SharedSecret a token is an unsigned statement anyone can
	// write: only the user's own password admits anyone then.
	if a.p.opts.Signer.Enabled() && info.Username == a.p.opts.Username && strings.HasPrefix(info.ClientID, linkClientPrefix) {
		if _, err := signing.Peek(info.Password); err == nil {
			if err := a.p.checkToken(info.Password); err != nil {
				if replayedToken(err) {
					a.p.recv.replayed.Add(1)
					a.p.warn("token-replayed", "refused a data-plane link whose token was used already or signed before this node started (a replay, or the peer's clock is behind)", err)
				} else {
					a.p.recv.forged.Add(1)
					a.p.warn("token", "refused a data-plane link with a bad token", err)
				}
				return packet.BadUserNameOrPassword
			}
			return nil
		}
	}
	if a.next == nil {
		return packet.BadUserNameOrPassword
	}
	return a.next.Authenticate(info)
}

// Authorizer wraps next: only the cluster user may publish or subscribe
// under InternalPrefix, and the cluster user always may; everything else
// goes to next (nil: allowed).
func (p *Plane) Authorizer(next broker.Authorizer) broker.Authorizer {
	a := &internalAuthorizer{user: p.opts.Username, next: next, refused: &p.recv.refused}
	if _, ok := next.(broker.NonBlocking); ok || next == nil {
		return nonBlockingAuthorizer{a}
	}
	return a
}

type internalAuthorizer struct {
	user    string
	next    broker.Authorizer
	refused *atomic.Uint64 // internal publishes and subscriptions refused
}

func (a *internalAuthorizer) internal(info *broker.ConnInfo) bool {
	if info.Username == a.user {
		return true
	}
	a.refused.Add(1)
	return false
}

type nonBlockingAuthorizer struct{ *internalAuthorizer }

func (nonBlockingAuthorizer) NeverBlocks() {}

func (a *internalAuthorizer) CanPublish(info *broker.ConnInfo, topic string) bool {
	if strings.HasPrefix(topic, InternalPrefix) {
		return a.internal(info)
	}
	return a.next == nil || a.next.CanPublish(info, topic)
}

func (a *internalAuthorizer) CanSubscribe(info *broker.ConnInfo, filter string) bool {
	if strings.HasPrefix(filter, InternalPrefix) || strings.HasPrefix(filter, "$share/") && strings.Contains(filter, "/"+InternalPrefix) {
		return a.internal(info)
	}
	return a.next == nil || a.next.CanSubscribe(info, filter)
}

// CanConnect passes to next when it decides connects; the cluster user's
// links are always admitted once authenticated.
func (a *internalAuthorizer) CanConnect(info *broker.ConnInfo) bool {
	if info.Username == a.user && strings.HasPrefix(info.ClientID, linkClientPrefix) {
		return true
	}
	if c, ok := a.next.(broker.ConnectAuthorizer); ok {
		return c.CanConnect(info)
	}
	return true
}
