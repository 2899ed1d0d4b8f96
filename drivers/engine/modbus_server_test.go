package engine

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func serverSource(name, port string) string {
	return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE MODBUS_SERVER
    ADD MODBUS_SERVER_CONFIG
        WITH BIND_IP "127.0.0.1"
        WITH PORT '%s'
        WITH ADVERTISED_HOST "scada.example.com"
    ADD MAPPING Plant
`, name, port) +
		tag("temp", `SOURCE_TOPIC "plc1/temp"`, `ADDRESS "0"`, `DATA_TYPE "INT16"`, `SCALING "0.1"`, `WRITABLE true`, `DESTINATION_TOPIC "plc1/temp/set"`) +
		tag("flow", `SOURCE_TOPIC "plc1/flow"`, `ADDRESS "1"`, `DATA_TYPE "FLOAT32"`) +
		tag("count", `SOURCE_TOPIC "plc1/count"`, `ADDRESS "3"`, `DATA_TYPE "UINT16"`)
}

// mbpoll (Debian), an independent Modbus client, reads what MODBUS_SERVER
// serves and writes a writable tag; a second server on the same port
// fails to bind and says so.
func TestModbusServerReadByMbpoll(t *testing.T) {
	mbpoll := needTool(t, "mbpoll", "mbpoll")
	n := newNode(t)
	n.cli.Publish("plc1/temp", []byte("21.5"), 0, true) // retained before the server exists
	port := freePort(t)
	n.deploy(serverSource("Scada", port))
	n.waitStatus("Scada", func(s Snapshot) error {
		if s.Connection != Listening || s.Health != Green {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.publish("plc1/flow", "3.75")
	n.publish("plc1/count", "7")
	poll := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(mbpoll, append([]string{"-m", "tcp", "-a", "1", "-p", port, "-1", "-q"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("error %v: %s", err, out)
		}
		return string(out)
	}
	// mbpoll counts references from 1: -r 1 is register 0.
	eventually(t, waitTimeout, func() error {
		out := poll("-r", "1", "-c", "1", "-t", "4", "127.0.0.1")
		if !strings.Contains(out, "[1]: \t215") && !strings.Contains(out, "[1]: 215") {
			return fmt.Errorf("register 0: %s", out)
		}
		out = poll("-B", "-r", "2", "-c", "1", "-t", "4:float", "127.0.0.1") // -B: high word first
		if !strings.Contains(out, "3.75") {
			return fmt.Errorf("registers 1-2 as float: %s", out)
		}
		out = poll("-r", "4", "-c", "1", "-t", "4", "127.0.0.1")
		if !strings.Contains(out, "7") {
			return fmt.Errorf("register 3: %s", out)
		}
		return nil
	})
	if out := poll("-r", "50", "-c", "1", "-t", "4", "127.0.0.1"); !strings.Contains(strings.ToLower(out), "illegal data address") {
		t.Errorf("a register no tag covers: %s", out)
	}
	// A client writes 300 into the writable tag: 30 is published.
	if out := poll("-r", "1", "-t", "4", "127.0.0.1", "300"); strings.HasPrefix(out, "error") {
		t.Fatalf("mbpoll write: %s", out)
	}
	n.waitValue("plc1/temp/set", "30")
	if out := poll("-r", "2", "-t", "4", "127.0.0.1", "1"); !strings.Contains(strings.ToLower(out), "illegal data address") {
		t.Errorf("a write to a read-only tag: %s", out)
	}

	// The same port twice: the second reports the failed bind.
	n.deployAdd(strings.Replace(serverSource("Scada2", port), "plc1/temp/set", "x/set", 1))
	s := n.waitStatus("Scada2", func(s Snapshot) error {
		if s.Connection != Failed || !strings.Contains(s.LastError, "bind") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	var up, down int
	for _, l := range n.m.Listeners() {
		if l.Up {
			up++
		} else if l.Connector == "Scada2" && l.Error != "" {
			down++
		}
	}
	if v, _ := n.value(ListenersTopic); !strings.Contains(v, `"connector":"Scada2"`) || !strings.Contains(v, `"up":false`) {
		t.Errorf("%s: %s", ListenersTopic, v)
	}
	if up != 1 || down != 1 {
		t.Errorf("listeners %+v (status %+v)", n.m.Listeners(), s)
	}
}
