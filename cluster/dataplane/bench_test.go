package dataplane

import (
	"gantry/cluster/wire"
	"testing"

	"gantry/broker"
)

type nopBroker struct{}

func (nopBroker) DeliverBatch([]*broker.Message, func(error)) bool { return false }
func (nopBroker) Filters() []string                                { return nil }
func (nopBroker) StoreRetainedBatch([]*broker.Message, func(error)) bool {
	return false
}
func (nopBroker) RangeRetained(func(*broker.Message) bool) {}

// BenchmarkForward is the publish hook's cost per message with two peers
// that want everything (links up, records taken as a link would).
func BenchmarkForward(b *testing.B) {
	for _, qos := range []byte{0, 1} {
		b.Run([]string{"qos0", "qos1"}[qos], func(b *testing.B) {
			p, err := New(Options{NodeName: "a", Username: "cluster", Broker: nopBroker{}, BestEffort: true, Reliable: true, ForwardQueueEntries: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Stop()
			var peers []*peerStream
			for _, n := range []string{"b", "c"} {
				ps, _ := p.out.addPeer(n)
				p.out.setUp(ps, true)
				peers = append(peers, ps)
			}
			m := &broker.Message{Topic: "plant/line1/temp", Payload: make([]byte, 16), QoS: qos, ClientID: "sensor-1"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.InterceptPublish(m, nopResolver{})
				if i%64 == 63 {
					for _, ps := range peers {
						pid, _ := p.out.take(ps, 1<<20, func(string) bool { return true }, func(uint64, []byte, []string, *wire.Rep) int { return 0 }, func() uint16 { return 1 })
						if pid != 0 {
							p.out.confirm(ps.name, ps, pid, false)
						}
					}
				}
			}
		})
	}
}

type nopResolver struct{}

func (nopResolver) Resolve(error) {}
