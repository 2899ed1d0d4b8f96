package load

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"gantry/broker/packet"
)

// Sink is the trivial MQTT endpoint the generator is checked against: it
// accepts every CONNECT and SUBSCRIBE, swallows PUBLISH packets and
// acknowledges the QoS 1 ones, with no routing at all. A broker cannot
// take publishes faster than a Sink, so the generator's publish rate into
// a Sink bounds what it can measure.
type Sink struct {
	publishes atomic.Uint64
	mu        sync.Mutex
	ended     *sync.Cond // signalled when active drops to 0
	active    int        // connections being served
}

// Publishes returns the PUBLISH packets swallowed so far.
func (s *Sink) Publishes() uint64 { return s.publishes.Load() }

// Wait waits until every connection accepted so far has ended. Call it
// only while no client is connecting.
func (s *Sink) Wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.active > 0 {
		s.cond().Wait()
	}
}

// cond returns the condition variable; the caller holds s.mu.
func (s *Sink) cond() *sync.Cond {
	if s.ended == nil {
		s.ended = sync.NewCond(&s.mu)
	}
	return s.ended
}

func (s *Sink) done() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		s.cond().Broadcast()
	}
	s.mu.Unlock()
}

// Serve accepts connections on l until it fails (for example when l is
// closed) and serves each on its own goroutine.
func (s *Sink) Serve(l net.Listener) error {
	for {
		nc, err := l.Accept()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		go s.serveConn(nc)
	}
}

// serveConn answers one client until it disconnects.
func (s *Sink) serveConn(nc net.Conn) {
	defer s.done()
	defer nc.Close()
	c := newConn(nc, activeBuffer)
	var n uint64
	for {
		h, body, ok, err := c.buffered()
		if err != nil {
			return
		}
		if !ok {
			s.publishes.Add(n)
			n = 0
			if c.flush() != nil || c.fill() != nil {
				return
			}
			continue
		}
		if h.Type == packet.PUBLISH {
			n++
		}
		if err := c.answer(h, body); err != nil {
			s.publishes.Add(n)
			c.flush()
			return
		}
	}
}

// errDisconnect ends a sink connection on DISCONNECT.
var errDisconnect = fmt.Errorf("sink: client disconnected")

// answer queues the sink's reply to one packet.
func (c *conn) answer(h packet.FixedHeader, body []byte) error {
	switch h.Type {
	case packet.PUBLISH:
		var p packet.Publish
		if err := packet.DecodePublish(h, body, version, &p); err != nil {
			return err
		}
		if p.QoS == 1 {
			c.queueAck(packet.PUBACK, p.PacketID)
		}
	case packet.CONNECT:
		var cp packet.Connect
		if err := packet.DecodeConnect(body, &cp); err != nil {
			return err
		}
		ack := packet.Connack{ReasonCode: packet.Success}
		c.out = ack.Append(c.out, cp.Version)
	case packet.SUBSCRIBE:
		var sp packet.Subscribe
		if err := packet.DecodeSubscribe(h, body, version, &sp); err != nil {
			return err
		}
		ack := packet.Suback{PacketID: sp.PacketID, ReasonCodes: make([]packet.ReasonCode, len(sp.Subscriptions))}
		for i, sub := range sp.Subscriptions {
			ack.ReasonCodes[i] = packet.ReasonCode(sub.Options.QoS)
		}
		c.out = ack.Append(c.out, version)
	case packet.PINGREQ:
		c.out = packet.AppendPingresp(c.out)
	case packet.DISCONNECT:
		return errDisconnect
	default:
		return fmt.Errorf("sink: unexpected %v", h.Type)
	}
	return nil
}
