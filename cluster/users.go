package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"gantry/cluster/signing"
)

// This file replicates the user store through Raft (see doc.go, "Users").

// UsersPath is the peer protocol's user change: POST a signed
// UsersRequest, answered (signed) with a UsersReply.
const UsersPath = "/cluster/users"

// User is one account of the cluster's user store, the record broker/auth
// keeps in users.json (same fields, same JSON): the appliance converts.
type User struct {
	Name   string   `json:"name"`
	Hash   string   `json:"hash"`
	Admin  bool     `json:"admin,omitempty"`
	Flags  []string `json:"flags,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Users is the cluster's user store: every user, one version.
type Users struct {
	// Version counts the committed changes; 0 means the cluster has no
	// users yet (its leader proposes its own, seedUsers).
	Version uint64 `json:"version"`
	List    []User `json:"list,omitempty"`
}

// usersChange is the command of a user change: the whole new set, valid
// only on top of Base (compare and set), so that a change computed on a
// stale copy is refused rather than undoing another.
type usersChange struct {
	Base  uint64 `json:"base"`
	Users []User `json:"users"`
}

// Errors of user changes.
var (
	// ErrUsersConflict: the users changed between reading and committing;
	// UpdateUsers computes the change again on the new set.
	ErrUsersConflict = errors.New("cluster: the users changed meanwhile")
	// ErrNoAdmin: the change would leave the cluster without an
	// administrator.
	ErrNoAdmin = errors.New("cluster: the cluster must keep at least one administrator: change refused")
	// ErrNoUsers: this node has not received the cluster's users yet
	// (it is not a member yet, or no leader has committed them).
	ErrNoUsers = errors.New("cluster: this node has not received the cluster's users yet (not a member yet, or no leader): try again, or on another node")
	// ErrNoMajority: no leader, or the leader could not commit.
	ErrNoMajority    = errors.New("cluster: no majority of the members is reachable: user change refused")
	errUsersNoSecret = errors.New("cluster: user changes between nodes need Cluster.SharedSecret: make the change on the leader, or set the secret")
)

// maxUsersBody bounds a user change on the peer protocol: some ten
// thousand users.
const maxUsersBody = 4 << 20

// usersTimeout bounds one user change, forwarding and retries included.
const usersTimeout = 2 * applyTimeout

// applyUsers runs on the FSM (mu held): the compare and set of a change.
func (f *fsm) applyUsers(c *usersChange) (result any, changed bool) {
	cur := f.state.Users.Version
	switch {
	case c == nil:
		return errors.New("cluster: user change without users"), false
	case c.Base != cur:
		return fmt.Errorf("%w: based on version %d, the cluster is at %d", ErrUsersConflict, c.Base, cur), false
	case !hasAdmin(c.Users):
		return ErrNoAdmin, false
	}
	f.state.Users = Users{Version: cur + 1, List: c.Users}
	return nil, true
}

func hasAdmin(users []User) bool {
	for _, u := range users {
		if u.Admin {
			return true
		}
	}
	return false
}

// SetLocalUsers gives the node this node's own users: a leader of a
// cluster that has none yet proposes them as the cluster's (the first
// cluster adopts its bootstrapping node's users). Call it before Start
// (or the leader proposes only once it is called).
func (n *Node) SetLocalUsers(f func() []User) { n.localUsers.Store(&f) }

// Users returns the cluster's users as this node has applied them.
func (n *Node) Users() Users { return n.fsm.current().Users }

// seedUsers, on the leader, proposes this node's users when the cluster
// has none (a new cluster, or one formed before users were replicated).
func (n *Node) seedUsers() {
	f := n.localUsers.Load()
	if f == nil || n.fsm.current().Users.Version != 0 {
		return
	}
	users := (*f)()
	if _, err := n.commitUsers(0, users); err != nil {
		n.warnEvery("seedUsers", "cannot make this node's users the cluster's", "err", err)
		return
	}
	n.log.Info("the cluster adopts this node's users", "users", len(users))
}

// commitUsers commits a change on the leader. Changes are serialised, so
// a change that commits makes version base+1.
func (n *Node) commitUsers(base uint64, users []User) (uint64, error) {
	n.usersMu.Lock()
	defer n.usersMu.Unlock()
	err := n.apply(command{Version: commandVersion, Op: opUsers, Users: &usersChange{Base: base, Users: users}})
	switch {
	case err == nil:
		return base + 1, nil
	case errors.Is(err, ErrUsersConflict), errors.Is(err, ErrNoAdmin), errors.Is(err, ErrNotLeader):
		return 0, err
	default:
		return 0, fmt.Errorf("%w (%v)", ErrNoMajority, err)
	}
}

// UpdateUsers applies change to the cluster's users as this node knows
// them and commits the result through the leader (a follower passes it on,
// signed); it returns once this node has applied it (its OnState callbacks
// ran). A change computed on a stale copy is computed again on the new one.
// Without a majority the change is refused (ErrNoMajority).
func (n *Node) UpdateUsers(ctx context.Context, change func([]User) ([]User, error)) error {
	ctx, cancel := context.WithTimeout(ctx, usersTimeout)
	defer cancel()
	for {
		cur := n.fsm.current().Users
		if cur.Version == 0 {
			return ErrNoUsers
		}
		users, err := change(append([]User(nil), cur.List...))
		if err != nil {
			return err
		}
		v, err := n.proposeUsers(ctx, cur.Version, users)
		var c *ConflictError
		switch {
		case errors.As(err, &c):
			// Wait for the newer set here before computing again.
			if err := n.awaitUsers(ctx, c.Current); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		return n.awaitUsers(ctx, v)
	}
}

// proposeUsers commits on the leader: here, or through the peer protocol.
func (n *Node) proposeUsers(ctx context.Context, base uint64, users []User) (uint64, error) {
	req := UsersRequest{ClusterID: n.opts.ClusterID, From: n.opts.NodeName, Base: base, Users: users}
	return n.viaLeader(ctx, ErrNoMajority,
		func() (uint64, error) {
			v, err := n.commitUsers(base, users)
			if errors.Is(err, ErrUsersConflict) {
				return 0, &ConflictError{Current: n.fsm.current().Users.Version}
			}
			return v, err
		},
		func(ops, id string) (uint64, error) { return PostUsers(ctx, n.changeHTTP, n.requests, ops, id, req) })
}

// leaderOps is where the leader answers the peer protocol: where
// discovery lists it (by name, or by its Raft address), else its Raft
// host and PeerOpsPort.
func (n *Node) leaderOps(ctx context.Context, id, raftAddr string) string {
	if n.opts.Discovery != nil {
		peers, _ := n.opts.Discovery.Peers(ctx)
		for _, p := range peers {
			if p.NodeName == id || (p.NodeName == "" && p.RaftAddr == raftAddr) {
				if a := n.opsAddr(p); a != "" {
					return a
				}
			}
		}
	}
	host, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(n.opts.PeerOpsPort))
}

// awaitUsers waits until this node has applied version v of the users.
func (n *Node) awaitUsers(ctx context.Context, v uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for n.fsm.usersApplied.Load() < v {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: this node has not applied the users' version %d yet: %w", v, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// ConflictError is ErrUsersConflict with the version the cluster is at.
type ConflictError struct{ Current uint64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: now at version %d", ErrUsersConflict, e.Current)
}
func (e *ConflictError) Unwrap() error { return ErrUsersConflict }

// UsersRequest is the body of POST UsersPath.
type UsersRequest struct {
	ClusterID string `json:"clusterId"`
	From      string `json:"from"` // the sending node, or "gantry command"
	// Node, when set, is the node the request is for: it passes the
	// change to the leader itself and answers once it applied it (the
	// gantry command asks its own node so).
	Node  string `json:"node,omitempty"`
	Base  uint64 `json:"base"`
	Users []User `json:"users"`
}

// UsersReply answers a UsersRequest.
type UsersReply struct {
	Version  uint64 `json:"version,omitempty"`
	Conflict uint64 `json:"conflict,omitempty"` // the current version, when Base was stale
	Code     string `json:"code,omitempty"`     // "noAdmin", "noMajority", "notLeader", "conflict"
	Error    string `json:"error,omitempty"`
}

func (n *Node) serveUsers(w http.ResponseWriter, r *http.Request) {
	if !n.signer.Enabled() {
		http.Error(w, errUsersNoSecret.Error(), http.StatusForbidden)
		return
	}
	var req UsersRequest
	signed, ok := n.readRequest(w, r, UsersPath, maxUsersBody, &req)
	if !ok {
		return
	}
	defer signed.Done()
	if req.ClusterID != n.opts.ClusterID || (req.Node != "" && req.Node != n.opts.NodeName) {
		n.writeReply(w, signed, http.StatusConflict, UsersReply{Error: fmt.Sprintf(
			"cluster: this is node %s of cluster %q, the change is for node %q of %q", n.opts.NodeName, n.opts.ClusterID, req.Node, req.ClusterID)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), usersTimeout)
	defer cancel()
	var v uint64
	var err error
	switch {
	case req.Node != "": // the gantry command on this node: pass on, then apply here
		if v, err = n.proposeUsers(ctx, req.Base, req.Users); err == nil {
			err = n.awaitUsers(ctx, v)
		}
		var c *ConflictError
		if errors.As(err, &c) {
			n.awaitUsers(ctx, c.Current) // so that the command reads the new set
		}
	case n.raft.State() == raft.Leader:
		v, err = n.proposeUsers(ctx, req.Base, req.Users)
	default:
		err = ErrNotLeader
	}
	rep := UsersReply{Version: v}
	status := http.StatusOK
	if err != nil {
		rep, status = UsersReply{Error: err.Error()}, http.StatusConflict
		var c *ConflictError
		switch {
		case errors.As(err, &c):
			rep.Code, rep.Conflict = "conflict", c.Current
		case errors.Is(err, ErrNoAdmin):
			rep.Code = "noAdmin"
		case errors.Is(err, ErrNotLeader):
			rep.Code = "notLeader"
		case errors.Is(err, ErrNoMajority):
			rep.Code, status = "noMajority", http.StatusServiceUnavailable
		}
	} else {
		n.log.Info("committed a user change", "from", req.From, "version", v)
	}
	n.writeReply(w, signed, status, rep)
}

// PostUsers sends a user change to node to, answering the peer protocol
// at opsAddr, signed by q, and returns the version it committed. The
// errors are this package's (ConflictError, ErrNoAdmin, ErrNoMajority,
// ErrNotLeader) with the node's words.
func PostUsers(ctx context.Context, client *http.Client, q *signing.Requests, opsAddr, to string, req UsersRequest) (uint64, error) {
	var rep UsersReply
	ans, err := postRequest(ctx, client, q, opsAddr, UsersPath, to, req, &rep)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoMajority, err)
	}
	if ans.Err != nil {
		if ans.Status == http.StatusForbidden {
			return 0, fmt.Errorf("cluster: user change refused by %s: %d %s (is Cluster.SharedSecret the same on every node?)", opsAddr, ans.Status, bytes.TrimSpace(ans.Body))
		}
		return 0, fmt.Errorf("%w: user change via %s: %d %s: %v", ErrNoMajority, opsAddr, ans.Status, bytes.TrimSpace(ans.Body), ans.Err)
	}
	switch rep.Code {
	case "":
		if rep.Error != "" {
			return 0, errors.New(rep.Error)
		}
		return rep.Version, nil
	case "conflict":
		return 0, &ConflictError{Current: rep.Conflict}
	case "noAdmin":
		return 0, ErrNoAdmin
	case "notLeader":
		return 0, fmt.Errorf("%w (%s): %w", ErrNoMajority, opsAddr, ErrNotLeader)
	case "noMajority":
		return 0, fmt.Errorf("%w: %s", ErrNoMajority, rep.Error)
	}
	return 0, errors.New(rep.Error)
}
