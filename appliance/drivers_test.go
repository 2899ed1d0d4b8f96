package appliance_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	svm "github.com/simonvetter/modbus"

	"gantry/lot/command"
	"gantry/lot/defs"
)

// registers is a Modbus TCP device of 10 holding registers.
type registers struct {
	mu   sync.Mutex
	regs [10]uint16
}

func (r *registers) HandleCoils(*svm.CoilsRequest) ([]bool, error) {
	return nil, svm.ErrIllegalFunction
}
func (r *registers) HandleDiscreteInputs(*svm.DiscreteInputsRequest) ([]bool, error) {
	return nil, svm.ErrIllegalFunction
}
func (r *registers) HandleInputRegisters(*svm.InputRegistersRequest) ([]uint16, error) {
	return nil, svm.ErrIllegalFunction
}
func (r *registers) HandleHoldingRegisters(q *svm.HoldingRegistersRequest) ([]uint16, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if int(q.Addr)+int(q.Quantity) > len(r.regs) {
		return nil, svm.ErrIllegalDataAddress
	}
	if q.IsWrite {
		copy(r.regs[q.Addr:], q.Args)
		return nil, nil
	}
	return append([]uint16(nil), r.regs[q.Addr:q.Addr+q.Quantity]...), nil
}

// TestConnectorOnNode deploys a Modbus TCP connector on a running node
// (LOT.md RT3 and RT4): mosquitto_sub sees the scaled value, a
// mosquitto_pub to the tag's DESTINATION_TOPIC writes the device, and
// /metrics shows the connector.
func TestConnectorOnNode(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	pub := needTool(t, "mosquitto_pub")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dev := &registers{}
	dev.regs[5] = 215
	srv, err := svm.NewServer(&svm.ServerConfiguration{URL: "tcp://" + addr, MaxClients: 4, Logger: log.New(io.Discard, "", 0)}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	n, ip := startNode(t, nil)
	_, port, _ := net.SplitHostPort(addr)
	src := fmt.Sprintf(`DEFINE CONNECTOR PLC1 WITH TYPE MODBUS_TCP
    ADD MODBUS_CONFIG
        WITH HOST "127.0.0.1"
        WITH PORT '%s'
        WITH SLAVE_ID '1'
    ADD MAPPING Fast
        WITH EVERY 100 MILLISECONDS
        ADD TAG Temperature
            WITH ADDRESS "5"
            WITH ADDRESS_TYPE "HOLDING_REGISTER"
            WITH DATA_TYPE "INT16"
            WITH SOURCE_TOPIC "plc1/temp"
            WITH SCALING "0.1"
            WITH WRITABLE "true"
            WITH DESTINATION_TOPIC "plc1/temp/set"
`, port)
	ctx := context.Background()
	if _, err := n.LoT.Add(ctx, command.Caller{User: "root"}, defs.Connector, src); err != nil {
		t.Fatal(err)
	}
	read := func(topic string) string {
		t.Helper()
		out, err := exec.Command(sub, "-h", ip, "-t", topic, "-C", "1", "-W", "5").CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_sub %s: %v %s", topic, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if v := read("plc1/temp"); v != "21.5" {
		t.Fatalf("plc1/temp = %q, want 21.5", v)
	}
	if out, err := exec.Command(pub, "-h", ip, "-t", "plc1/temp/set", "-m", "30").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	eventually(t, 5*time.Second, func() error {
		if v := read("plc1/temp"); v != "30" {
			return fmt.Errorf("plc1/temp = %q after writing 30", v)
		}
		return nil
	})
	dev.mu.Lock()
	if dev.regs[5] != 300 {
		t.Errorf("register 5 = %d, want 300", dev.regs[5])
	}
	dev.mu.Unlock()
	m := scrape(t, ip)
	if m["gantry_connector_up"] != 1 || m["gantry_connector_writes_total"] != 1 {
		t.Errorf("metrics: up %v writes %v", m["gantry_connector_up"], m["gantry_connector_writes_total"])
	}

	// A connector whose settings are wrong is refused, naming the setting.
	bad := strings.Replace(src, `"INT16"`, `"INT61"`, 1)
	bad = strings.Replace(bad, "PLC1", "PLC2", 1)
	_, err = n.LoT.Add(ctx, command.Caller{User: "root"}, defs.Connector, bad)
	if err == nil || !strings.Contains(err.Error(), `DATA_TYPE = "INT61"`) || !strings.Contains(err.Error(), "line 11 col 28") {
		t.Fatalf("bad DATA_TYPE: %v", err)
	}
	if err := n.LoT.Remove(ctx, command.Caller{User: "root"}, defs.Connector, "PLC1"); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, ip)
	if m["gantry_connector_up"] != 0 {
		t.Errorf("a removed connector still counts as up")
	}
}
