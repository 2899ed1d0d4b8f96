package boot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// Eventually calls f until it returns nil or timeout passes, and returns
// f's last error then.
func Eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Curl fetches url with the curl command (a real HTTP client, the one an
// operator uses) and returns the body; a non-2xx status is an error.
func Curl(url string) (string, error) {
	out, err := exec.Command("curl", "-fsS", "-m", "3", url).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("curl %s: %v: %s", url, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// MQTTRoundTrip connects a subscriber and a publisher to the broker at
// addr (host:port) as user, subscribes, publishes one QoS 1 message and
// waits for it to arrive.
func MQTTRoundTrip(addr, user, password string, timeout time.Duration) error {
	topic := fmt.Sprintf("boot/%d", time.Now().UnixNano())
	payload := "hello from the host"
	opts := func(id string) *mqtt.ClientOptions {
		return mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).
			SetUsername(user).SetPassword(password).SetConnectTimeout(timeout).
			SetAutoReconnect(false).SetConnectRetry(false)
	}
	got := make(chan string, 1)
	sub := mqtt.NewClient(opts("boot-sub"))
	if t := sub.Connect(); !t.WaitTimeout(timeout) || t.Error() != nil {
		return fmt.Errorf("subscriber connect to %s: %v", addr, tokenErr(t))
	}
	defer sub.Disconnect(100)
	st := sub.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		select {
		case got <- string(m.Payload()):
		default:
		}
	})
	if !st.WaitTimeout(timeout) || st.Error() != nil {
		return fmt.Errorf("subscribe %s: %v", topic, tokenErr(st))
	}
	pub := mqtt.NewClient(opts("boot-pub"))
	if t := pub.Connect(); !t.WaitTimeout(timeout) || t.Error() != nil {
		return fmt.Errorf("publisher connect to %s: %v", addr, tokenErr(t))
	}
	defer pub.Disconnect(100)
	if t := pub.Publish(topic, 1, false, payload); !t.WaitTimeout(timeout) || t.Error() != nil {
		return fmt.Errorf("publish %s: %v", topic, tokenErr(t))
	}
	select {
	case p := <-got:
		if p != payload {
			return fmt.Errorf("subscriber got %q, want %q", p, payload)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("subscriber got nothing on %s within %v", topic, timeout)
	}
}

func tokenErr(t mqtt.Token) error {
	if t.Error() != nil {
		return t.Error()
	}
	return errors.New("timed out")
}

// ModuleRoot returns the directory of go.mod, found upwards from the
// working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("boot: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Gantry returns the static gantry binary for a: $GANTRY_BIN/gantry-<arch>
// when GANTRY_BIN is set (make cross wrote it), else one built into dir.
func Gantry(a Arch, dir string) (string, error) {
	if bin := os.Getenv("GANTRY_BIN"); bin != "" {
		p := filepath.Join(bin, "gantry-"+a.Name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("boot: GANTRY_BIN: %w (make cross writes it)", err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "gantry-"+a.Name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./appliance/cmd/gantry")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+a.GOARCH, "GOARM="+a.GOARM)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("boot: go build for %s: %v\n%s", a.Name, err, b)
	}
	return out, nil
}
