package packet_test

import (
	"testing"

	"gantry/broker/packet"
	"gantry/broker/packet/packettest"
)

func TestDecodePublishWithoutPropertiesDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"v311/publish/qos1", "v5/publish/qos0-no-properties", "v5/publish/qos2-dup-retain"} {
		f := packettest.Get(name)
		h, n, err := packet.DecodeFixedHeader(f.Wire)
		if err != nil {
			t.Fatal(err)
		}
		body := f.Wire[n:]
		var p packet.Publish
		allocs := testing.AllocsPerRun(100, func() {
			if err := packet.DecodePublish(h, body, f.Version, &p); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: DecodePublish allocates %.1f times", name, allocs)
		}
	}
}

func TestDecodeAckWithoutPropertiesDoesNotAllocate(t *testing.T) {
	h := packet.FixedHeader{Type: packet.PUBREL, Flags: 2, Remaining: 3}
	body := []byte{0, 1, 0x92}
	var a packet.Ack
	if allocs := testing.AllocsPerRun(100, func() { _ = packet.DecodeAck(h, body, packet.V5, &a) }); allocs != 0 {
		t.Errorf("DecodeAck allocates %.1f times", allocs)
	}
}

func TestPublishAppendDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"v311/publish/qos1", "v5/publish/qos0-no-properties", "v5/publish/qos1-all-properties"} {
		f := packettest.Get(name)
		p := f.Packet.(*packet.Publish)
		buf := make([]byte, 0, p.Size(f.Version))
		allocs := testing.AllocsPerRun(100, func() { buf = p.Append(buf[:0], f.Version) })
		if allocs != 0 {
			t.Errorf("%s: Append allocates %.1f times", name, allocs)
		}
	}
}

func TestAckAppendDoesNotAllocate(t *testing.T) {
	acks := []*packet.Ack{
		{Type: packet.PUBACK, PacketID: 1},
		{Type: packet.PUBREL, PacketID: 2, ReasonCode: packet.PacketIdentifierNotFound},
		packettest.Get("v5/puback/not-authorized-with-properties").Packet.(*packet.Ack),
	}
	buf := make([]byte, 0, 64)
	for _, a := range acks {
		for _, v := range []packet.Version{packet.V311, packet.V5} {
			if allocs := testing.AllocsPerRun(100, func() { buf = a.Append(buf[:0], v) }); allocs != 0 {
				t.Errorf("%+v v%d: Append allocates %.1f times", a, v, allocs)
			}
		}
	}
}

func TestOtherAppendsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 512)
	for _, f := range packettest.Fixtures {
		if !f.Valid() {
			continue
		}
		allocs := testing.AllocsPerRun(20, func() { buf = packettest.Append(buf[:0], f.Packet, f.Version) })
		if allocs != 0 {
			t.Errorf("%s: Append allocates %.1f times", f.Name, allocs)
		}
	}
}
