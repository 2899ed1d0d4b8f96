package broker_test

import (
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// A client that goes on sending after the broker disconnected it (here:
// Receive Maximum + 1 QoS 2 publishes, then PUBRELs and more publishes
// with unread bytes piling up in the broker's socket) still reads the
// DISCONNECT 0x93: the broker shuts its write side down and drains instead
// of closing into a TCP reset.
func TestDisconnectReachesClientThatKeepsSending(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{ReceiveMaximum: 2})
	c, _ := connectRaw(t, s.addr, v5Connect("linger"))
	var flood []byte
	for i := range 3 {
		flood = c.encode(flood, rawPublish("linger/t", 2, uint16(i+1), "x"))
	}
	filler := make([]byte, 0, 256<<10)
	for len(filler) < 256<<10 {
		filler = c.encode(filler, &packet.Ack{Type: packet.PUBREL, PacketID: 1})
		filler = c.encode(filler, rawPublish("linger/t", 0, 0, "keep sending"))
	}
	// Like a client that writes before it reads again: every write must
	// succeed (a reset fails it), then the DISCONNECT must be there.
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(append(flood, filler...)); err != nil {
		t.Fatalf("write: %v", err)
	}
	for i := range 16 { // 4 MiB more, past what socket buffers hold
		if _, err := c.nc.Write(filler); err != nil {
			t.Fatalf("write %d after the limit: %v (the broker reset the connection)", i, err)
		}
	}
	for {
		p, err := c.read(5 * time.Second)
		if err != nil {
			t.Fatalf("the client did not read DISCONNECT 0x93: %v", err)
		}
		if d, ok := p.(*packet.Disconnect); ok {
			if d.ReasonCode != packet.ReceiveMaximumExceeded {
				t.Fatalf("DISCONNECT %v, want 0x93", d.ReasonCode)
			}
			return
		}
	}
}
