package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestTagValues: the console's per-tag view of a Modbus connector on
// simonvetter/modbus's server holds each tag's latest reading and the
// error of a tag the device refuses.
func TestTagValues(t *testing.T) {
	n, p := newNode(t), newPLC(t)
	p.set(func(p *plc) { p.hold[98] = 215 })
	n.deploy(modbusSource("P", p, "", "    ADD MAPPING M\n        WITH EVERY 20 MILLISECONDS\n        WITH SOURCE_TOPIC \"v\"\n"+
		tag("temp", `ADDRESS "98"`, `DATA_TYPE "INT16"`, `SCALING "0.1"`, `UNIT "°C"`, `WRITABLE true`, `DESTINATION_TOPIC "v/temp/set"`)+
		tag("bad", `ADDRESS "100"`, `DATA_TYPE "UINT16"`)))
	before := time.Now()
	n.waitValue("v/temp", "21.5")
	var got []TagValue
	eventually(t, waitTimeout, func() error {
		var ok bool
		if got, ok = n.m.TagValues("P"); !ok || len(got) != 2 {
			return fmt.Errorf("TagValues = %+v, %v", got, ok)
		}
		if got[1].Error == "" {
			return fmt.Errorf("bad has no error yet: %+v", got[1])
		}
		return nil
	})
	temp, bad := got[0], got[1]
	if temp.Tag != "temp" || temp.Value != "21.5" || temp.Topic != "v/temp" || temp.Type != "INT16" || temp.Unit != "°C" ||
		!temp.Writable || temp.WriteTopic != "v/temp/set" || temp.At.Before(before.Add(-time.Second)) || temp.Error != "" {
		t.Errorf("temp = %+v", temp)
	}
	if bad.Tag != "bad" || bad.Value != "" || !bad.At.IsZero() {
		t.Errorf("bad = %+v", bad)
	}
	p.set(func(p *plc) { p.hold[98] = 300 })
	eventually(t, waitTimeout, func() error {
		if got, _ := n.m.TagValues("P"); got[0].Value != "30" {
			return fmt.Errorf("temp = %+v", got[0])
		}
		return nil
	})
	if _, ok := n.m.TagValues("nope"); ok {
		t.Error("TagValues of a connector not deployed")
	}
}
