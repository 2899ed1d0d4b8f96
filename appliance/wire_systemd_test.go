package appliance_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry/appliance"
	"gantry/appliance/config"
)

// notifySocket listens where systemd would and returns what the node sends.
func notifySocket(t *testing.T) (<-chan string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:k])
		}
	}()
	return msgs, path
}

func waitNotify(t *testing.T, msgs <-chan string, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-msgs:
			if strings.Contains(m, want) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q on the notify socket within %v", want, timeout)
		}
	}
}

// TestSystemdNotify: under a unit with Type=notify and WatchdogSec, the
// node says READY=1 once it listens, feeds the watchdog while the broker
// routes, and says STOPPING=1 when it shuts down.
func TestSystemdNotify(t *testing.T) {
	msgs, path := notifySocket(t)
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "400000") // 0.4 s: pings every 0.2 s
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ip := loopbackIP()
	cfg, err := config.Load("", func(k string) (string, bool) {
		v, ok := map[string]string{"COREFLUX_MQTT_BIND_IP": ip, "COREFLUX_DATA_DIR": t.TempDir()}[k]
		return v, ok
	})
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
	stopped := false
	defer func() {
		if !stopped {
			n.Shutdown(context.Background())
		}
	}()
	ready := waitNotify(t, msgs, "READY=1", 5*time.Second)
	if !strings.Contains(ready, "STATUS=serving MQTT on "+ip+":1883") {
		t.Errorf("READY without the status line: %q", ready)
	}
	for range 3 {
		waitNotify(t, msgs, "WATCHDOG=1", 2*time.Second)
	}
	resp, err := http.Get("http://" + ip + ":9100/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	var rd struct{ Status, Version string }
	json.NewDecoder(resp.Body).Decode(&rd)
	resp.Body.Close()
	if resp.StatusCode != 200 || rd.Status != "ready" || rd.Version == "" {
		t.Fatalf("/health/ready = %d %+v", resp.StatusCode, rd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped = true
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, msgs, "STOPPING=1", 5*time.Second)
}

// TestSetupPage: GET / on the operations port (port 80 on the appliance)
// names the version and leads to the console; until the node is set up
// the browser goes on to the setup wizard by itself.
func TestSetupPage(t *testing.T) {
	dir := t.TempDir()
	_, ip := startNode(t, map[string]string{"COREFLUX_DATA_DIR": dir})
	get := func() string {
		t.Helper()
		resp, err := http.Get("http://" + ip + ":9100/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `href="/ui/"`) || !strings.Contains(string(body), appliance.Version) {
			t.Fatalf("GET / = %d\n%s", resp.StatusCode, body)
		}
		return string(body)
	}
	const toWizard = `<meta http-equiv="refresh" content="0; url=/ui/setup">`
	if body := get(); !strings.Contains(body, toWizard) {
		t.Fatalf("GET / before setup does not lead to the wizard:\n%s", body)
	}
	if err := os.Remove(filepath.Join(dir, "initial-root-password")); err != nil {
		t.Fatal(err)
	}
	if body := get(); strings.Contains(body, toWizard) {
		t.Fatalf("GET / after setup still leads to the wizard:\n%s", body)
	}
	resp, err := http.Get("http://" + ip + ":9100/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET /nothing-here = %d, want 404", resp.StatusCode)
	}
}
