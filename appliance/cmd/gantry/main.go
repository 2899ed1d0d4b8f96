// Command gantry runs one Gantry node.
//
//	gantry -config FILE     run from a JSON configuration file
//	gantry -dev             run on the embedded development defaults
//	gantry -checkConfig FILE validate a configuration file and exit
//	gantry [-config FILE] -addUser NAME PASSWORD [-admin]
//	gantry [-config FILE] -removeUser NAME
//	gantry [-config FILE] -changePassword NAME PASSWORD (alias -changeUserPassword)
//	gantry [-config FILE] -changeUserSettings NAME FLAG true|false
//	gantry [-config FILE] -addUserToGroup NAME GROUP
//	gantry [-config FILE] -removeUserFromGroup NAME GROUP
//	gantry [-config FILE] -listUserGroups NAME
//	gantry [-config FILE] -listUsers
//
// The user commands work on the data directory of the configuration,
// whether the node is running or not.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gantry/appliance"
	"gantry/appliance/config"
	"gantry/broker/auth"
)

func main() {
	tuneGC()
	serveProfiles()
	os.Exit(run())
}

func run() int {
	configPath := flag.String("config", "", "JSON configuration `file` (environment variables win over it)")
	dev := flag.Bool("dev", false, "run on the embedded development defaults (anonymous clients from loopback only)")
	check := flag.String("checkConfig", "", "validate the configuration `file` and exit")
	version := flag.Bool("version", false, "print the version and exit")
	addUser := flag.String("addUser", "", "add user `NAME` with the password that follows, and exit")
	admin := flag.Bool("admin", false, "with -addUser: make the user an administrator")
	removeUser := flag.String("removeUser", "", "remove user `NAME` and exit")
	changePassword := flag.String("changePassword", "", "set the password of user `NAME` to the one that follows, and exit")
	flag.StringVar(changePassword, "changeUserPassword", "", "the same as -changePassword")
	settings := flag.String("changeUserSettings", "", "set permission flag FLAG of user `NAME` to true or false (the two arguments that follow), and exit")
	toGroup := flag.String("addUserToGroup", "", "add user `NAME` to the group that follows, and exit")
	fromGroup := flag.String("removeUserFromGroup", "", "remove user `NAME` from the group that follows, and exit")
	listGroups := flag.String("listUserGroups", "", "print the groups of user `NAME`, and exit")
	listUsers := flag.Bool("listUsers", false, "print the users with their flags and groups (JSON, no password hashes), and exit")
	flag.Parse()
	if *version {
		fmt.Println("gantry", appliance.Version)
		return 0
	}
	if *check != "" {
		c, err := config.Load(*check, os.LookupEnv)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if ps := c.ClusterProblems(); len(ps) > 0 {
			fmt.Fprintln(os.Stderr, strings.Join(ps, "\n"))
			fmt.Fprintln(os.Stderr, "the node would run without clustering")
			return 1
		}
		fmt.Println("configuration OK:", *check)
		return 0
	}
	cfg, err := config.LoadNode(*configPath, *dev, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch {
	case *addUser != "":
		return userCommand(cfg, func(s *auth.Store) error {
			if err := s.Add(*addUser, passwordArg(), adminArg(*admin)); err != nil {
				return err
			}
			if s.Admins() == 0 {
				fmt.Fprintf(os.Stderr, "no administrator yet: the node's next start creates the administrator %s and writes its password to %s\n",
					auth.RootName, filepath.Join(cfg.DataDir, auth.InitialRootFile))
			}
			return nil
		}, "added user "+*addUser)
	case *removeUser != "":
		return userCommand(cfg, func(s *auth.Store) error { return s.Remove(*removeUser) }, "removed user "+*removeUser)
	case *changePassword != "":
		return userCommand(cfg, func(s *auth.Store) error { return s.SetPassword(*changePassword, passwordArg()) }, "changed the password of "+*changePassword)
	case *settings != "":
		return userCommand(cfg, func(s *auth.Store) error { return setFlag(s, *settings, flag.Args()) }, "changed the settings of "+*settings)
	case *toGroup != "":
		return userCommand(cfg, func(s *auth.Store) error { return s.AddToGroup(*toGroup, groupArg()) }, "added "+*toGroup+" to group "+groupArg())
	case *fromGroup != "":
		return userCommand(cfg, func(s *auth.Store) error { return s.RemoveFromGroup(*fromGroup, groupArg()) }, "removed "+*fromGroup+" from group "+groupArg())
	case *listGroups != "":
		return userCommand(cfg, func(s *auth.Store) error { return printGroups(s, *listGroups) }, "")
	case *listUsers:
		return userCommand(cfg, func(s *auth.Store) error { fmt.Println(string(appliance.UsersJSON(s))); return nil }, "")
	}
	return serve(cfg, *configPath, *dev)
}

// passwordArg is the positional argument after -addUser/-changePassword
// NAME. A trailing -admin (after the password, where the flag package no
// longer parses flags) is accepted too.
func passwordArg() string {
	args := flag.Args()
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func adminArg(admin bool) bool {
	args := flag.Args()
	return admin || (len(args) == 2 && (args[1] == "-admin" || args[1] == "--admin"))
}

// groupArg is the positional argument after -addUserToGroup NAME.
func groupArg() string {
	if args := flag.Args(); len(args) > 0 {
		return args[0]
	}
	return ""
}

// setFlag reads FLAG true|false after -changeUserSettings NAME.
func setFlag(s *auth.Store, name string, args []string) error {
	if len(args) != 2 || (args[1] != "true" && args[1] != "false") {
		return fmt.Errorf("-changeUserSettings %s: want a permission flag and true or false, got %q; flags: %s",
			name, args, strings.Join(auth.KnownFlags, ", "))
	}
	return s.SetFlag(name, args[0], args[1] == "true")
}

func printGroups(s *auth.Store, name string) error {
	u, ok := s.Lookup(name)
	if !ok {
		return fmt.Errorf("%w: %s", auth.ErrUnknownUser, name)
	}
	fmt.Println(strings.Join(u.Groups, "\n"))
	return nil
}

// clusterOfflineNote is said when a user command changes users.json of a
// clustered node that does not run (docs/cluster.md, "Users in a cluster").
const clusterOfflineNote = "note: clustering is on but this node does not answer on its operations port: the change is made in this node's users.json only. " +
	"A node that forms a new cluster brings these users into it; a node that is, or becomes, a member of a running cluster takes the cluster's users when it starts " +
	"(this file is kept as users.json.local-TIME). To change the cluster's users, run the command while a node runs."

func userCommand(cfg config.Config, f func(*auth.Store) error, done string) int {
	s, err := appliance.OpenUsers(cfg.DataDir)
	if err == nil {
		if through, running := appliance.UsersThroughRunningNode(cfg, s); !through && !running && cfg.Cluster.Enabled && done != "" {
			fmt.Fprintln(os.Stderr, clusterOfflineNote)
		}
	}
	if err == nil {
		err = f(s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if done != "" {
		fmt.Println(done)
	}
	return 0
}

func serve(cfg config.Config, configPath string, dev bool) int {
	tuneProcs(cfg.Durability.Enabled || (cfg.Cluster.Enabled && len(cfg.ClusterProblems()) == 0))
	log, level := appliance.NewLogger(os.Stderr, cfg.Logging)
	for _, w := range cfg.Warnings() {
		log.Warn(w, "component", "config")
	}
	node, err := appliance.New(cfg, log, level)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if err := node.Start(); err != nil {
		log.Error("cannot start", "err", err)
		node.Shutdown(context.Background())
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var s os.Signal
	for s == nil {
		select {
		case got := <-sig:
			if got != syscall.SIGHUP {
				s = got
				continue
			}
			log.Info("reloading", "component", "appliance", "signal", got.String())
			node.Reload(reloadLevel(configPath, dev, cfg.Logging.Level, log))
		case <-node.Restart():
			log.Info("restarting with the new settings", "component", "appliance")
			shutdown(node, log)
			return reexec(log)
		}
	}
	log.Info("shutting down", "component", "appliance", "signal", s.String())
	shutdown(node, log)
	return 0
}

func shutdown(node *appliance.Node, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.Shutdown(ctx); err != nil {
		log.Warn("shutdown did not finish in time", "component", "appliance", "err", err)
	}
}

// reexec replaces the process with a fresh start of the same program,
// arguments and environment (the same process id, so a supervisor such as
// systemd keeps tracking it), which reads the configuration again. It
// returns only when that fails.
func reexec(log *slog.Logger) int {
	self, err := os.Executable()
	if err == nil {
		err = syscall.Exec(self, os.Args, os.Environ())
	}
	log.Error("cannot start again; exiting so that a supervisor restarts the node", "component", "appliance", "err", err)
	return 1
}

// reloadLevel reads the configuration again for its log level; a file that
// no longer loads keeps the current level.
func reloadLevel(path string, dev bool, current string, log *slog.Logger) string {
	cfg, err := config.LoadNode(path, dev, os.LookupEnv)
	if err != nil {
		log.Error("configuration no longer loads; log level unchanged", "component", "appliance", "err", err)
		return current
	}
	return cfg.Logging.Level
}
