package engine

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// remoteBroker is Debian's mosquitto on 127.0.0.1 and ports of its own.
type remoteBroker struct {
	t      *testing.T
	bin    string
	conf   string
	port   string   // the plain listener, for the test's own clients
	ports  []string // every listener's, port first
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	output *bytes.Buffer // cmd's log (read once done is closed)
}

// mosquittoAttempts bounds the tries at free ports: mosquitto cannot bind
// a port of the kernel's choice (listener 0 is a Unix socket), so its
// ports are picked here and closed, and another socket on the machine
// may take one before mosquitto binds it.
const mosquittoAttempts = 10

func newRemoteBroker(t *testing.T) *remoteBroker {
	return startMosquitto(t, 1, func(ports []string) string {
		return "listener " + ports[0] + " 127.0.0.1\nallow_anonymous true\npersistence false\n"
	})
}

// startMosquitto runs mosquitto with the configuration conf makes for n
// free ports (the first one the plain listener of r.port), picking
// others when one was taken before mosquitto bound it. t.Cleanup stops it.
func startMosquitto(t *testing.T, n int, conf func(ports []string) string) *remoteBroker {
	t.Helper()
	bin := "/usr/sbin/mosquitto"
	if _, err := os.Stat(bin); err != nil {
		bin = needTool(t, "mosquitto", "mosquitto")
	}
	r := &remoteBroker{t: t, bin: bin, conf: filepath.Join(t.TempDir(), "mosquitto.conf")}
	t.Cleanup(r.stop)
	for range mosquittoAttempts {
		r.ports = freePorts(t, n)
		r.port = r.ports[0]
		if err := os.WriteFile(r.conf, []byte(conf(r.ports)), 0o600); err != nil {
			t.Fatal(err)
		}
		if r.run() {
			return r
		}
	}
	t.Fatalf("mosquitto found one of its ports taken %d times", mosquittoAttempts)
	return nil
}

// freePorts returns n ports that were free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []string {
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // all held at once: n different ports
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	return ports
}

// start runs mosquitto again on its ports (the bridge dials them), after
// stop, waiting while another socket holds one of them.
func (r *remoteBroker) start() {
	r.t.Helper()
	eventually(r.t, waitTimeout, func() error {
		if !r.run() {
			return fmt.Errorf("a port of %v is taken: %s", r.ports, r.output)
		}
		return nil
	})
}

// run starts mosquitto and waits until every listener accepts; it
// reports false when mosquitto exited because a port was in use.
func (r *remoteBroker) run() bool {
	r.t.Helper()
	r.output = new(bytes.Buffer)
	r.cmd = exec.Command(r.bin, "-c", r.conf)
	r.cmd.Stdout, r.cmd.Stderr = r.output, r.output
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(r.cmd, r.done)
	deadline := time.Now().Add(waitTimeout)
	for {
		select {
		case <-r.done:
			r.cmd = nil
			if strings.Contains(r.output.String(), "Address already in use") {
				return false
			}
			r.t.Fatalf("mosquitto exited: %s", r.output)
		default:
		}
		if r.accepting() {
			return true
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("mosquitto does not accept on %v within %v", r.ports, waitTimeout)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// accepting reports whether every listener of r accepts connections.
func (r *remoteBroker) accepting() bool {
	for _, p := range r.ports {
		c, err := net.Dial("tcp", "127.0.0.1:"+p)
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

func (r *remoteBroker) stop() {
	if r.cmd != nil {
		r.cmd.Process.Kill()
		<-r.done
		r.cmd = nil
	}
}

// remoteClient is a paho client of the remote broker that records what
// it receives.
type remoteClient struct {
	c   mqtt.Client
	mu  sync.Mutex
	got map[string][]string
}

func newRemoteClient(t *testing.T, r *remoteBroker, filter string) *remoteClient {
	rc := &remoteClient{got: map[string][]string{}}
	o := mqtt.NewClientOptions().AddBroker("tcp://127.0.0.1:" + r.port).SetClientID(fmt.Sprintf("rc-%d", time.Now().UnixNano())).
		SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond).SetOnConnectHandler(func(c mqtt.Client) {
		c.Subscribe(filter, 1, func(_ mqtt.Client, m mqtt.Message) {
			rc.mu.Lock()
			rc.got[m.Topic()] = append(rc.got[m.Topic()], string(m.Payload()))
			rc.mu.Unlock()
		}).Wait()
	})
	rc.c = mqtt.NewClient(o)
	if tok := rc.c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	t.Cleanup(func() { rc.c.Disconnect(100) })
	return rc
}

func (rc *remoteClient) received(tp string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got[tp]...)
}

func (rc *remoteClient) publish(t *testing.T, tp, payload string) {
	if tok := rc.c.Publish(tp, 1, false, payload); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
}

func bridgeSource(r *remoteBroker, mappings string) string {
	return fmt.Sprintf(`DEFINE ROUTE ToCloud WITH TYPE MQTT_BRIDGE
    ADD SOURCE_CONFIG
        WITH BROKER SELF
    ADD DESTINATION_CONFIG
        WITH BROKER_ADDRESS "127.0.0.1"
        WITH BROKER_PORT '%s'
        WITH CLIENT_ID "edge-bridge"
        WITH USE_TLS false
%s`, r.port, mappings)
}

// LOT.md RT1 and RT2 against mosquitto: out, in, both without echo, and
// the remote broker restarted mid-run.
func TestBridgeToMosquitto(t *testing.T) {
	r := newRemoteBroker(t)
	n := newNode(t)
	remote := newRemoteClient(t, r, "#")
	n.deploy(bridgeSource(r, `    ADD MAPPING temps
        WITH SOURCE_TOPIC "room/+/temp"
        WITH DESTINATION_TOPIC "site1/room/+/temp"
        WITH DIRECTION "out"
    ADD MAPPING cmds
        WITH SOURCE_TOPIC "cmd/#"
        WITH DESTINATION_TOPIC "cloud/cmd/#"
        WITH DIRECTION "in"
    ADD MAPPING sync
        WITH SOURCE_TOPIC "shared/+"
        WITH DESTINATION_TOPIC "edge1/shared/+"
        WITH DIRECTION "both"
        WITH QOS 1
`))
	n.waitStatus("ToCloud", func(s Snapshot) error {
		if s.Connection != Connected {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	// out
	eventually(t, waitTimeout, func() error {
		n.publish("room/k/temp", "22")
		if got := remote.received("site1/room/k/temp"); len(got) == 0 || got[0] != "22" {
			return fmt.Errorf("remote got %v", got)
		}
		return nil
	})
	// in, and nothing of "in" goes back out
	remote.publish(t, "cloud/cmd/line1/start", "go")
	n.waitValue("cmd/line1/start", "go")
	n.publish("cmd/line1/stop", "local")
	// both: each side's message reaches the other once, with no echo
	remote.publish(t, "edge1/shared/a", "from-cloud")
	n.waitValue("shared/a", "from-cloud")
	n.publish("shared/b", "from-edge")
	eventually(t, waitTimeout, func() error {
		if got := remote.received("edge1/shared/b"); len(got) != 1 || got[0] != "from-edge" {
			return fmt.Errorf("remote got %v", got)
		}
		return nil
	})
	// The remote broker restarts: the bridge reconnects and resubscribes.
	r.stop()
	n.waitStatus("ToCloud", func(s Snapshot) error {
		if s.Connection != Reconnecting {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	r.start()
	n.waitStatus("ToCloud", func(s Snapshot) error {
		if s.Connection != Connected || s.Connects < 2 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	remote2 := newRemoteClient(t, r, "#")
	eventually(t, waitTimeout, func() error {
		remote2.publish(t, "cloud/cmd/again", "yes")
		if v, _ := n.value("cmd/again"); v != "yes" {
			return fmt.Errorf("cmd/again = %q", v)
		}
		return nil
	})
	eventually(t, waitTimeout, func() error {
		n.publish("room/z/temp", "19")
		if got := remote2.received("site1/room/z/temp"); len(got) == 0 {
			return fmt.Errorf("remote got nothing after the restart")
		}
		return nil
	})
	if got := remote.received("cloud/cmd/line1/stop"); len(got) != 0 {
		t.Errorf("an IN mapping sent a local message out: %v", got)
	}
	if h := n.history("shared/a"); len(h) != 1 {
		t.Errorf("shared/a arrived %d times here (echo): %v", len(h), h)
	}
	if got := remote.received("edge1/shared/a"); len(got) != 1 {
		t.Errorf("edge1/shared/a seen %d times on the remote (echo loop): %v", len(got), got)
	}
}
