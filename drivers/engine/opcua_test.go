package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
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
	node string
	port string // "0" until the first start has bound one
	pki  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// opcuaStartTimeout bounds a start of the server. node-opcua spends about
// 2 s of CPU loading its address space; a start on the 2 loaded cores
// took over 25 s.
const opcuaStartTimeout = 2 * time.Minute

func newOPCUAServer(t *testing.T) *opcuaServer {
	node := needTool(t, "node", "nodejs")
	if _, err := os.Stat(filepath.Join(peersDir(), "node_modules", "node-opcua")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node-opcua missing; .ci/run installs it in " + peersDir())
		}
		t.Skip("node-opcua missing (npm install --prefix " + peersDir() + " node-opcua@2.182.2)")
	}
	// The server binds a port of the kernel's choice and says which:
	// a port picked here and closed could be taken before node binds it.
	s := &opcuaServer{t: t, node: node, port: "0", pki: filepath.Join(t.TempDir(), "pki")}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start runs the server on s.port (again, after stop: the connectors
// dial that port) and waits until it is ready. A restart that finds the
// port taken (another socket may bind it while the server is down) tries
// again until the port is free.
func (s *opcuaServer) start() {
	s.t.Helper()
	deadline := time.Now().Add(opcuaStartTimeout)
	for !s.run(deadline) {
		if time.Now().After(deadline) {
			s.t.Fatalf("node-opcua: port %s stayed taken for %v", s.port, opcuaStartTimeout)
		}
		time.Sleep(50 * time.Millisecond) // while another socket holds the port
	}
}

// run starts the server once and reports whether it became ready; false
// means it exited because its port was in use.
func (s *opcuaServer) run(deadline time.Time) bool {
	s.t.Helper()
	s.cmd = exec.Command(s.node, "../opcua/testdata/server.js", s.port, s.pki)
	s.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(peersDir(), "node_modules"))
	var stderr bytes.Buffer
	s.cmd.Stderr = &stderr
	out, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		r := bufio.NewScanner(out)
		for r.Scan() {
			if rest, ok := strings.CutPrefix(r.Text(), "ready "); ok {
				ready <- rest
			}
		}
	}()
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait() // after the scanner has read all: Wait closes the pipe
		close(done)
	}(s.cmd, s.done)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case url := <-ready:
		if s.port == "0" {
			u, err := urlPort(url)
			if err != nil {
				s.t.Fatalf("node-opcua: %v", err)
			}
			s.port = u
		}
		return true
	case <-s.done:
		s.cmd = nil
		if strings.Contains(stderr.String(), "EADDRINUSE") && s.port != "0" {
			return false
		}
		s.t.Fatalf("node-opcua exited before it was ready: %s", stderr.String())
	case <-t.C:
		s.t.Fatalf("node-opcua was not ready within %v", opcuaStartTimeout)
	}
	return false
}

// urlPort returns the port of an opc.tcp URL.
func urlPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" || u.Port() == "0" {
		return "", fmt.Errorf("ready line names no port: %q", raw)
	}
	return u.Port(), nil
}

func (s *opcuaServer) stop() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		<-s.done
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
	srv.start()
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
	srv.start()
	n.waitValue("ua/text", "hello")
	for _, v := range n.history("ua/text") {
		if v != "hello" {
			t.Fatalf("after the restart ua/text was %q", v)
		}
	}
}
