package appliance

import (
	"context"
	"fmt"
	"path/filepath"

	"gantry/broker/auth"
	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/rules"
	"gantry/lot/runtime"
)

// Files of LoT under the data directory.
const (
	lotDir      = "lot"           // the definitions store
	lotEnvFile  = "lot-env.json"  // values of -setEnv and -setSecret (mode 0600)
	lotKeptFile = "lot-kept.json" // values of KEEP TOPIC (mode 0600)
	projectsDir = "projects"      // the projects -loadProject NAME reads
)

// openLoT opens the definitions store and builds the LoT engine, which
// then decides access on connect, publish and subscribe (its built-in
// rules include what broker/auth's do) and sees client events.
func (n *Node) openLoT() error {
	store, err := defs.OpenLocal(filepath.Join(n.cfg.DataDir, lotDir), nil)
	if err != nil {
		return err
	}
	for _, p := range store.Problems() {
		n.log.Error("LoT definition skipped", "component", "lot", "err", p)
	}
	n.lotDefs = newClusterDefs(store, n.cfg.DataDir, n.log) // wire_cluster_lot.go
	var placement runtime.Placement
	var kept runtime.KeptReplicator
	if n.cfg.Cluster.Enabled {
		n.keptSync = newKeptSync(n) // wire_cluster_kept.go
		kept = n.keptSync
		n.boot = newBoot()
		n.placement = newWorkPlacement(n) // wire_cluster_work.go
		placement = n.placement
	}
	eng, err := runtime.New(runtime.Options{
		Placement: placement, KeptOut: kept,
		Broker: n.Broker, Store: n.lotDefs, Users: n.lotUsers(),
		EnvFile: filepath.Join(n.cfg.DataDir, lotEnvFile), KeptFile: filepath.Join(n.cfg.DataDir, lotKeptFile), ProjectsDir: filepath.Join(n.cfg.DataDir, projectsDir),
		SeedRules: true, Logger: n.log,
		Handlers:   command.Handlers{Users: n.lotUsers()},
		Connectors: lotConnectors{n.drivers}, // wire_drivers.go
	})
	if err != nil {
		return err
	}
	n.LoT = eng
	n.Broker.SetAuthorizer(eng.Authorizer())
	n.Broker.AddObserver(eng)
	return nil
}

// lotUsers shows the user store to LoT: for the access rules, and for the
// user commands of $SYS/Coreflux/Command.
// Flags and groups are in wire_users.go.
type lotUsers struct {
	s       *auth.Store
	changed func() // after a change: republish the users, decide subscriptions again
}

func (u lotUsers) RuleUser(name string) (rules.User, bool) {
	usr, ok := u.s.Lookup(name)
	if !ok {
		return rules.User{}, false
	}
	return rules.User{Name: usr.Name, Admin: usr.Admin, Flags: usr.Flags, Groups: usr.Groups}, true
}

func (u lotUsers) AddUser(_ context.Context, _ command.Caller, name, password string) error {
	return u.done(u.s.Add(name, password, false))
}

// RemoveUser removes a user. Only an administrator may remove an
// administrator, and the last administrator stays.
func (u lotUsers) RemoveUser(_ context.Context, c command.Caller, name string) error {
	if err := u.mayManage(c, name); err != nil {
		return err
	}
	if t, ok := u.s.Lookup(name); ok && t.Admin && u.admins() == 1 {
		return fmt.Errorf("%s is the last administrator; add another one first", name)
	}
	return u.done(u.s.Remove(name))
}

// ChangePassword sets a user's password. Only an administrator may change
// an administrator's: a user granted password changes by a rule must not
// be able to take over root.
func (u lotUsers) ChangePassword(_ context.Context, c command.Caller, name, password string) error {
	if err := u.mayManage(c, name); err != nil {
		return err
	}
	return u.s.SetPassword(name, password)
}

// mayManage refuses a caller who is not an administrator acting on one.
func (u lotUsers) mayManage(c command.Caller, name string) error {
	if t, ok := u.s.Lookup(name); !ok || !t.Admin {
		return nil
	}
	if me, ok := u.s.Lookup(c.User); ok && me.Admin {
		return nil
	}
	return fmt.Errorf("only an administrator may change the administrator %s", name)
}

func (u lotUsers) admins() int {
	n := 0
	for _, name := range u.s.Names() {
		if usr, ok := u.s.Lookup(name); ok && usr.Admin {
			n++
		}
	}
	return n
}
