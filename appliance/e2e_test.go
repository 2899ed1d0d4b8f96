package appliance_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gantry/appliance"
	"gantry/appliance/config"
)

// loopbackIP returns a random address in 127.0.0.0/8 so that nodes of
// parallel tests can use the default ports side by side.
func loopbackIP() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
}

func startNode(t *testing.T, env map[string]string) (*appliance.Node, string) {
	t.Helper()
	ip := loopbackIP()
	return startNodeAt(t, ip, env), ip
}

// startNodeAt starts a node on ip with the default ports; env overrides
// the test defaults (anonymous allowed, a temporary data directory).
func startNodeAt(t *testing.T, ip string, env map[string]string) *appliance.Node {
	t.Helper()
	vars := map[string]string{
		"COREFLUX_MQTT_BIND_IP":         ip,
		"COREFLUX_DATA_DIR":             t.TempDir(),
		"COREFLUX_MQTT_ALLOW_ANONYMOUS": "true",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	n, err := appliance.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	return n
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed; .ci/run installs mosquitto-clients", name)
		}
		t.Skipf("%s not installed (apt-get install mosquitto-clients)", name)
	}
	return p
}

// TestMosquittoClients runs Debian's mosquitto_sub and mosquitto_pub
// against a node: QoS 0, 1 and 2, MQTT 3.1.1 and 5, and a retained message.
func TestMosquittoClients(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	pub := needTool(t, "mosquitto_pub")
	_, ip := startNode(t, nil)

	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(pub, append([]string{"-h", ip}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_pub %v: %v\n%s", args, err, out)
		}
	}
	run("-t", "plant/line1/temp", "-m", "retained-21.5", "-r", "-q", "1")

	for _, v := range []string{"mqttv311", "mqttv5"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sub, "-h", ip, "-V", v, "-t", "plant/#", "-v", "-q", "2", "-C", "4")
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "plant/line1/temp retained-21.5" {
				t.Fatalf("first line %q, want the retained message", lines.Text())
			}
			// The subscription exists once the retained message arrived.
			for q := 0; q <= 2; q++ {
				run("-V", v, "-t", "plant/line2/state", "-m", fmt.Sprintf("qos%d", q), "-q", fmt.Sprint(q))
			}
			var got []string
			for lines.Scan() {
				got = append(got, lines.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
			}
			want := []string{"plant/line2/state qos0", "plant/line2/state qos1", "plant/line2/state qos2"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// TestBinarySignals runs the real binary: it serves mosquitto clients on
// the address from the environment, survives SIGHUP and exits 0 on SIGINT.
func TestBinarySignals(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	pub := needTool(t, "mosquitto_pub")
	bin := gantryBinary(t)
	ip := loopbackIP()
	cmd := exec.Command(bin, "-dev")
	cmd.Env = append(os.Environ(), "COREFLUX_MQTT_BIND_IP="+ip, "COREFLUX_DATA_DIR="+t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitListening(t, stderr, 3) // mqtt, websocket, ops
	if out, err := exec.Command(pub, "-h", ip, "-t", "dev/hello", "-m", "world", "-r").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	check := func(when string) {
		out, err := exec.Command(sub, "-h", ip, "-t", "dev/#", "-v", "-W", "5", "-C", "1").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "dev/hello world" {
			t.Fatalf("mosquitto_sub against the binary %s: %v %q", when, err, out)
		}
	}
	check("after start")
	// SIGHUP reloads (TLS files, log level) and must not stop the node.
	cmd.Process.Signal(syscall.SIGHUP)
	check("after SIGHUP")
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after SIGINT")
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gantryBinary builds the gantry command once per test run.
func gantryBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gantry-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gantry")
		out, err := exec.Command("go", "build", "-o", binPath, "./cmd/gantry").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// TestUserCommandsOnRunningNode adds, changes and removes a user with the
// gantry command while a node serves the same data directory, and checks
// each change with mosquitto_pub; it also logs in as root with the initial
// password.
func TestUserCommandsOnRunningNode(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	bin := gantryBinary(t)
	dataDir := t.TempDir()
	node, ip := startNode(t, map[string]string{"COREFLUX_DATA_DIR": dataDir, "COREFLUX_MQTT_ALLOW_ANONYMOUS": "false"})
	gantry := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "COREFLUX_DATA_DIR="+dataDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gantry %v: %v\n%s", args, err, out)
		}
	}
	login := func(user, pass string) error {
		args := []string{"-h", ip, "-t", "t", "-m", "x", "-q", "1"}
		if user != "" {
			args = append(args, "-u", user, "-P", pass)
		}
		out, err := exec.Command(pub, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	root, err := os.ReadFile(filepath.Join(dataDir, "initial-root-password"))
	if err != nil {
		t.Fatal(err)
	}
	if err := login("root", strings.TrimSpace(string(root))); err != nil {
		t.Fatalf("root with the initial password: %v", err)
	}
	if login("", "") == nil {
		t.Fatal("anonymous client accepted with AllowAnonymous false")
	}
	gantry("-addUser", "alice", "first")
	if err := login("alice", "first"); err != nil {
		t.Fatalf("added user: %v", err)
	}
	gantry("-changePassword", "alice", "second")
	if err := login("alice", "second"); err != nil {
		t.Fatalf("changed password: %v", err)
	}
	if login("alice", "first") == nil {
		t.Fatal("old password still accepted")
	}
	// Flags and groups, seen by the running node at once.
	gantry("-changeUserSettings", "alice", "AllowedLogManagement", "true")
	gantry("-addUserToGroup", "alice", "operators")
	eventually(t, 5*time.Second, func() error { // Lookup looks at the file at most once a second
		if u, _ := node.Users.Lookup("alice"); !u.HasFlag("AllowedLogManagement") || len(u.Groups) != 1 || u.Groups[0] != "operators" {
			return fmt.Errorf("alice after -changeUserSettings and -addUserToGroup: flags %v groups %v", u.Flags, u.Groups)
		}
		return nil
	})
	gantry("-removeUserFromGroup", "alice", "operators")
	eventually(t, 5*time.Second, func() error {
		if u, _ := node.Users.Lookup("alice"); len(u.Groups) != 0 {
			return fmt.Errorf("alice after -removeUserFromGroup: groups %v", u.Groups)
		}
		return nil
	})
	gantry("-removeUser", "alice")
	if login("alice", "second") == nil {
		t.Fatal("removed user still accepted")
	}
}

// waitListening reads the node's log until the listeners are up.
func waitListening(t *testing.T, r io.Reader, want int) {
	t.Helper()
	lines := bufio.NewScanner(r)
	n := 0
	for lines.Scan() {
		if strings.Contains(lines.Text(), "msg=listening") {
			n++
		}
		if n == want {
			go io.Copy(io.Discard, r)
			return
		}
	}
	t.Fatal("node exited before listening")
}

// TestMain removes the gantry binary built for the tests, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
