package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// modbusSource is a connector on p; body is the mappings, indented by 4.
func modbusSource(name string, p *plc, config, body string) string {
	return fmt.Sprintf("DEFINE CONNECTOR %s WITH TYPE MODBUS_TCP\n    ADD MODBUS_CONFIG\n        WITH HOST \"127.0.0.1\"\n        WITH PORT '%s'\n        WITH READ_TIMEOUT '300'\n%s%s",
		name, p.port(), config, body)
}

// tag is an ADD TAG block, indented for a mapping.
func tag(name string, with ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "        ADD TAG %s\n", name)
	for _, w := range with {
		fmt.Fprintf(&b, "            WITH %s\n", w)
	}
	return b.String()
}

func putFloat32(regs []uint16, f float32) {
	u := math.Float32bits(f)
	regs[0], regs[1] = uint16(u>>16), uint16(u)
}

func TestModbusReadsEveryType(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) {
		p.hold[0] = uint16(0xFFFF &^ 1233) // -1234
		p.hold[1] = 65000
		i32 := uint32(0xFFFFFFFF - 99999) // -100000
		p.hold[2], p.hold[3] = uint16(i32>>16), uint16(i32)
		p.hold[4], p.hold[5] = 0xFFFF, 0xFFFE // 4294967294
		putFloat32(p.hold[6:], 21.5)
		u := math.Float64bits(-1.25e10)
		for i := range 4 {
			p.hold[8+i] = uint16(u >> (48 - 16*i))
		}
		copy(p.hold[12:], []uint16{'H'<<8 | 'E', 'L'<<8 | 'L', 'O'<<8 | 0, 0})
		p.hold[16] = 215                                // scaled by 0.1, offset 2
		putFloat32(p.hold[20:], 3.75)                   // then swapped to low word first
		p.hold[20], p.hold[21] = p.hold[21], p.hold[20] // CDAB
		p.hold[22] = 0x3412                             // 0x1234, low byte first
		p.hold[23] = 1
		p.input[5] = 777
		p.coils[3] = true
		p.discrete[7] = true
	})
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING All\n        WITH EVERY 50 MILLISECONDS\n        WITH SOURCE_TOPIC \"plc\"\n"+
		tag("i16", `ADDRESS "0"`, `DATA_TYPE "INT16"`)+
		tag("u16", `ADDRESS '1'`, `DATA_TYPE "UINT16"`)+
		tag("i32", `ADDRESS 2`, `DATA_TYPE "INT32"`)+
		tag("u32", `ADDRESS "4"`, `DATA_TYPE "UINT32"`)+
		tag("f32", `ADDRESS "6"`, `DATA_TYPE "FLOAT32"`)+
		tag("f64", `ADDRESS "8"`, `DATA_TYPE "FLOAT64"`)+
		tag("str", `ADDRESS "12"`, `DATA_TYPE "STRING"`, `LENGTH 8`)+
		tag("scaled", `ADDRESS "16"`, `DATA_TYPE "INT16"`, `SCALING "0.1"`, `OFFSET 2`)+
		tag("cdab", `ADDRESS "20"`, `DATA_TYPE "FLOAT"`, `WORD_ORDER "LITTLE"`)+
		tag("swapped", `ADDRESS "22"`, `DATA_TYPE "UINT16"`, `BYTE_ORDER "LITTLE_ENDIAN"`)+
		tag("flag", `ADDRESS "23"`, `DATA_TYPE "BOOL"`)+
		tag("in", `ADDRESS "5"`, `ADDRESS_TYPE "INPUT_REGISTER"`, `DATA_TYPE "UINT16"`)+
		tag("coil", `ADDRESS "3"`, `ADDRESS_TYPE "COIL"`, `DATA_TYPE "BOOL"`)+
		tag("di", `ADDRESS "7"`, `ADDRESS_TYPE "DISCRETE_INPUT"`, `DATA_TYPE "BOOL"`)+
		tag("json", `ADDRESS "1"`, `DATA_TYPE "UINT16"`, `SOURCE_TOPIC "other/json"`, `PUBLISH_MODE "JSON"`, `UNIT "rpm"`)))
	for tp, want := range map[string]string{
		"plc/i16": "-1234", "plc/u16": "65000", "plc/i32": "-100000", "plc/u32": "4294967294", "plc/f32": "21.5",
		"plc/f64": "-12500000000", "plc/str": "HELLO", "plc/scaled": "23.5", "plc/cdab": "3.75", "plc/swapped": "4660",
		"plc/flag": "true", "plc/in": "777", "plc/coil": "true", "plc/di": "true",
	} {
		n.waitValue(tp, want)
	}
	eventually(t, waitTimeout, func() error {
		v, _ := n.value("other/json")
		if !strings.HasPrefix(v, `{"value":65000,"unit":"rpm","timestamp":`) {
			return fmt.Errorf("other/json = %s", v)
		}
		return nil
	})
	s := n.waitStatus("P", func(s Snapshot) error {
		if s.Connection != Connected || s.Health != Green {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if s.Tags != 15 {
		t.Errorf("status counts %d tags, want 15", s.Tags)
	}
}

// Tags on adjacent registers are read in one request; a gap starts another.
func TestModbusBatchesAdjacentRegisters(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING Slow\n        WITH EVERY 1 HOURS\n        WITH SOURCE_TOPIC \"b\"\n"+
		tag("a", `ADDRESS "0"`, `DATA_TYPE "INT32"`)+ // 0-1
		tag("b", `ADDRESS "2"`, `DATA_TYPE "INT16"`)+ // 2
		tag("c", `ADDRESS "3"`, `DATA_TYPE "FLOAT64"`)+ // 3-6
		tag("d", `ADDRESS "10"`, `DATA_TYPE "INT16"`)+ // gap: another request
		tag("e", `ADDRESS "11"`, `DATA_TYPE "INT16"`)))
	n.waitValue("b/e", "0")
	p.mu.Lock()
	got := p.requests
	p.mu.Unlock()
	if got != 2 {
		t.Fatalf("one poll of 5 tags in two runs of registers made %d requests, want 2", got)
	}
}

func TestModbusWrites(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) { p.hold[10] = 215 })
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 50 MILLISECONDS\n"+
		tag("temp", `ADDRESS "10"`, `DATA_TYPE "INT16"`, `SCALING "0.1"`, `SOURCE_TOPIC "plc1/temp"`, `WRITABLE "true"`,
			`DESTINATION_TOPIC "plc1/temp/set"`, `MAX_VALUE 100`)+
		tag("f", `ADDRESS "20"`, `DATA_TYPE "FLOAT32"`, `SOURCE_TOPIC "plc1/f"`, `WRITABLE true`, `DESTINATION_TOPIC "plc1/f/set"`)+
		tag("valve", `ADDRESS "4"`, `ADDRESS_TYPE "COIL"`, `DATA_TYPE "BOOL"`, `SOURCE_TOPIC "plc1/valve"`, `WRITABLE true`,
			`DESTINATION_TOPIC "plc1/valve/set"`)))
	n.waitValue("plc1/temp", "21.5")

	n.publish("plc1/temp/set", "30")
	n.waitValue("plc1/temp", "30")
	p.mu.Lock()
	if p.hold[10] != 300 {
		t.Errorf("register 10 = %d, want 300", p.hold[10])
	}
	p.mu.Unlock()
	n.waitValue(WriteTopic("P", "temp"), n.mustValue(WriteTopic("P", "temp"))) // present
	if v, _ := n.value(WriteTopic("P", "temp")); !strings.Contains(v, `"ok":true`) {
		t.Errorf("write result %s", v)
	}

	n.publish("plc1/f/set", `{"value": -2.5}`)
	n.waitValue("plc1/f", "-2.5")
	n.publish("plc1/valve/set", "true")
	n.waitValue("plc1/valve", "true")

	for _, bad := range []struct{ payload, reason string }{
		{"abc", "not a number"},
		{"150", "outside MIN_VALUE..MAX_VALUE"},
		{"-4000", "outside INT16's range"},
	} {
		n.reset(WriteTopic("P", "temp"))
		n.publish("plc1/temp/set", bad.payload)
		eventually(t, waitTimeout, func() error {
			v, _ := n.value(WriteTopic("P", "temp"))
			if !strings.Contains(v, `"ok":false`) || !strings.Contains(v, bad.reason) {
				return fmt.Errorf("write of %q: result %q, want a refusal naming %q", bad.payload, v, bad.reason)
			}
			return nil
		})
	}
	p.mu.Lock()
	if p.hold[10] != 300 {
		t.Errorf("a refused write changed register 10 to %d", p.hold[10])
	}
	p.mu.Unlock()
	n.waitStatus("P", func(s Snapshot) error {
		if s.WriteErrors != 3 || s.Writes != 3 {
			return fmt.Errorf("status counts %d writes and %d refused, want 3 and 3", s.Writes, s.WriteErrors)
		}
		return nil
	})
}

func (n *node) mustValue(tp string) string {
	n.t.Helper()
	var v string
	eventually(n.t, waitTimeout, func() error {
		var ok bool
		if v, ok = n.value(tp); !ok {
			return errors.New(tp + " not published")
		}
		return nil
	})
	return v
}

// A device restarted mid-run: the connector reports it, redials, and
// resumes with the device's new values; nothing old is published after.
func TestModbusDeviceRestart(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) { p.hold[0] = 1 })
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 20 MILLISECONDS\n"+
		tag("v", `ADDRESS "0"`, `DATA_TYPE "UINT16"`, `SOURCE_TOPIC "r/v"`)))
	n.waitValue("r/v", "1")
	p.stop()
	n.waitStatus("P", func(s Snapshot) error {
		if s.Connection != Reconnecting || s.Health != Red || s.LastError == "" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.reset("r/v")
	p.set(func(p *plc) { p.hold[0] = 2 })
	p.start()
	n.waitValue("r/v", "2")
	for _, v := range n.history("r/v") {
		if v != "2" {
			t.Fatalf("after the restart the connector published %q (history %v)", v, n.history("r/v"))
		}
	}
	n.waitStatus("P", func(s Snapshot) error {
		if s.Connection != Connected || s.Connects < 2 || s.Failures < 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

// A tag on an address the device does not have fails alone: the others,
// read in the same request before, keep publishing.
func TestModbusWrongAddress(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) { p.hold[98], p.hold[99] = 5, 6 })
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 20 MILLISECONDS\n        WITH SOURCE_TOPIC \"w\"\n"+
		tag("a", `ADDRESS "98"`, `DATA_TYPE "UINT16"`)+
		tag("b", `ADDRESS "99"`, `DATA_TYPE "UINT16"`)+
		tag("bad", `ADDRESS "100"`, `DATA_TYPE "UINT16"`)))
	n.waitValue("w/a", "5")
	n.waitValue("w/b", "6")
	s := n.waitStatus("P", func(s Snapshot) error {
		if s.Health != Yellow || !strings.Contains(s.TagErrors["bad"], "illegal data address") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if s.Connection != Connected {
		t.Errorf("a wrong address dropped the connection: %+v", s)
	}
	p.set(func(p *plc) { p.hold[98] = 7 })
	n.waitValue("w/a", "7")
	if _, ok := n.value("w/bad"); ok {
		t.Error("the wrong address published a value")
	}
}

// A device that stops answering: the request times out, the connection
// is dropped, and after the device answers again nothing of the late
// replies is published.
func TestModbusTimeout(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) { p.hold[0] = 1 })
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 20 MILLISECONDS\n"+
		tag("v", `ADDRESS "0"`, `DATA_TYPE "UINT16"`, `SOURCE_TOPIC "t/v"`)))
	n.waitValue("t/v", "1")
	p.set(func(p *plc) { p.block = make(chan struct{}) })
	n.waitStatus("P", func(s Snapshot) error {
		if s.Connection != Reconnecting || !strings.Contains(s.LastError, "timeout") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	n.reset("t/v")
	p.set(func(p *plc) { p.hold[0] = 2 })
	p.unblock()
	n.waitValue("t/v", "2")
	for _, v := range n.history("t/v") {
		if v != "2" {
			t.Fatalf("a late reply was published: %v", n.history("t/v"))
		}
	}
}

// Stop closes the device connection within a second even while a request
// waits for a device that does not answer; Run and Stop are idempotent.
func TestStopAndRunAreQuickAndIdempotent(t *testing.T) {
	n, p := newNode(t, func(o *Options) { o.WaitForOwner = true }), newPLC(t)
	src := strings.Replace(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 20 MILLISECONDS\n"+
		tag("v", `ADDRESS "0"`, `DATA_TYPE "UINT16"`, `SOURCE_TOPIC "s/v"`)), "'300'", "'30000'", 1)
	n.deploy(src)
	if n.m.Connectors()[0].Running {
		t.Fatal("a connector waiting for its owner runs")
	}
	for range 2 {
		if err := n.m.Run("P"); err != nil {
			t.Fatal(err)
		}
	}
	n.waitValue("s/v", "0")
	p.set(func(p *plc) { p.block = make(chan struct{}) })
	time.Sleep(50 * time.Millisecond) // let a request reach the blocked device (not a wait for a condition)
	start := time.Now()
	n.m.Stop("P")
	n.m.Stop("P")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Stop took %v", d)
	}
	if n.m.Connectors()[0].Running {
		t.Fatal("still running after Stop")
	}
	n.waitStatus("P", func(s Snapshot) error {
		if s.Connection != Standby { // another node runs it now
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if err := n.m.Run("nope"); err == nil {
		t.Error("Run of an unknown connector succeeded")
	}
}
