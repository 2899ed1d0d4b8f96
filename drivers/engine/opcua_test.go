package engine

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peersDir is where .ci/run installs the npm peers (node-opcua).
func peersDir() string {
	if d := os.Getenv("GANTRY_PEERS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "gantry-peers")
}

// opcuaServer is node-opcua@2.182.2 running ../opcua/testdata/server.js.
type opcuaServer struct {
	t    *testing.T
	port string
	pki  string
	cmd  *exec.Cmd
}

func newOPCUAServer(t *testing.T) *opcuaServer {
	node := needTool(t, "node", "nodejs")
	if _, err := os.Stat(filepath.Join(peersDir(), "node_modules", "node-opcua")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node-opcua missing; .ci/run installs it in " + peersDir())
		}
		t.Skip("node-opcua missing (npm install --prefix " + peersDir() + " node-opcua@2.182.2)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	s := &opcuaServer{t: t, port: port, pki: filepath.Join(t.TempDir(), "pki")}
	s.start(node)
	t.Cleanup(s.stop)
	return s
}

func (s *opcuaServer) start(node string) {
	s.t.Helper()
	if node == "" {
		node, _ = exec.LookPath("node")
	}
	s.cmd = exec.Command(node, "../opcua/testdata/server.js", s.port, s.pki)
	s.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(peersDir(), "node_modules"))
	out, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		r := bufio.NewScanner(out)
		for r.Scan() {
			if strings.HasPrefix(r.Text(), "ready") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		s.t.Fatal("node-opcua did not start")
	}
}

func (s *opcuaServer) stop() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

func opcuaSource(name string, s *opcuaServer, config, body string) string {
	return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE OPCUA
    ADD OPCUA_CONFIG
        WITH ENDPOINT_URL "opc.tcp://127.0.0.1:%s"
        WITH REQUEST_TIMEOUT '500'
%s%s`, name, s.port, config, body)
}

var opcuaTags = "    ADD MAPPING M\n        WITH EVERY 100 MILLISECONDS\n        WITH SOURCE_TOPIC \"ua\"\n" +
	tag("i16", `NODE_ID "ns=1;s=I16"`, `DATA_TYPE "INT16"`) +
	tag("u16", `NODE_ID "ns=1;s=U16"`, `DATA_TYPE "UINT16"`) +
	tag("i32", `NODE_ID "ns=1;s=I32"`, `DATA_TYPE "INT32"`) +
	tag("u32", `NODE_ID "ns=1;s=U32"`, `DATA_TYPE "UINT32"`) +
	tag("f32", `NODE_ID "ns=1;s=F32"`, `DATA_TYPE "FLOAT32"`) +
	tag("f64", `NODE_ID "ns=1;s=F64"`, `DATA_TYPE "FLOAT64"`, `WRITABLE true`, `DESTINATION_TOPIC "ua/f64/set"`) +
	tag("flag", `NODE_ID "ns=1;s=Flag"`, `DATA_TYPE "BOOL"`, `WRITABLE true`, `DESTINATION_TOPIC "ua/flag/set"`) +
	tag("text", `NODE_ID "ns=1;s=Text"`, `DATA_TYPE "STRING"`, `WRITABLE true`, `DESTINATION_TOPIC "ua/text/set"`) +
	tag("mismatch", `NODE_ID "ns=1;s=I16"`, `DATA_TYPE "INT32"`, `SOURCE_TOPIC "ua2/mismatch"`, `WRITABLE true`, `DESTINATION_TOPIC "ua/mismatch/set"`) +
	tag("counter", `NODE_ID "ns=1;s=Counter"`, `DATA_TYPE "INT32"`, `SCALING 10`) +
	tag("missing", `NODE_ID "ns=1;s=Nope"`, `DATA_TYPE "INT32"`)

// checkOPCUA reads every type, writes, and sees a missing node fail alone.
func checkOPCUA(t *testing.T, n *node) {
	for tp, want := range map[string]string{"ua/i16": "-1234", "ua/u16": "65000", "ua/i32": "-100000", "ua/u32": "4000000000",
		"ua/f32": "21.5", "ua/f64": "-12500000000", "ua/flag": "true", "ua/text": "hello"} {
		n.waitValue(tp, want)
	}
	var first int
	eventually(t, waitTimeout, func() error {
		v, _ := n.value("ua/counter")
		c, err := strconv.Atoi(v)
		if err != nil || c%10 != 0 {
			return fmt.Errorf("ua/counter = %q", v)
		}
		if first == 0 {
			first = c
		}
		if c < first+30 {
			return fmt.Errorf("ua/counter = %d, not moving on from %d", c, first)
		}
		return nil
	})
	n.waitStatus("U", func(s Snapshot) error {
		if s.Connection != Connected || s.Health != Yellow || !strings.Contains(s.TagErrors["missing"], "BadNodeIDUnknown") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.publish("ua/f64/set", "42.25")
	n.waitValue("ua/f64", "42.25")
	n.publish("ua/flag/set", "false")
	n.waitValue("ua/flag", "false")
	n.publish("ua/text/set", "bye")
	n.waitValue("ua/text", "bye")
	n.publish("ua/mismatch/set", "7")
	eventually(t, waitTimeout, func() error {
		v, _ := n.value(WriteTopic("U", "mismatch"))
		if !strings.Contains(v, `"ok":false`) || !strings.Contains(v, "BadTypeMismatch") {
			return fmt.Errorf("write into an Int16 node as INT32: %s", v)
		}
		return nil
	})
}

// OPC UA against node-opcua, polled, security None; then the server
// stops answering (timeouts), and is restarted.
func TestOPCUAPolled(t *testing.T) {
	srv, n := newOPCUAServer(t), newNode(t)
	n.deploy(opcuaSource("U", srv, "        WITH SUBSCRIBE false\n", opcuaTags))
	checkOPCUA(t, n)

	srv.cmd.Process.Signal(syscall.SIGSTOP)
	n.waitStatus("U", func(s Snapshot) error {
		if s.Connection == Connected {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	srv.stop()
	n.reset("ua/f64")
	srv.start("")
	n.waitValue("ua/f64", "-12500000000") // the restarted server's value; nothing of the old one
	for _, v := range n.history("ua/f64") {
		if v != "-12500000000" {
			t.Fatalf("after the restart ua/f64 was %q: %v", v, n.history("ua/f64"))
		}
	}
	n.waitStatus("U", func(s Snapshot) error {
		if s.Connection != Connected || s.Connects < 2 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

// OPC UA with monitored items over SignAndEncrypt (Basic256Sha256, a
// client certificate made at start), and a server restart.
func TestOPCUASubscribedSignAndEncrypt(t *testing.T) {
	srv, n := newOPCUAServer(t), newNode(t)
	n.deploy(opcuaSource("U", srv, "        WITH SECURITY_MODE \"SignAndEncrypt\"\n        WITH SECURITY_POLICY \"Basic256Sha256\"\n", opcuaTags))
	checkOPCUA(t, n)
	if s := n.status("U"); !strings.Contains(s.Device, "SIGNANDENCRYPT/Basic256Sha256") {
		t.Errorf("device %q", s.Device)
	}
	srv.stop()
	n.waitStatus("U", func(s Snapshot) error {
		if s.Connection != Reconnecting {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.reset("ua/text")
	srv.start("")
	n.waitValue("ua/text", "hello")
	for _, v := range n.history("ua/text") {
		if v != "hello" {
			t.Fatalf("after the restart ua/text was %q", v)
		}
	}
}
