package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
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

// snap7Server builds (once, cached by source hash in peersDir) and runs
// the Snap7 server of ../s7/testdata/s7server.cpp, from the C++ sources
// in the npm tarball node-snap7@1.0.9 (unpacked by .ci/run).
func snap7Binary(t *testing.T) string {
	gxx := needTool(t, "g++", "g++")
	src := filepath.Join(peersDir(), "node-snap7", "package", "deps", "snap7", "src")
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("Snap7 sources missing; .ci/run unpacks node-snap7@1.0.9 into " + peersDir())
		}
		t.Skip("Snap7 sources missing (npm pack node-snap7@1.0.9; tar xzf into " + filepath.Join(peersDir(), "node-snap7") + ")")
	}
	cpp, err := os.ReadFile("../s7/testdata/s7server.cpp")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cpp)
	bin := filepath.Join(peersDir(), "snap7-server", "s7server-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	os.MkdirAll(filepath.Dir(bin), 0o755)
	files, _ := filepath.Glob(filepath.Join(src, "sys", "*.cpp"))
	core, _ := filepath.Glob(filepath.Join(src, "core", "*.cpp"))
	args := []string{"-O1", "-fPIC", "-fexceptions", "-w", "-I" + filepath.Join(src, "sys"), "-I" + filepath.Join(src, "core"),
		"-I" + filepath.Join(src, "lib"), "-o", bin + ".tmp", "../s7/testdata/s7server.cpp"}
	args = append(append(append(args, files...), core...), filepath.Join(src, "lib", "snap7_libmain.cpp"), "-lpthread")
	if out, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

type snap7 struct {
	t    *testing.T
	bin  string
	port string
	cmd  *exec.Cmd
}

func newSnap7(t *testing.T) *snap7 {
	s := &snap7{t: t, bin: snap7Binary(t)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, s.port, _ = net.SplitHostPort(l.Addr().String())
	l.Close()
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *snap7) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "127.0.0.1", s.port)
	out, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready") {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.t.Fatalf("s7server: %q", line)
	}
}

func (s *snap7) stop() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

func s7Source(name string, s *snap7, body string) string {
	return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE SIEMENS_S7
    ADD S7_CONFIG
        WITH IP "127.0.0.1"
        WITH PORT '%s'
        WITH CPU_TYPE "S71500"
        WITH RACK '0'
        WITH SLOT '1'
        WITH READ_TIMEOUT '300'
%s`, name, s.port, body)
}

// S7 against Snap7's server: every type from DB1, writes to DB2 and MK,
// a missing DB and an offset past a DB's end, the PLC stopped and
// restarted.
func TestS7Snap7(t *testing.T) {
	srv, n := newSnap7(t), newNode(t)
	n.deploy(s7Source("S", srv, "    ADD MAPPING M\n        WITH EVERY 50 MILLISECONDS\n        WITH SOURCE_TOPIC \"s7\"\n"+
		tag("counter", `ADDRESS "DB1.DBW0"`, `DATA_TYPE "UINT16"`)+
		tag("i16", `ADDRESS "DB1.DBW2"`)+
		tag("real", `ADDRESS "DB1.DBD4"`)+
		tag("bit0", `ADDRESS "DB1.DBX8.0"`)+
		tag("bit1", `ADDRESS "DB1.DBX8.1"`)+
		tag("bit2", `ADDRESS "DB1.DBX8.2"`)+
		tag("dint", `ADDRESS "DB1.DBD10"`, `DATA_TYPE "INT32"`)+
		tag("dword", `ADDRESS "DB1.DBD14"`, `DATA_TYPE "UINT32"`)+
		tag("text", `ADDRESS "DB1.DBB20"`, `DATA_TYPE "STRING"`, `LENGTH 8`)+
		tag("lreal", `ADDRESS "DB1.DBB30"`, `DATA_TYPE "FLOAT64"`)+
		tag("word", `ADDRESS "DB1.DBW40"`, `DATA_TYPE "UINT16"`, `SCALING 0.01`)+
		tag("set", `ADDRESS "DB2.DBD10"`, `DATA_TYPE "FLOAT32"`, `WRITABLE true`, `DESTINATION_TOPIC "s7/set/w"`)+
		tag("sbit", `ADDRESS "DB2.DBX0.3"`, `WRITABLE true`, `DESTINATION_TOPIC "s7/sbit/w"`)+
		tag("mw", `ADDRESS "MW10"`, `DATA_TYPE "INT16"`, `WRITABLE true`, `DESTINATION_TOPIC "s7/mw/w"`)+
		tag("nodb", `ADDRESS "DB9.DBW0"`)+
		tag("past", `ADDRESS "DB2.DBW100"`)))
	for tp, want := range map[string]string{"s7/i16": "-1234", "s7/real": "21.5", "s7/bit0": "true", "s7/bit1": "false",
		"s7/bit2": "true", "s7/dint": "-100000", "s7/dword": "4000000000", "s7/text": "HELLO-S7", "s7/lreal": "-12500000000",
		"s7/word": "650", "s7/set": "0", "s7/sbit": "false", "s7/mw": "0"} {
		n.waitValue(tp, want)
	}
	var first int
	eventually(t, waitTimeout, func() error {
		v, _ := n.value("s7/counter")
		c, _ := strconv.Atoi(v)
		if first == 0 {
			first = c
		}
		if c < first+3 {
			return fmt.Errorf("counter %d, not moving on from %d", c, first)
		}
		return nil
	})
	n.waitStatus("S", func(s Snapshot) error {
		if s.Connection != Connected || s.Health != Yellow || !strings.Contains(s.TagErrors["nodb"], "Item not available") ||
			!strings.Contains(s.TagErrors["past"], "Address out of range") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.publish("s7/set/w", "-2.75")
	n.waitValue("s7/set", "-2.75")
	n.publish("s7/sbit/w", "true")
	n.waitValue("s7/sbit", "true")
	n.publish("s7/mw/w", "-300")
	n.waitValue("s7/mw", "-300")

	// The PLC stops answering, then restarts with its start values.
	srv.cmd.Process.Signal(syscall.SIGSTOP)
	n.waitStatus("S", func(s Snapshot) error {
		if s.Connection == Connected {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	srv.stop()
	n.reset("s7/set")
	srv.start()
	n.waitValue("s7/set", "0")
	for _, v := range n.history("s7/set") {
		if v != "0" {
			t.Fatalf("after the restart s7/set was %q: %v", v, n.history("s7/set"))
		}
	}
	// Stop returns within about a second even with the PLC frozen.
	srv.cmd.Process.Signal(syscall.SIGSTOP)
	start := time.Now()
	n.m.Stop("S")
	if d := time.Since(start); d > 1200*time.Millisecond {
		t.Errorf("Stop took %v", d)
	}
	srv.cmd.Process.Signal(syscall.SIGCONT)
}
