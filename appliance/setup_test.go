package appliance_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSetupWizardTakesEffect runs the real binary as the appliance does
// (-config with durability off), walks the first-boot wizard over HTTP
// and checks that its settings take effect without anyone touching the
// command line: the node starts again by itself (the same process), now
// with the wizard's node name and durability on, and root logs in over
// MQTT with the new password. A second start from the same file keeps
// them.
func TestSetupWizardTakesEffect(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	bin := gantryBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "state")
	ip := loopbackIP()
	configPath := filepath.Join(dir, "gantry.json")
	writeFile(t, configPath, fmt.Sprintf(`{
  "DataDir": %q,
  "Mqtt": {"BindIP": %q, "WebSocketPort": 0},
  "Durability": {"Enabled": false},
  "Cluster": {"Enabled": false, "NodeName": "factory-name"}
}`, dataDir, ip))
	base := "http://" + ip + ":9100"
	start := func() (*exec.Cmd, *lockedBuffer) {
		cmd := exec.Command(bin, "-config", configPath)
		cmd.Env = append(os.Environ(), "GANTRY_SLOT=b") // as the appliance's unit sets it
		var out lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &out
	}
	nodeName := func() (string, error) {
		resp, err := http.Get(base + "/info")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var in struct{ NodeName string }
		if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
			return "", err
		}
		return in.NodeName, nil
	}
	cmd, out := start()
	eventually(t, 60*time.Second, func() error {
		if n, err := nodeName(); err != nil || n != "factory-name" {
			return fmt.Errorf("GET /info: node %q, %v\n%s", n, err, out.String())
		}
		return nil
	})

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/ui/setup")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("GET /ui/setup: %d, no form\n%s", resp.StatusCode, page)
	}
	const password = "cabinet-7-pass"
	for _, v := range []url.Values{
		{"step": {"password"}, "password": {password}, "password2": {password}},
		{"step": {"node"}, "nodeName": {"gw-wizard"}},
		{"step": {"cluster"}, "mode": {"standalone"}},
		{"step": {"durability"}, "durability": {"on"}},
		{"step": {"review"}, "go": {"apply"}},
	} {
		v.Set("csrf", string(m[1]))
		resp, err := c.PostForm(base+"/ui/setup", v)
		if err != nil {
			t.Fatalf("step %s: %v", v.Get("step"), err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("step %s: %d\n%s", v.Get("step"), resp.StatusCode, body)
		}
	}

	// The node starts again in the same process, with the wizard's settings.
	eventually(t, 60*time.Second, func() error {
		if n, err := nodeName(); err != nil || n != "gw-wizard" {
			return fmt.Errorf("GET /info after the wizard: node %q, %v\n%s", n, err, out.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the first process is gone (%v): the node must start again in place\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "restarting with the new settings") {
		t.Fatalf("no restart in the log:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "gantry.db")); err != nil {
		t.Fatalf("durability is not on after the wizard: %v", err)
	}
	login := exec.Command(pub, "-h", ip, "-u", "root", "-P", password, "-t", "t", "-m", "x", "-q", "1")
	if b, err := login.CombinedOutput(); err != nil {
		t.Fatalf("root with the wizard's password: %v %s", err, b)
	}

	// The console logs in with the new password; its health page names
	// the version and the root slot the node runs from.
	jar2, _ := cookiejar.New(nil)
	c2 := &http.Client{Jar: jar2, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c2.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if m = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(page); m == nil {
		t.Fatalf("GET /ui/login: %d, no form\n%s", resp.StatusCode, page)
	}
	resp, err = c2.PostForm(base+"/ui/login", url.Values{"username": {"root"}, "password": {password}, "csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console login with the wizard's password: %d", resp.StatusCode)
	}
	resp, err = c2.Get(base + "/ui/health")
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`id="node-version">`, `id="node-slot">b<`} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("GET /ui/health: %d, no %s\n%s", resp.StatusCode, want, page)
		}
	}

	// A later start from the same file keeps the wizard's settings.
	cmd.Process.Kill()
	cmd.Wait()
	_, out = start()
	eventually(t, 60*time.Second, func() error {
		if n, err := nodeName(); err != nil || n != "gw-wizard" {
			return fmt.Errorf("GET /info after a restart: node %q, %v\n%s", n, err, out.String())
		}
		return nil
	})
}
