package packet_test

import (
	"bytes"
	"fmt"
	"testing"

	"gantry/broker/packet"
	"gantry/broker/packet/packettest"
)

var benchPayloadSizes = []int{16, 1024}

func benchPublish(size int) *packet.Publish {
	return &packet.Publish{QoS: 1, Topic: []byte("devices/abc123/telemetry"), PacketID: 7,
		Payload: bytes.Repeat([]byte{'x'}, size)}
}

func BenchmarkDecodePublish(b *testing.B) {
	for _, size := range benchPayloadSizes {
		for _, v := range []packet.Version{packet.V311, packet.V5} {
			b.Run(fmt.Sprintf("v%d/%dB", v, size), func(b *testing.B) {
				wire := benchPublish(size).Append(nil, v)
				h, n, _ := packet.DecodeFixedHeader(wire)
				body := wire[n:]
				var p packet.Publish
				b.SetBytes(int64(len(wire)))
				b.ReportAllocs()
				for b.Loop() {
					if err := packet.DecodePublish(h, body, v, &p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkEncodePublish(b *testing.B) {
	for _, size := range benchPayloadSizes {
		for _, v := range []packet.Version{packet.V311, packet.V5} {
			b.Run(fmt.Sprintf("v%d/%dB", v, size), func(b *testing.B) {
				p := benchPublish(size)
				buf := make([]byte, 0, p.Size(v))
				b.SetBytes(int64(cap(buf)))
				b.ReportAllocs()
				for b.Loop() {
					buf = p.Append(buf[:0], v)
				}
			})
		}
	}
}

func BenchmarkDecodeConnect(b *testing.B) {
	for _, name := range []string{"v311/connect/will-retain-qos1-username-password", "v5/connect/all-properties-and-will-properties"} {
		b.Run(name, func(b *testing.B) {
			wire := packettest.Get(name).Wire
			_, n, _ := packet.DecodeFixedHeader(wire)
			body := wire[n:]
			var c packet.Connect
			b.ReportAllocs()
			for b.Loop() {
				if err := packet.DecodeConnect(body, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
