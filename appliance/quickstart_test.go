package appliance_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeedQuickStart follows the seed's Quick Start literally with the real
// binary: create the cluster service user with -addUser, write the Cluster
// and Durability configuration, start the node. The store then holds an
// ordinary user but no administrator, so the first start must still create
// root and write its password; root then deploys a LoT action that runs.
func TestSeedQuickStart(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	sub := needTool(t, "mosquitto_sub")
	bin := gantryBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	ip := loopbackIP()
	configPath := filepath.Join(dir, "gantry.json")
	writeFile(t, configPath, fmt.Sprintf(`{
  "DataDir": %q,
  "Mqtt": {"BindIP": %q, "WebSocketPort": 0},
  "Cluster": {
    "Enabled": true,
    "ClusterId": "factory-floor",
    "NodeName": "broker-a",
    "Discovery": "seeds",
    "Seeds": [%q],
    "SharedSecret": "a-long-random-secret",
    "DataPlaneUsername": "cluster"
  },
  "Durability": {"Enabled": true}
}`, dataDir, ip, net.JoinHostPort(ip, "9200")))

	// Step 1: the cluster service user, on a store that has no users yet.
	add := exec.Command(bin, "-config", configPath, "-addUser", "cluster", "a-strong-password")
	var addErr lockedBuffer
	add.Stderr = &addErr
	if out, err := add.Output(); err != nil {
		t.Fatalf("-addUser: %v\n%s%s", err, out, addErr.String())
	}
	wantNote := filepath.Join(dataDir, "initial-root-password")
	if s := addErr.String(); !strings.Contains(s, "creates the administrator root") || !strings.Contains(s, wantNote) {
		t.Fatalf("-addUser on a store without an administrator said %q on stderr, want where root's password will be (%s)", s, wantNote)
	}

	// Step 2: start the node.
	node, log := startQuickStartNode(t, bin, configPath)
	var password string
	eventually(t, 20*time.Second, func() error {
		data, err := os.ReadFile(wantNote)
		if err != nil {
			return err
		}
		password = strings.TrimSpace(string(data))
		return nil
	})
	// The log line follows the file's write: wait for it too.
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(log.String(), "no administrator in the user store") {
			return errors.New("the node's log does not say why it created root")
		}
		return nil
	})
	mqtt := func(tool string, args ...string) *exec.Cmd {
		return exec.Command(tool, append([]string{"-h", ip, "-u", "root", "-P", password, "-V", "mqttv5"}, args...)...)
	}
	eventually(t, 20*time.Second, func() error {
		if out, err := mqtt(pub, "-t", "probe", "-m", "x").CombinedOutput(); err != nil {
			return fmt.Errorf("root cannot log in: %v %s", err, out)
		}
		return nil
	})

	// Step 3: root deploys a LoT action, and it runs.
	action := `-addAction DEFINE ACTION Echo ON TOPIC "in/#" DO PUBLISH TOPIC "out/" + TOPIC POSITION 2 WITH PAYLOAD`
	if out, err := mqtt(pub, "-t", "$SYS/Coreflux/Command", "-m", action, "-q", "1").CombinedOutput(); err != nil {
		t.Fatalf("deploying as root: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch := exec.CommandContext(ctx, sub, "-h", ip, "-u", "root", "-P", password, "-t", "out/#", "-v", "-C", "1")
	var got lockedBuffer
	watch.Stdout = &got
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil || strings.TrimSpace(got.String()) != "out/hello 21.5" {
				t.Fatalf("the action's output: %q %v", got.String(), err)
			}
			restartStillWarns(t, bin, configPath, node)
			return
		case <-tick.C:
			if out, err := mqtt(pub, "-t", "in/hello", "-m", "21.5").CombinedOutput(); err != nil {
				t.Fatalf("publish: %v %s", err, out)
			}
		case <-ctx.Done():
			t.Fatal(errors.New("the deployed action published nothing within 20 s"))
		}
	}
}

// startQuickStartNode runs the binary on configPath until the test ends.
func startQuickStartNode(t *testing.T, bin, configPath string) (*exec.Cmd, *lockedBuffer) {
	node := exec.Command(bin, "-config", configPath)
	log := &lockedBuffer{}
	node.Stdout, node.Stderr = log, log
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Process.Kill()
		node.Wait()
		if t.Failed() {
			t.Logf("node log:\n%s", log.String())
		}
	})
	return node, log
}

// restartStillWarns stops the node and starts it again: root's password
// file is still there, so the new start says so (once).
func restartStillWarns(t *testing.T, bin, configPath string, first *exec.Cmd) {
	first.Process.Signal(os.Interrupt)
	first.Wait()
	_, log := startQuickStartNode(t, bin, configPath)
	eventually(t, 20*time.Second, func() error {
		if n := strings.Count(log.String(), "initial password is still on disk"); n != 1 {
			return fmt.Errorf("the restarted node said %d times that the password file is still there", n)
		}
		return nil
	})
	if strings.Contains(log.String(), "created the administrator root") {
		t.Fatal("the restarted node created root again")
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
