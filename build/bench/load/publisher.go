package load

import (
	"fmt"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
)

// maxBatch bounds the PUBLISH packets encoded into one write call.
const maxBatch = 64

// stallTimeout is how long a closed-loop publisher waits without any
// credit coming back before it writes its window off (messages dropped at
// the tail of a QoS 0 stream never show up as a gap).
const stallTimeout = 500 * time.Millisecond

// publisher sends the messages of one client. Its run loop owns the
// connection's write side; its ack reader owns the read side.
type publisher struct {
	id      uint32
	c       *conn
	topic   []byte
	qos     byte
	payload []byte
	buf     []byte
	epoch   time.Time

	window   int           // end-to-end window per subscriber (0 = none)
	inflight int           // unacknowledged QoS 1 packets at most
	quota    *quota        // closed loop: shared bound on the messages sent (nil = none)
	interval time.Duration // open loop: time between messages (0 = closed loop)
	phase    time.Duration // open loop: offset of the first message
	start    int64         // open loop: when the first message is due, ns since epoch (set before run)

	sent  atomic.Uint64
	acked atomic.Uint64
	// recv counts, per subscriber hearing this publisher (its slot), the
	// messages received or known lost. Empty against a sink.
	recv     []atomic.Int64
	forgiven int64 // messages written off after stalls (run loop only)
	stalls   int   // run loop only
	waiting  atomic.Bool
	wake     chan struct{}
	stall    *time.Timer

	// Acknowledgement latency (Offline), when sentAt is not nil: the send
	// time of message seq is in sentAt[seq mod len], which holds at least
	// the inflight window; the ack reader records into acks while
	// measuring is set.
	sentAt    []atomic.Int64
	acks      Histogram
	measuring *atomic.Bool
	late      Histogram // open loop: how late the timer woke the publisher (run loop only)
}

// signal wakes the run loop if it waits for credit.
func (p *publisher) signal() {
	if p.waiting.Load() && p.waiting.CompareAndSwap(true, false) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// room returns how many messages may be sent now.
func (p *publisher) room() int {
	sent := p.sent.Load()
	n := maxBatch
	if p.qos > 0 {
		n = min(n, p.inflight-int(sent-p.acked.Load()))
	}
	if p.window > 0 && len(p.recv) > 0 {
		n = min(n, p.window-int(max(p.outstanding(sent), 0)))
	}
	return n
}

// outstanding returns the messages of the most lagging subscriber still
// on their way, less those written off.
func (p *publisher) outstanding(sent uint64) int64 {
	least := p.recv[0].Load()
	for i := 1; i < len(p.recv); i++ {
		least = min(least, p.recv[i].Load())
	}
	return int64(sent) - least - p.forgiven
}

// awaitRoom blocks until room() > 0; it returns 0 when stop closes.
func (p *publisher) awaitRoom(stop <-chan struct{}) int {
	for {
		if n := p.room(); n > 0 {
			return n
		}
		p.waiting.Store(true)
		if n := p.room(); n > 0 {
			p.waiting.Store(false)
			return n
		}
		p.stall.Reset(stallTimeout)
		select {
		case <-p.wake:
		case <-stop:
			return 0
		case <-p.stall.C:
			p.writeOff()
		}
		p.stall.Stop()
	}
}

// writeOff forgets the outstanding end-to-end window after a stall.
func (p *publisher) writeOff() {
	if p.window == 0 || len(p.recv) == 0 {
		return
	}
	if out := p.outstanding(p.sent.Load()); out > 0 {
		p.forgiven += out
		p.stalls++
	}
}

// send writes n messages in one call; message k is stamped
// max(firstNs + k*stepNs, floorNs).
func (p *publisher) send(n int, firstNs, stepNs, floorNs int64) error {
	buf := p.buf[:0]
	seq := p.sent.Load()
	for k := range n {
		s := seq + uint64(k)
		at := max(firstNs+int64(k)*stepNs, floorNs)
		stamp(p.payload, p.id, uint32(s), at)
		if p.sentAt != nil {
			p.sentAt[s%uint64(len(p.sentAt))].Store(at)
		}
		pub := packet.Publish{QoS: p.qos, Topic: p.topic, Payload: p.payload}
		if p.qos > 0 {
			pub.PacketID = packetID(s)
		}
		buf = pub.Append(buf, version)
	}
	p.buf = buf
	p.sent.Store(seq + uint64(n)) // before the write: acks may come back at once
	_, err := p.c.rw.Write(buf)
	return err
}

// packetID is the identifier of message seq: 1..65535, cycling.
func packetID(seq uint64) uint16 { return uint16(seq%65535) + 1 }

func (p *publisher) nowNs() int64 { return int64(time.Since(p.epoch)) }

// schedule fixes when the first paced message is due: phase after now.
// The coordinator calls it before it starts the run loop, so that the
// messages due by a sample's time (dueBy) follow from the clock alone,
// however late the run loop starts.
func (p *publisher) schedule() { p.start = p.nowNs() + int64(p.phase) }

// dueBy returns how many paced messages have come due by at (ns since
// epoch): message k is due at start + k*interval.
func (p *publisher) dueBy(at int64) int64 {
	if at < p.start {
		return 0
	}
	return (at-p.start)/int64(p.interval) + 1
}

// run sends until stop closes.
func (p *publisher) run(stop <-chan struct{}) error {
	p.stall = time.NewTimer(stallTimeout)
	p.stall.Stop()
	if p.interval > 0 {
		return p.runPaced(stop)
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n := p.awaitRoom(stop)
		if n > 0 && p.quota != nil {
			n = p.quota.take(n)
		}
		if n == 0 {
			return nil
		}
		now := p.nowNs()
		if err := p.send(n, now, 0, now); err != nil {
			return err
		}
	}
}

// runPaced sends message k at phase + k*interval after the start,
// catching up in batches when it falls behind.
//
// A message is stamped with the time it was due, or, when it came due
// while the publisher slept and the timer woke it late, with the wake-up:
// the generator's own lateness is not the broker's latency. Go's timers
// fire up to a millisecond late when the generator idles (the runtime
// then sleeps in epoll_wait, whose timeout is in whole milliseconds),
// which made 1.1 ms the p99 floor of every broker. A message that came
// due while the publisher was sending or waiting for the broker (room in
// its window, a blocked write) keeps its due time, so a broker that
// holds publishers back is measured from when each message was due. The
// timer's lateness is recorded in late.
func (p *publisher) runPaced(stop <-chan struct{}) error {
	start := p.start
	step := int64(p.interval)
	t := time.NewTimer(time.Duration(start - p.nowNs()))
	defer t.Stop()
	// When the publisher last went to sleep: until its loop first runs,
	// since schedule.
	slept := start - int64(p.phase)
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		woke := p.nowNs()
		if next := start + int64(p.sent.Load())*step; next > slept && p.measuring != nil && p.measuring.Load() {
			p.late.Record(woke - next)
		}
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			sent := int64(p.sent.Load())
			now := p.nowNs()
			due := p.dueBy(now) - sent
			if due <= 0 {
				slept = now
				t.Reset(time.Duration(start + sent*step - now))
				break
			}
			n := p.awaitRoom(stop)
			if n == 0 {
				return nil
			}
			first := start + sent*step
			if err := p.send(int(min(int64(n), due)), first, step, stampFloor(first, slept, woke)); err != nil {
				return err
			}
		}
	}
}

// stampFloor is the earliest stamp of a batch of paced messages, the
// first due at first, sent after a sleep from slept to woke: a message
// due after the publisher went to sleep was late by the timer at most
// until it woke; one due before (the publisher was busy or held back by
// the broker) keeps its due time.
func stampFloor(first, slept, woke int64) int64 {
	if first > slept {
		return woke
	}
	return 0
}

// readAcks counts PUBACKs (which must come in publish order) until the
// connection fails or closes. The acknowledgements read from one buffer
// count as received when the buffer was filled.
func (p *publisher) readAcks(progress func()) error {
	var n uint64
	var now int64
	for {
		h, body, ok, err := p.c.buffered()
		if err != nil {
			return err
		}
		if !ok {
			if n > 0 {
				p.acked.Add(n)
				n = 0
				p.signal()
				progress()
			}
			if err := p.c.fill(); err != nil {
				return err
			}
			now = p.nowNs()
			continue
		}
		if err := p.ack(h, body, p.acked.Load()+n, now); err != nil {
			return err
		}
		n++
	}
}

// ack checks the PUBACK of message seq, received at now, and records its
// latency when measuring.
func (p *publisher) ack(h packet.FixedHeader, body []byte, seq uint64, now int64) error {
	if h.Type != packet.PUBACK {
		return fmt.Errorf("publisher %d: unexpected %v", p.id, h.Type)
	}
	var a packet.Ack
	if err := packet.DecodeAck(h, body, version, &a); err != nil {
		return fmt.Errorf("publisher %d: PUBACK: %w", p.id, err)
	}
	if want := packetID(seq); a.PacketID != want {
		return fmt.Errorf("publisher %d: PUBACK %d out of order (want %d)", p.id, a.PacketID, want)
	}
	if p.sentAt != nil && p.measuring.Load() {
		p.acks.Record(now - p.sentAt[seq%uint64(len(p.sentAt))].Load())
	}
	return nil
}
