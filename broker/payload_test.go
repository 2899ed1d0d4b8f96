package broker_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// payloadFor is the payload of message seq: its number, then a pattern
// that depends on it, 100 to 3,000 bytes long, so that a buffer of one
// message handed to another shows.
func payloadFor(seq int) []byte {
	n := 100 + seq*37%2900
	p := make([]byte, n)
	binary.BigEndian.PutUint32(p, uint32(seq))
	for i := 4; i < n; i++ {
		p[i] = byte(seq*31 + i)
	}
	return p
}

// checkPayload fails unless p is the payload of a message in
// [0, total) and returns its number.
func checkPayload(t *testing.T, who string, p []byte, total int) int {
	t.Helper()
	if len(p) < 4 {
		t.Fatalf("%s: payload of %d bytes", who, len(p))
	}
	seq := int(binary.BigEndian.Uint32(p))
	if seq >= total || !bytes.Equal(p, payloadFor(seq)) {
		t.Fatalf("%s: payload of message %d is not the one published (%d bytes)", who, seq, len(p))
	}
	return seq
}

// TestPooledPayloadsStayIntact: the payloads of published messages live in
// pooled buffers that go back to the pool when the last delivery is done
// with them. A fast subscriber acknowledges at once, so buffers are
// reused all the time, while a slow one holds messages in flight, loses
// its connection and gets them again on its session's next connection:
// every delivery must carry the bytes that were published.
func TestPooledPayloadsStayIntact(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{MaxQueuedMessages: 10000})
	const total = 1500

	slowCP := v5Connect("slow")
	slowCP.Props.SessionExpiry = 60
	slowCP.Props.ReceiveMaximum = 20
	slowCP.Props.Set(packet.PropSessionExpiry)
	slowCP.Props.Set(packet.PropReceiveMaximum)
	slow, _ := connectRaw(t, s.addr, slowCP)
	slow.subscribe(1, 0, sub("pool/#", 1))

	// An in-process client keeps every payload it is handed, as LoT's
	// topic cache does; they must still be the published bytes at the end.
	var kept [][]byte
	keptAll := make(chan struct{})
	inproc := s.NewClient("keeper", broker.OriginLoT, func(m *broker.Message) {
		kept = append(kept, m.Payload)
		if len(kept) == total {
			close(keptAll)
		}
	})
	defer inproc.Close()
	if err := inproc.Subscribe("pool/#", 1); err != nil {
		t.Fatal(err)
	}

	fast, _ := connectRaw(t, s.addr, v5Connect("fast"))
	fast.subscribe(1, 0, sub("pool/#", 1))
	fastDone := make(chan error, 1)
	go func() {
		seen := 0
		for seen < total {
			p, err := fast.read(waitTimeout)
			if err != nil {
				fastDone <- err
				return
			}
			m, ok := p.(*packet.Publish)
			if !ok {
				fastDone <- fmt.Errorf("fast subscriber got %T", p)
				return
			}
			seq := binary.BigEndian.Uint32(m.Payload)
			if !bytes.Equal(m.Payload, payloadFor(int(seq))) {
				fastDone <- fmt.Errorf("fast subscriber: payload of message %d is not the one published", seq)
				return
			}
			fast.nc.SetWriteDeadline(time.Now().Add(waitTimeout))
			if _, err := fast.nc.Write(fast.encode(nil, ack(packet.PUBACK, m.PacketID))); err != nil {
				fastDone <- err
				return
			}
			seen++
		}
		fastDone <- nil
	}()

	pub, _ := connectRaw(t, s.addr, v5Connect("pub"))
	for seq := range total {
		pid := uint16(seq%1000 + 1)
		pub.sendPackets(&packet.Publish{QoS: 1, PacketID: pid, Topic: []byte(fmt.Sprintf("pool/%d", seq%7)), Payload: payloadFor(seq)})
		if a := pub.expectAck(packet.PUBACK); a.PacketID != pid {
			t.Fatalf("PUBACK %d, want %d", a.PacketID, pid)
		}
	}
	if err := recv(t, fastDone, "the fast subscriber's deliveries"); err != nil {
		t.Fatal(err)
	}

	// The slow subscriber has 20 messages in flight; it reads them, acks
	// none and loses its connection, twice (a message sent again is kept
	// for a further resend), then gets them again, and the rest.
	slowCP.CleanStart = false
	for round := range 2 {
		for range 20 {
			checkPayload(t, fmt.Sprintf("slow, delivery %d", round+1), slow.expectPublish().Payload, total)
		}
		slow.nc.Close()
		slow, _ = connectRaw(t, s.addr, slowCP)
	}
	got := make([]bool, total)
	for n := 0; n < total; n++ {
		m := slow.expectPublish()
		seq := checkPayload(t, "slow, after reconnecting", m.Payload, total)
		if got[seq] {
			t.Fatalf("slow subscriber got message %d twice after reconnecting", seq)
		}
		got[seq] = true
		slow.sendPackets(ack(packet.PUBACK, m.PacketID))
	}
	recv(t, keptAll, "the in-process client's deliveries")
	// Every buffer is back in its pool: other messages take them now.
	for seq := total; seq < 2*total; seq++ {
		pid := uint16(seq%1000 + 1)
		pub.sendPackets(&packet.Publish{QoS: 1, PacketID: pid, Topic: []byte("elsewhere"), Payload: payloadFor(seq)})
		pub.expectAck(packet.PUBACK)
	}
	for _, p := range kept {
		checkPayload(t, "in-process client, after all deliveries", p, total)
	}
}

// TestPublishedPayloadsAreNotAllocatedPerMessage: relaying 1 KB messages
// does not allocate a buffer of their size per message, because their
// payloads go back to a pool once delivered (a copy per message made the
// garbage collector run every half second at 20,000 messages/s, stalling
// the deliveries of a single core each time). Allocations are counted by
// size, so that the buffers a collection takes from other pools during
// the measurement do not count. A burst is sent only once the subscriber
// has read the one before: a pool holds as many buffers as messages were
// queued at once, and with all of a window's messages sent at once a
// subscriber that a loaded core left behind held thousands, which the
// pool had to grow by (and the collections that growth set off emptied
// it again), up to 0.5 allocations per message under -cpu 1 with the
// cores busy.
func TestPublishedPayloadsAreNotAllocatedPerMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector (sync.Pool drops items); make test runs this test without -race too")
	}
	s := startServer(t, broker.Options{MaxQueuedMessages: 1 << 16})
	subscriber, _ := connectRaw(t, s.addr, v5Connect("sink"))
	subscriber.subscribe(1, 0, sub("bulk", 0))
	received := &countingWriter{grew: make(chan struct{}, 1)}
	go io.Copy(received, subscriber.br)

	pub, _ := connectRaw(t, s.addr, v5Connect("bulk-pub"))
	pkt := pub.encode(nil, &packet.Publish{Topic: []byte("bulk"), Payload: make([]byte, 1024)})
	const batch = 100
	burst := bytes.Repeat(pkt, batch)
	send := func(bursts int) {
		for range bursts {
			want := received.n.Load() + int64(len(burst))
			pub.send(burst)
			received.waitFor(t, want)
		}
	}
	send(20) // warm up buffers and pools
	const bursts = 100
	perMessage := func(before uint64, lo, hi float64) float64 {
		return float64(sizedAllocs(lo, hi)-before) / (bursts * batch)
	}
	// The best of three windows: a collection empties every sync.Pool, and
	// on a loaded machine one may fall into a window (each such window
	// refills the pools once; a copy per message shows in all three).
	p, m := 1e9, 1e9
	for range 3 {
		payloads, messages := sizedAllocs(512, 2048), sizedAllocs(128, 512)
		send(bursts)
		p, m = min(p, perMessage(payloads, 512, 2048)), min(m, perMessage(messages, 128, 512))
	}
	t.Logf("per 1 KB message relayed: %.3f allocations of 513 B to 2 KB (its payload), %.3f of 129 to 512 B (its Message)", p, m)
	if p > 0.2 {
		t.Errorf("%.3f allocations of 513 B to 2 KB per 1 KB message relayed: the payload is copied into a new allocation", p)
	}
	if m > 0.2 {
		t.Errorf("%.3f allocations of 129 to 512 B per 1 KB message relayed: a Message is allocated per message", m)
	}
}

// sizedAllocs counts the heap allocations so far of more than lo and at
// most hi bytes.
func sizedAllocs(lo, hi float64) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(sample)
	h := sample[0].Value.Float64Histogram()
	var n uint64
	for i, c := range h.Counts {
		if h.Buckets[i] >= lo && h.Buckets[i+1] <= hi+1 {
			n += c
		}
	}
	return n
}

// countingWriter counts the bytes written to it and signals grew after
// each write, for a waiter on a count.
type countingWriter struct {
	n    atomic.Int64
	grew chan struct{} // capacity 1: a signal not yet taken stands for any number of writes
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	select {
	case w.grew <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until at least want bytes were written.
func (w *countingWriter) waitFor(t *testing.T, want int64) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for w.n.Load() < want {
		select {
		case <-w.grew:
		case <-timeout.C:
			t.Fatalf("subscriber received %d of %d bytes within %v", w.n.Load(), want, waitTimeout)
		}
	}
}
