package dataplane

import (
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
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
	for _, v := range []struct {
		name   string
		qos    byte
		quorum bool
	}{{"qos0", 0, false}, {"qos1", 1, false}, {"qos1-quorum", 1, true}} {
		b.Run(v.name, func(b *testing.B) {
			opts := Options{NodeName: "a", Username: "cluster", Broker: nopBroker{}, BestEffort: true, Reliable: true, ForwardQueueEntries: 1 << 20}
			if v.quorum {
				// In memory, three copies of every partition, both peers'
				// links up: a publish waits for one of them.
				opts.Replication = &Replication{Gate: true, Timeout: time.Minute, Window: 1 << 30, CompactEvery: 1 << 20}
			}
			p, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Stop()
			var peers []*peerStream
			for _, n := range []string{"b", "c"} {
				ps, _ := p.out.addPeer(n)
				p.out.setUp(ps, true)
				peers = append(peers, ps)
				l := &link{p: p, peer: n, ps: ps, done: make(chan struct{})}
				l.connected.Store(true)
				close(l.done)
				p.links[n] = l
			}
			if v.quorum {
				m := partition.Map{Version: 1, Partitions: make([]partition.Assignment, 32)}
				for i := range m.Partitions {
					m.Partitions[i] = partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1}
				}
				p.SetMap(m)
			}
			m := &broker.Message{Topic: "plant/line1/temp", Payload: make([]byte, 16), QoS: v.qos, ClientID: "sensor-1"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.InterceptPublish(m, nopResolver{})
				if i%64 == 63 {
					for _, ps := range peers {
						pid, _ := p.out.take(ps, 1<<20, noHead, func(string) bool { return true }, func(uint64, []byte, []string, *wire.Rep) int { return 0 }, func() uint16 { return 1 })
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
