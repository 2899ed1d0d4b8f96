package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gantry/appliance/config"
	"gantry/broker/auth"
	"gantry/cluster"
	"gantry/cluster/signing"
)

// This file joins the user store (broker/auth) to the cluster: on a
// clustered node the users are the cluster's, committed through Raft
// (cluster/users.go). Every change of the store — the LoT commands, the
// web console, the gantry command through the running node — goes
// through the cluster; every committed set is written into users.json,
// which the authenticator reads as on a single node.

// clusterUsers keeps this node's users.json in line with the cluster's.
type clusterUsers struct {
	n     *Node
	dirty chan struct{} // (capacity 1) the users changed: publish the list, decide subscriptions again

	mu        sync.Mutex // guards version, dpMissing; taken on the Raft apply goroutine
	version   uint64     // the cluster's users version last adopted
	dpMissing bool       // Cluster.DataPlaneUsername is not among the cluster's users
}

// openClusterUsers wires the user store to the cluster node, before it
// starts: the node offers this node's users when it forms a cluster, the
// cluster's committed users are written into users.json, and the store's
// changes go through the cluster.
func (n *Node) openClusterUsers() {
	c := &clusterUsers{n: n, dirty: make(chan struct{}, 1)}
	n.clusterUsers = c
	n.Cluster.SetLocalUsers(func() []cluster.User { return toClusterUsers(n.Users.Users()) })
	n.Cluster.OnState(c.applied)
	c.applied(n.Cluster.State()) // what Raft restored from a snapshot, before OnState
	n.Users.SetReplicator(usersThroughCluster{n.Cluster})
}

// applied runs after every change of the cluster's state, on the Raft
// apply goroutine.
func (c *clusterUsers) applied(st cluster.State) {
	u := st.Users
	if u.Version == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.Version == c.version {
		return // another part of the state changed
	}
	c.version = u.Version
	n := c.n
	log := n.log.With("component", "auth")
	users := make([]auth.User, len(u.List))
	for i, x := range u.List {
		users[i] = auth.User(x)
	}
	a, err := n.Users.AdoptCluster(users, auth.ClusterMark{Session: st.Session.ID, Version: u.Version}, time.Now())
	if err != nil {
		log.Error("cannot write the cluster's users into users.json; logins use the previous users", "version", u.Version, "err", err)
		return
	}
	if a.Backup != "" {
		log.Warn("this node's users were not the cluster's (its own before it joined, or changed on the file while it was stopped): the cluster's users replace them",
			"backup", a.Backup, "differ", strings.Join(a.Differ, ","))
	}
	if a.Written && slices.Contains(a.Differ, auth.RootName) {
		if path, err := auth.DropStaleInitialRoot(n.cfg.DataDir, users); err != nil {
			log.Warn("cannot remove the initial root password file", "err", err)
		} else if path != "" {
			log.Warn("the cluster's root replaces this node's: removed the initial root password file, which no longer logs in", "file", path)
		}
	}
	if a.Written {
		log.Info("applied the cluster's users", "version", u.Version, "users", len(users), "changed", strings.Join(a.Differ, ","))
	}
	c.checkDataPlaneUser(users)
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// checkDataPlaneUser says so, once per change, when the cluster's users
// lack Cluster.DataPlaneUsername.
func (c *clusterUsers) checkDataPlaneUser(users []auth.User) {
	name := c.n.cfg.Cluster.DataPlaneUsername
	if name == "" {
		return
	}
	missing := !slices.ContainsFunc(users, func(u auth.User) bool { return u.Name == name })
	if missing && !c.dpMissing {
		c.n.log.Error("the cluster's users lack Cluster.DataPlaneUsername: links between nodes cannot log in; add it on any node with -addUser",
			"component", "auth", "user", name)
	}
	c.dpMissing = missing
}

// startClusterUsers runs, until Shutdown, the follow-up of a change made
// on another node: the user list is published again and subscriptions are
// decided again.
func (n *Node) startClusterUsers() {
	c := n.clusterUsers
	if c == nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case <-n.stop:
				return
			case <-c.dirty:
				n.usersChanged()
			}
		}
	}()
}

func toClusterUsers(users []auth.User) []cluster.User {
	out := make([]cluster.User, len(users))
	for i, u := range users {
		out[i] = cluster.User(u)
	}
	return out
}

func userMap(list []cluster.User) map[string]auth.User {
	m := make(map[string]auth.User, len(list))
	for _, u := range list {
		m[u.Name] = auth.User(u)
	}
	return m
}

func userList(m map[string]auth.User) []cluster.User {
	out := make([]cluster.User, 0, len(m))
	for _, u := range m {
		out = append(out, cluster.User(u))
	}
	slices.SortFunc(out, func(a, b cluster.User) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// usersThroughCluster is the store's Replicator on a clustered node.
type usersThroughCluster struct{ c *cluster.Node }

func (r usersThroughCluster) Replicate(change func(map[string]auth.User) error) error {
	return r.c.UpdateUsers(context.Background(), func(list []cluster.User) ([]cluster.User, error) {
		m := userMap(list)
		if err := change(m); err != nil {
			return nil, err
		}
		return userList(m), nil
	})
}

// UsersThroughRunningNode is for the gantry command. When clustering is
// on and the node of cfg runs as a cluster member (its GET /cluster says
// so), it makes every change of s go to that node, which commits it
// through the cluster and answers once it applied it: through is true.
// Otherwise changes are made on users.json; running says whether a node
// answers there at all (one that runs with clustering refused reads the
// file as a single node does). See docs/cluster.md, "Users in a cluster".
func UsersThroughRunningNode(cfg config.Config, s *auth.Store) (through, running bool) {
	cl := &cfg.Cluster
	if !cl.Enabled || len(cfg.ClusterProblems()) > 0 || cfg.Ops.Port == 0 {
		return false, false
	}
	host := cfg.Ops.BindIP
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(cfg.Ops.Port))
	hc := &http.Client{Timeout: 30 * time.Second}
	probe := &http.Client{Timeout: 3 * time.Second}
	resp, err := probe.Get("http://" + addr + "/cluster")
	if err != nil {
		return false, false
	}
	var st cluster.Status
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
	resp.Body.Close()
	if err != nil || !st.Enabled || st.NodeName != cl.NodeName {
		return false, true
	}
	s.SetReplicator(&usersThroughNode{store: s, addr: addr, cluster: cl.ClusterId, node: cl.NodeName,
		requests: signing.NewRequests(signing.New([]byte(cl.SharedSecret), nil), nil), http: hc})
	return true, true
}

// usersThroughNode is the gantry command's Replicator: it computes the
// change on the cluster's users as users.json holds them and sends it to
// the running node.
type usersThroughNode struct {
	store         *auth.Store
	addr          string
	cluster, node string
	requests      *signing.Requests // sends only: the node's answers are checked against their request
	http          *http.Client
}

func (r *usersThroughNode) Replicate(change func(map[string]auth.User) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		mark, users, err := r.store.Marked()
		if err != nil {
			return err
		}
		if mark == nil {
			return cluster.ErrNoUsers
		}
		if err := change(users); err != nil {
			return err
		}
		_, err = cluster.PostUsers(ctx, r.http, r.requests, r.addr, r.node, cluster.UsersRequest{ClusterID: r.cluster,
			From: "gantry command on " + r.node, Node: r.node, Base: mark.Version, Users: userList(users)})
		if errors.Is(err, cluster.ErrUsersConflict) && attempt < 5 {
			continue // the node waited for the newer users: compute again
		}
		return err
	}
}
