package engine

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needTool finds a program the test needs; without it the test is
// skipped, or fails under CI (.ci/run installs it).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed; .ci/run installs %s", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s)", name, pkg)
	}
	return p
}

// serialLine is a socat pty pair: the slave opens srv, the connector cli.
type serialLine struct {
	srv, cli string
}

func newSerialLine(t *testing.T) serialLine {
	socat := needTool(t, "socat", "socat")
	dir := t.TempDir()
	l := serialLine{srv: filepath.Join(dir, "srv"), cli: filepath.Join(dir, "cli")}
	cmd := exec.Command(socat, "pty,raw,echo=0,link="+l.srv, "pty,raw,echo=0,link="+l.cli)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	eventually(t, waitTimeout, func() error {
		for _, p := range []string{l.srv, l.cli} {
			if _, err := os.Stat(p); err != nil {
				return err
			}
		}
		return nil
	})
	return l
}

// rtuSlave is pymodbus's serial server on the line.
type rtuSlave struct {
	t    *testing.T
	cmd  *exec.Cmd
	dev  string
	base int
}

func startSlave(t *testing.T, dev string, first int) *rtuSlave {
	t.Helper()
	py := "/usr/bin/python3" // Debian's: the python3 on PATH may not see python3-pymodbus
	if err := exec.Command(py, "-c", "import pymodbus").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pymodbus missing; .ci/run installs python3-pymodbus")
		}
		t.Skip("pymodbus missing (apt-get install python3-pymodbus)")
	}
	s := &rtuSlave{t: t, dev: dev, base: first}
	s.cmd = exec.Command(py, "testdata/rtu_server.py", dev, fmt.Sprint(first))
	out, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
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
	case <-time.After(10 * time.Second):
		t.Fatal("pymodbus did not start")
	}
	t.Cleanup(s.kill)
	return s
}

func (s *rtuSlave) kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

func rtuSource(name, dev string, body string) string {
	return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE MODBUS_SERIAL
    ADD MODBUS_CONFIG
        WITH PORT "%s"
        WITH BAUD_RATE '19200'
        WITH DATA_BITS '8'
        WITH PARITY "NONE"
        WITH STOP_BITS '1'
        WITH SLAVE_ID '1'
        WITH READ_TIMEOUT '300'
%s`, name, dev, body)
}

// Modbus RTU over a pty pair against pymodbus: every register type, a
// write, a wrong address, the slave stopped (timeouts) and restarted with
// other values.
func TestModbusRTU(t *testing.T) {
	line := newSerialLine(t)
	slave := startSlave(t, line.srv, 4000)
	n := newNode(t)
	n.deploy(rtuSource("R", line.cli, "    ADD MAPPING M\n        WITH EVERY 100 MILLISECONDS\n        WITH SOURCE_TOPIC \"rtu\"\n"+
		tag("a", `ADDRESS "0"`, `DATA_TYPE "UINT16"`)+
		tag("b", `ADDRESS "1"`, `DATA_TYPE "INT32"`)+ // 4001, 4002
		tag("c", `ADDRESS "3"`, `DATA_TYPE "INT16"`, `SCALING "0.1"`, `WRITABLE true`, `DESTINATION_TOPIC "rtu/c/set"`)+
		tag("bad", `ADDRESS "100"`, `DATA_TYPE "UINT16"`)+
		tag("coil", `ADDRESS "2"`, `ADDRESS_TYPE "COIL"`, `DATA_TYPE "BOOL"`, `WRITABLE true`, `DESTINATION_TOPIC "rtu/coil/set"`)))
	n.waitValue("rtu/a", "4000")
	n.waitValue("rtu/b", fmt.Sprint(4001<<16|4002))
	n.waitValue("rtu/c", "400.3")
	n.waitValue("rtu/coil", "false")
	n.waitStatus("R", func(s Snapshot) error {
		if s.Connection != Connected || s.Health != Yellow || s.TagErrors["bad"] == "" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	n.publish("rtu/c/set", "-12.5")
	n.waitValue("rtu/c", "-12.5")
	n.publish("rtu/coil/set", "1")
	n.waitValue("rtu/coil", "true")

	// The slave stops answering: requests time out, the port is closed
	// and reopened; when it answers again, only its current values appear.
	slave.cmd.Process.Signal(syscall.SIGSTOP)
	n.waitStatus("R", func(s Snapshot) error {
		if s.Connection != Reconnecting {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	slave.kill()
	n.reset("rtu/a")
	startSlave(t, line.srv, 5000)
	n.waitValue("rtu/a", "5000")
	for _, v := range n.history("rtu/a") {
		if v != "5000" {
			t.Fatalf("after the restart rtu/a was %q (history %v)", v, n.history("rtu/a"))
		}
	}
}
