package engine

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// remoteBroker is Debian's mosquitto on 127.0.0.1 and a port of its own.
type remoteBroker struct {
	t    *testing.T
	bin  string
	conf string
	port string
	cmd  *exec.Cmd
}

func newRemoteBroker(t *testing.T) *remoteBroker {
	bin := "/usr/sbin/mosquitto"
	if _, err := os.Stat(bin); err != nil {
		bin = needTool(t, "mosquitto", "mosquitto")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	r := &remoteBroker{t: t, bin: bin, port: port, conf: filepath.Join(t.TempDir(), "mosquitto.conf")}
	if err := os.WriteFile(r.conf, []byte("listener "+port+" 127.0.0.1\nallow_anonymous true\npersistence false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *remoteBroker) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "-c", r.conf)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	eventually(r.t, waitTimeout, func() error {
		c, err := net.Dial("tcp", "127.0.0.1:"+r.port)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (r *remoteBroker) stop() {
	if r.cmd != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
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
