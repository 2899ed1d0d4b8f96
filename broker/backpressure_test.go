package broker_test

import (
	"fmt"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"
)

// TestSlowSubscriberPausesPublisherInsteadOfDropping: a QoS 1 subscriber
// that acknowledges slowly fills its session queue; the publisher is
// paused (its socket is not read) rather than the broker dropping QoS 1
// messages, and every message arrives, in order.
func TestSlowSubscriberPausesPublisherInsteadOfDropping(t *testing.T) {
	const queue, total = 10, 200
	srv := startServer(t, broker.Options{MaxQueuedMessages: queue})
	cp := v5Connect("slow-sub")
	cp.Props.ReceiveMaximum = 2 // at most two unacknowledged messages towards it
	cp.Props.Set(packet.PropReceiveMaximum)
	subc, _ := connectRaw(t, srv.addr, cp)
	subc.subscribe(1, 0, sub("bp/#", 1))

	pubc, _ := connectRaw(t, srv.addr, v5Connect("fast-pub"))
	var batch []byte
	for i := 1; i <= total; i++ {
		batch = pubc.encode(batch, rawPublish("bp/x", 1, uint16(i), fmt.Sprint(i)))
	}
	go pubc.nc.Write(batch) // pipelined: the broker may stop reading it part way

	// The publisher is paused once the subscriber's queue is full.
	eventually(t, waitTimeout, func() error {
		if srv.Stats().PublisherPauses.Load() == 0 {
			return fmt.Errorf("no publisher pause yet")
		}
		return nil
	})
	// What was routed before the pause is acknowledged during it, not
	// once the subscriber catches up.
	if a := pubc.expectAck(packet.PUBACK); a.PacketID != 1 {
		t.Fatalf("first PUBACK during the pause is for %d, want 1", a.PacketID)
	}
	for want := 1; want <= total; want++ {
		p := subc.expectPublish()
		if got := string(p.Payload); got != fmt.Sprint(want) {
			t.Fatalf("subscriber got message %s, want %d (lost or reordered)", got, want)
		}
		subc.sendPackets(ack(packet.PUBACK, p.PacketID))
	}
	if d := srv.Stats().Dropped.Load(); d != 0 {
		t.Fatalf("%d messages dropped; backpressure should have kept them", d)
	}
	// The publisher got every acknowledgement.
	for i := 2; i <= total; i++ {
		a := pubc.expectAck(packet.PUBACK)
		if a.PacketID != uint16(i) {
			t.Fatalf("PUBACK %d, want %d", a.PacketID, i)
		}
	}
}

// TestOfflineQueueStillBounded: backpressure is only for connected
// subscribers; an offline session's queue drops its oldest messages, so a
// client that never comes back cannot stop publishers.
func TestOfflineQueueStillBounded(t *testing.T) {
	srv := startServer(t, broker.Options{MaxQueuedMessages: 5})
	cp := v5Connect("gone-sub")
	cp.CleanStart = true
	cp.Props.SessionExpiry = 60
	cp.Props.Set(packet.PropSessionExpiry)
	subc, _ := connectRaw(t, srv.addr, cp)
	subc.subscribe(1, 0, sub("off/#", 1))
	subc.nc.Close()
	eventually(t, waitTimeout, func() error {
		if srv.Stats().Connections.Load() != 0 {
			return fmt.Errorf("subscriber still connected")
		}
		return nil
	})
	pubc, _ := connectRaw(t, srv.addr, v5Connect("pub2"))
	for i := 1; i <= 20; i++ {
		pubc.sendPackets(rawPublish("off/x", 1, uint16(i), fmt.Sprint(i)))
		if a := pubc.expectAck(packet.PUBACK); a.PacketID != uint16(i) {
			t.Fatalf("PUBACK %d, want %d", a.PacketID, i)
		}
	}
	if p := srv.Stats().PublisherPauses.Load(); p != 0 {
		t.Fatalf("publisher paused %d times for an offline session", p)
	}
	if d := srv.Stats().Dropped.Load(); d != 15 {
		t.Fatalf("dropped %d, want 15 (20 into a queue of 5)", d)
	}
}
