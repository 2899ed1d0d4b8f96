package load

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
)

// subscriber receives the messages of one client and checks, per
// publisher, that none is missing or out of order. Its reader goroutine
// owns every field except the atomics.
type subscriber struct {
	id     int
	slot   int // its index among the subscribers of each publisher it hears
	c      *conn
	filter string
	pubs   []*publisher // every publisher of the run, by stamp index
	from   []int        // publishers whose messages it should receive
	run    *run
	// countAcked makes it expect the messages acknowledged rather than
	// those sent (Offline: a message never acknowledged may be missing).
	countAcked bool

	expect    []uint32 // next sequence number per publisher
	credit    []int64  // deliveries to report per publisher at the next settle
	dirty     []uint32 // publishers with credit
	batch     uint64   // messages since the last settle
	received  atomic.Uint64
	reordered uint64
	hist      Histogram
	// Paced runs: stamps reads the socket with the kernel's receive
	// timestamps (nil elsewhere, or where the option is missing), and
	// readLag records how long a message waited in the socket for this
	// goroutine.
	stamps  *stampReader
	readLag Histogram
	rxNs    int64 // when the data of the last read was received, ns since the run's epoch

	rate       float64 // messages/s taken while throttled (0 = unlimited)
	taken      uint64
	start      time.Time
	throttle   *time.Timer
	unthrottle <-chan struct{}
}

func newSubscriber(id, slot int, c *conn, filter string, r *run, from []int, rate float64) *subscriber {
	var stamps *stampReader
	if r.sc.Rate > 0 {
		if stamps = newStampReader(c.nc); stamps != nil {
			c.rw = splitRW{stamps, c.rw}
		}
	}
	return &subscriber{
		stamps: stamps,
		id:     id, slot: slot, c: c, filter: filter, pubs: r.pubs, from: from, run: r,
		expect:     make([]uint32, len(r.pubs)),
		credit:     make([]int64, len(r.pubs)),
		rate:       rate,
		unthrottle: r.unthrottle,
	}
}

// expected returns the deliveries it should have received so far.
func (s *subscriber) expected() uint64 {
	var n uint64
	for _, i := range s.from {
		if s.countAcked {
			n += s.pubs[i].acked.Load()
		} else {
			n += s.pubs[i].sent.Load()
		}
	}
	return n
}

// read handles packets until the connection fails or closes.
func (s *subscriber) read() error {
	s.start = time.Now()
	for {
		h, body, ok, err := s.c.buffered()
		if err != nil {
			return err
		}
		if !ok {
			if err := s.settle(); err != nil {
				return err
			}
			if err := s.c.fill(); err != nil {
				return err
			}
			s.timeRead()
			continue
		}
		if h.Type != packet.PUBLISH {
			return fmt.Errorf("subscriber %d: unexpected %v", s.id, h.Type)
		}
		if err := s.handle(h, body); err != nil {
			return err
		}
	}
}

// handle checks one PUBLISH and queues its PUBACK.
func (s *subscriber) handle(h packet.FixedHeader, body []byte) error {
	var p packet.Publish
	if err := packet.DecodePublish(h, body, version, &p); err != nil {
		return fmt.Errorf("subscriber %d: %w", s.id, err)
	}
	if p.QoS == 1 {
		s.c.queueAck(packet.PUBACK, p.PacketID)
	}
	pub, seq, sentNs, ok := readStamp(p.Payload)
	if !ok || int(pub) >= len(s.expect) {
		return fmt.Errorf("subscriber %d: foreign message on %q", s.id, p.Topic)
	}
	s.batch++
	credit := int64(1)
	switch exp := s.expect[pub]; {
	case seq < exp: // late or duplicated: its credit was given as a gap
		s.reordered++
		credit = 0
	case seq > exp: // a gap: the missing ones are lost unless they come late
		credit += int64(seq - exp)
		s.expect[pub] = seq + 1
	default:
		s.expect[pub] = seq + 1
	}
	if credit > 0 {
		if s.credit[pub] == 0 {
			s.dirty = append(s.dirty, pub)
		}
		s.credit[pub] += credit
	}
	if s.run.measuring.Load() {
		s.hist.Record(s.rxNs - sentNs)
	}
	return nil
}

// timeRead sets rxNs for the packets of the read just made: the kernel's
// receive timestamp where there is one, else now. The messages of one
// read count as received together (the timestamp is the last packet's).
func (s *subscriber) timeRead() {
	now := time.Now()
	s.rxNs = int64(now.Sub(s.run.epoch)) // monotonic
	if s.stamps == nil {
		return
	}
	if k, ok := s.stamps.received(); ok {
		// The timestamp is wall-clock time: only the lag since it is
		// taken from the wall clock, so that a clock adjustment during
		// the run does not move the latencies.
		if lag := now.UnixNano() - k; lag > 0 {
			s.rxNs -= lag
			if s.run.measuring.Load() {
				s.readLag.Record(lag)
			}
		}
	}
}

// splitRW reads from one reader and writes to another writer.
type splitRW struct {
	io.Reader
	io.Writer
}

// settle publishes the counts of the last batch, returns credit to the
// publishers, sends the queued PUBACKs and, when throttled, waits until
// the rate allows more.
func (s *subscriber) settle() error {
	if s.batch > 0 {
		s.received.Add(s.batch)
		s.taken += s.batch
		s.batch = 0
		s.run.poke()
	}
	for _, i := range s.dirty {
		s.pubs[i].recv[s.slot].Add(s.credit[i])
		s.credit[i] = 0
		s.pubs[i].signal()
	}
	s.dirty = s.dirty[:0]
	if err := s.c.flush(); err != nil {
		return err
	}
	if s.rate > 0 {
		s.wait()
	}
	return nil
}

// wait holds the reader back until taken messages are due at rate, or
// until the run unthrottles the subscribers.
func (s *subscriber) wait() {
	due := s.start.Add(time.Duration(float64(s.taken) / s.rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return
	}
	if s.throttle == nil {
		s.throttle = time.NewTimer(d)
	} else {
		s.throttle.Reset(d)
	}
	select {
	case <-s.throttle.C:
	case <-s.unthrottle:
		s.rate = 0
		s.throttle.Stop()
	}
}
