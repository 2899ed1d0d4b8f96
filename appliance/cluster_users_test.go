package appliance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClusterUsers runs three gantry processes and checks that users are
// the cluster's: the first cluster adopts the bootstrapping node's users
// and the others back theirs up; a user added with -addUser on one node,
// or through $SYS/Coreflux/Command on another, logs in on every node;
// removed on one node, it is refused on the others; the last
// administrator cannot be removed; a node that joins later with its own
// users takes the cluster's and backs its own up; without a majority a
// change is refused.
func TestClusterUsers(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	gantry := func(nd *crashNode, args ...string) (string, error) {
		cmd := exec.Command(nd.bin, append([]string{"-dev"}, args...)...)
		cmd.Env = nd.env()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	addOwn := func(nd *crashNode) {
		name := "own-" + filepath.Base(nd.ip)
		out, err := gantry(nd, "-addUser", "own-"+nd.ip, "pw-"+nd.ip)
		if err != nil {
			t.Fatalf("-addUser %s before start: %v\n%s", name, err, out)
		}
		if !strings.Contains(out, "does not answer on its operations port") {
			t.Errorf("-addUser on a stopped clustered node did not say the change is local: %s", out)
		}
	}
	nodes := clusterOf(t, 3, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_MQTT_ALLOW_ANONYMOUS=false")
		addOwn(nd)
	})
	a, b, c := nodes[0], nodes[1], nodes[2]
	login := func(nd *crashNode, user, pass string) error {
		out, err := exec.Command(pub, "-h", nd.ip, "-t", "t", "-m", "x", "-q", "1", "-u", user, "-P", pass).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s as %s: %v: %s", nd.ip, user, err, out)
		}
		return nil
	}
	logsIn := func(user, pass string, on ...*crashNode) {
		t.Helper()
		eventually(t, 15*time.Second, func() error {
			for _, nd := range on {
				if err := login(nd, user, pass); err != nil {
					return err
				}
			}
			return nil
		})
	}
	refused := func(user, pass string, on ...*crashNode) {
		t.Helper()
		eventually(t, 15*time.Second, func() error {
			for _, nd := range on {
				if login(nd, user, pass) == nil {
					return fmt.Errorf("%s logs in on %s", user, nd.ip)
				}
			}
			return nil
		})
	}
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")

	// The bootstrapping node (broker-a, first by name) brought its users.
	rootPW, err := os.ReadFile(filepath.Join(a.dataDir, "initial-root-password"))
	if err != nil {
		t.Fatalf("the bootstrapping node's initial root password: %v", err)
	}
	root := strings.TrimSpace(string(rootPW))
	logsIn("own-"+a.ip, "pw-"+a.ip, a, b, c)
	logsIn("root", root, b, c)
	for _, nd := range []*crashNode{b, c} {
		refused("own-"+nd.ip, "pw-"+nd.ip, nd)
		if backups, _ := filepath.Glob(filepath.Join(nd.dataDir, "users.json.local-*")); len(backups) != 1 {
			t.Errorf("%s: backups of its own users %v, want one\n%s", nd.ip, backups, nd.stderr())
		} else if data, _ := os.ReadFile(backups[0]); !strings.Contains(string(data), "own-"+nd.ip) {
			t.Errorf("%s: backup %s lacks its own user: %s", nd.ip, backups[0], data)
		}
		if _, err := os.Stat(filepath.Join(nd.dataDir, "initial-root-password")); err == nil {
			t.Errorf("%s: initial-root-password still there after the cluster's root replaced its own", nd.ip)
		}
	}

	// -addUser on a, while it runs; a command through $SYS on b.
	if out, err := gantry(a, "-addUser", "alice", "alice-pw"); err != nil || strings.Contains(out, "note:") {
		t.Fatalf("-addUser alice on the running node: %v\n%s", err, out)
	}
	logsIn("alice", "alice-pw", a, b, c)
	out, err := exec.Command(pub, "-h", b.ip, "-u", "root", "-P", root, "-q", "1",
		"-t", "$SYS/Coreflux/Command", "-m", "-addUser bob bob-pw").CombinedOutput()
	if err != nil {
		t.Fatalf("command on %s: %v: %s", b.ip, err, out)
	}
	logsIn("bob", "bob-pw", a, b, c)

	// Removed on c, refused everywhere.
	if out, err := gantry(c, "-removeUser", "alice"); err != nil {
		t.Fatalf("-removeUser alice on c: %v\n%s", err, out)
	}
	refused("alice", "alice-pw", a, b)

	// The last administrator stays, whichever node is asked.
	rm, err := gantry(b, "-removeUser", "root")
	if err == nil || !strings.Contains(rm, "last administrator") {
		t.Fatalf("-removeUser root (the last administrator) on b: %v\n%s", err, rm)
	}
	logsIn("root", root, a, b, c)

	// c's disk is replaced: a new node with its own users joins later.
	c.kill()
	c.dataDir = t.TempDir()
	addOwn(c)
	c.start()
	agreeOnLeader(t, nodes, 3, 30*time.Second, "")
	logsIn("bob", "bob-pw", c)
	refused("own-"+c.ip, "pw-"+c.ip, c)
	if backups, _ := filepath.Glob(filepath.Join(c.dataDir, "users.json.local-*")); len(backups) != 1 {
		t.Errorf("joined later: backups %v, want one\n%s", backups, c.stderr())
	}

	// Without a majority a change is refused, with the reason.
	a.kill()
	b.kill()
	if out, err := gantry(c, "-addUser", "carol", "carol-pw"); err == nil || !strings.Contains(out, "no majority") {
		t.Fatalf("-addUser with two of three nodes down: %v\n%s", err, out)
	}
}

// TestUserCommandOnNodeWithClusteringRefused: a node whose clustering did
// not start (its DataPlaneUsername does not exist yet, the quick start's
// steps out of order) reads users.json as a single node does, so the
// gantry command that adds the missing user changes the file, and says
// nothing about a cluster.
func TestUserCommandOnNodeWithClusteringRefused(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	nd := clusterOf(t, 1, func(nd *crashNode) {
		nd.extra = append(nd.extra, "COREFLUX_CLUSTER_DATAPLANE_USERNAME=cluster", "COREFLUX_MQTT_ALLOW_ANONYMOUS=false")
	})[0]
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(nd.stderr(), "clustering does not start") {
			return fmt.Errorf("no refusal in the log yet")
		}
		return nil
	})
	cmd := exec.Command(nd.bin, "-dev", "-addUser", "cluster", clusterUserPassword)
	cmd.Env = nd.env()
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "note:") {
		t.Fatalf("-addUser cluster on a node running without clustering: %v\n%s", err, out)
	}
	if out, err := exec.Command(pub, "-h", nd.ip, "-t", "t", "-m", "x", "-u", "cluster", "-P", clusterUserPassword).CombinedOutput(); err != nil {
		t.Fatalf("the added user logs in: %v: %s", err, out)
	}
}
