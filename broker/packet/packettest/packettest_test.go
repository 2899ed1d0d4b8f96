package packettest

import (
	"strings"
	"testing"

	"gantry/broker/packet"
)

func TestFixtureNamesAreUniqueAndPrefixedByVersion(t *testing.T) {
	prefixes := map[packet.Version]string{packet.V31: "v31/", packet.V311: "v311/", packet.V5: "v5/"}
	seen := map[string]bool{}
	for _, f := range Fixtures {
		if seen[f.Name] {
			t.Errorf("duplicate fixture name %q", f.Name)
		}
		seen[f.Name] = true
		if strings.HasPrefix(f.Name, "header/") {
			continue
		}
		if !strings.HasPrefix(f.Name, prefixes[f.Version]) {
			t.Errorf("%s: name does not start with %q (Version %d)", f.Name, prefixes[f.Version], f.Version)
		}
	}
}

func TestFixturesHaveEitherPacketOrError(t *testing.T) {
	for _, f := range Fixtures {
		if (f.Packet == nil) == f.Valid() {
			t.Errorf("%s: Packet %v with Err %v", f.Name, f.Packet, f.Err)
		}
		if f.Noncanonical && !f.Valid() {
			t.Errorf("%s: Noncanonical on a refused fixture", f.Name)
		}
		if len(f.Wire) == 0 {
			t.Errorf("%s: empty Wire", f.Name)
		}
	}
}

func TestFixturesCoverEveryPacketType(t *testing.T) {
	covered := map[packet.Version]map[packet.Type]bool{packet.V311: {}, packet.V5: {}, packet.V31: {}}
	for _, f := range Fixtures {
		if f.Valid() {
			covered[f.Version][PacketType(f.Packet)] = true
		}
	}
	for typ := packet.CONNECT; typ <= packet.AUTH; typ++ {
		if !covered[packet.V5][typ] {
			t.Errorf("no valid v5 %v fixture", typ)
		}
		if typ != packet.AUTH && !covered[packet.V311][typ] {
			t.Errorf("no valid v3.1.1 %v fixture", typ)
		}
	}
	if !covered[packet.V31][packet.CONNECT] {
		t.Error("no valid v3.1 CONNECT fixture")
	}
}

func TestFixturesCoverEveryProperty(t *testing.T) {
	var seen uint64
	for _, f := range Fixtures {
		for _, p := range fixtureProperties(f.Packet) {
			seen |= p.Has
		}
	}
	for id := packet.PropPayloadFormat; id <= packet.PropSharedSubAvailable; id++ {
		if isPropertyID(id) && seen&(1<<id) == 0 {
			t.Errorf("no valid fixture carries property 0x%02X", byte(id))
		}
	}
}

func isPropertyID(id packet.PropID) bool {
	switch id {
	case 0x04, 0x05, 0x06, 0x07, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x14, 0x1B, 0x1D, 0x1E, 0x20:
		return false
	}
	return true
}

func fixtureProperties(p any) []*packet.Properties {
	switch p := p.(type) {
	case *packet.Connect:
		return []*packet.Properties{&p.Props, &p.WillProps}
	case *packet.Connack:
		return []*packet.Properties{&p.Props}
	case *packet.Publish:
		return []*packet.Properties{&p.Props}
	case *packet.Ack:
		return []*packet.Properties{&p.Props}
	case *packet.Subscribe:
		return []*packet.Properties{&p.Props}
	case *packet.Suback:
		return []*packet.Properties{&p.Props}
	case *packet.Unsubscribe:
		return []*packet.Properties{&p.Props}
	case *packet.Unsuback:
		return []*packet.Properties{&p.Props}
	case *packet.Disconnect:
		return []*packet.Properties{&p.Props}
	case *packet.Auth:
		return []*packet.Properties{&p.Props}
	}
	return nil
}

func TestGetFindsFixtureByName(t *testing.T) {
	f := Get("v5/publish/qos1-all-properties")
	if f.Version != packet.V5 || f.Packet == nil {
		t.Fatalf("Get returned %+v", f)
	}
	defer func() {
		if recover() == nil {
			t.Error("Get of an unknown name did not panic")
		}
	}()
	Get("no/such/fixture")
}

func TestWireBuildersProduceMinimalVarints(t *testing.T) {
	cases := map[int][]byte{0: {0}, 127: {0x7F}, 128: {0x80, 0x01}, 16383: {0xFF, 0x7F},
		16384: {0x80, 0x80, 0x01}, 268435455: {0xFF, 0xFF, 0xFF, 0x7F}}
	for v, want := range cases {
		if got := vbi(v); string(got) != string(want) {
			t.Errorf("vbi(%d) = % X, want % X", v, got, want)
		}
	}
}
