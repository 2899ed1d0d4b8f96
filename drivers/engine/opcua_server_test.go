package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A node-opcua client reads what OPCUA_SERVER serves and writes a
// writable tag; a second server on the same port fails to bind.
func TestOPCUAServerReadByNodeOPCUA(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	if _, err := os.Stat(filepath.Join(peersDir(), "node_modules", "node-opcua")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node-opcua missing; .ci/run installs it in " + peersDir())
		}
		t.Skip("node-opcua missing")
	}
	n := newNode(t)
	n.cli.Publish("line/temp", []byte("21.5"), 0, true)
	port := freePort(t)
	src := func(name string) string {
		return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE OPCUA_SERVER
    ADD OPCUA_SERVER_CONFIG
        WITH BIND_IP "127.0.0.1"
        WITH PORT '%s'
    ADD MAPPING Plant
`, name, port) +
			tag("temp", `SOURCE_TOPIC "line/temp"`, `DATA_TYPE "FLOAT64"`, `WRITABLE true`, `DESTINATION_TOPIC "line/temp/set"`) +
			tag("count", `SOURCE_TOPIC "line/count"`, `DATA_TYPE "INT32"`) +
			tag("state", `SOURCE_TOPIC "line/state"`, `DATA_TYPE "STRING"`)
	}
	n.deploy(src("UAS"))
	eventually(t, 3*waitTimeout, func() error { // gopcua's server loads its node set at start: seconds under -race
		if s := n.status("UAS"); s.Connection != Listening {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.publish("line/count", "42")
	n.publish("line/state", "running")
	client := func(args ...string) (map[string]json.RawMessage, string) {
		cmd := exec.Command(node, append([]string{"../opcua/testdata/client.js", "opc.tcp://127.0.0.1:" + port}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(peersDir(), "node_modules"))
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Sprintf("%v: %s", err, out)
		}
		var m map[string]json.RawMessage
		json.Unmarshal(out, &m)
		return m, string(out)
	}
	eventually(t, 3*waitTimeout, func() error {
		_, out := client("ns=1;s=temp,ns=1;s=count,ns=1;s=state")
		for _, want := range []string{`"ns=1;s=temp":{"status":"Good","value":21.5}`, `"ns=1;s=count":{"status":"Good","value":42}`,
			`"ns=1;s=state":{"status":"Good","value":"running"}`} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("client read %s, want %s", out, want)
			}
		}
		return nil
	})
	if _, out := client("ns=1;s=temp", "ns=1;s=temp", "Double", "30.25"); !strings.Contains(out, `"write":"Good"`) {
		t.Fatalf("write: %s", out)
	}
	n.waitValue("line/temp/set", "30.25")
	if _, out := client("ns=1;s=count", "ns=1;s=count", "Int32", "1"); !strings.Contains(out, `"write":"BadNotWritable"`) {
		t.Errorf("write of a read-only tag: %s", out)
	}
	n.deployAdd(strings.Replace(src("UAS2"), "line/temp/set", "x/set", 1))
	eventually(t, 3*waitTimeout, func() error {
		s := n.status("UAS2")
		if s.Connection != Failed || !strings.Contains(s.LastError, "bind") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if s := n.status("UAS"); s.Connection != Listening {
		t.Errorf("the first server stopped listening: %+v", s)
	}
}
