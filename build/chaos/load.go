package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

const (
	topicPrefix = "chaos/"
	// A publish not answered by then counts as a lost connection: longer
	// than the default ReplicationTimeoutMs (5 s), so that a quorum write
	// that times out is seen as the node's 0x97, not as the harness's
	// own timeout.
	publishTimeout = 10 * time.Second
	refusedSwitch  = 3 * time.Second // a node refusing this long: try another
)

// msgID names one message: publisher number and sequence (from 1).
type msgID struct{ pub, seq int }

// payload is what attempt (0, 1, …) of m carries: every PUBLISH of a
// message is told apart, so a delivery names the attempt it came from.
func (m msgID) payload(qos byte, attempt int) []byte {
	return fmt.Appendf(nil, "p=%d s=%d q=%d a=%d", m.pub, m.seq, qos, attempt)
}

func parsePayload(b []byte) (id msgID, attempt int, ok bool) {
	var q int
	if n, err := fmt.Sscanf(string(b), "p=%d s=%d q=%d a=%d", &id.pub, &id.seq, &q, &attempt); err != nil || n != 4 {
		return id, 0, false
	}
	return id, attempt, true
}

// sent is what a publisher did with one message.
type sent struct {
	qos      byte
	first    time.Time // the first attempt
	attempts []attempt // in order
	acked    bool
	ackedAt  time.Time
	ackedOn  string
	refusals map[byte]int // reason code → count
}

// attempt is one PUBLISH of a message.
type attempt struct {
	node    string
	conn    int // the publisher's connection number
	at      time.Time
	refused byte // the reason code of a refusal (≥ 0x80), 0 otherwise
}

// delivery is one message a subscriber received.
type delivery struct {
	id      msgID
	attempt int // which PUBLISH of the message it came from
	at      time.Time
	conn    int // the subscriber's connection number (1, 2, … per reconnect)
}

// history is everything publishers and subscribers saw.
type history struct {
	mu       sync.Mutex // guards the fields below
	sent     map[msgID]*sent
	recv     map[string][]delivery  // subscriber → deliveries in arrival order
	lostSess map[string][]time.Time // subscriber → reconnects that found no session
	restarts map[string][]time.Time // subscriber → restarts of its node, set before the check
	bad      int                    // payloads that did not parse
}

func newHistory() *history {
	return &history{sent: map[msgID]*sent{}, recv: map[string][]delivery{}, lostSess: map[string][]time.Time{},
		restarts: map[string][]time.Time{}}
}

// attempt records a PUBLISH of id and returns its attempt number.
func (h *history) attempt(id msgID, qos byte, node string, conn int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent[id]
	if s == nil {
		s = &sent{qos: qos, first: time.Now(), refusals: map[byte]int{}}
		h.sent[id] = s
	}
	s.attempts = append(s.attempts, attempt{node: node, conn: conn, at: time.Now()})
	return len(s.attempts) - 1
}

func (h *history) ack(id msgID, node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent[id]
	s.acked, s.ackedAt, s.ackedOn = true, time.Now(), node
}

// refused records that attempt a of id was refused with code.
func (h *history) refused(id msgID, a int, code byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent[id]
	s.refusals[code]++
	s.attempts[a].refused = code
}

func (h *history) deliver(sub string, payload []byte, conn int) {
	id, a, ok := parsePayload(payload)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		h.bad++
		return
	}
	h.recv[sub] = append(h.recv[sub], delivery{id: id, attempt: a, at: time.Now(), conn: conn})
}

// missing counts, over every subscriber, the messages acknowledged before
// t that it has not received.
func (h *history) missing(t time.Time, subs []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, sub := range subs {
		got := map[msgID]bool{}
		for _, d := range h.recv[sub] {
			got[d.id] = true
		}
		for id, s := range h.sent {
			if s.acked && s.ackedAt.Before(t) && !got[id] {
				n++
			}
		}
	}
	return n
}

// connectV5 opens an MQTT 5 connection as id; onMsg, when set, gets every
// message in arrival order.
func connectV5(addr, id string, cleanStart bool, expiry uint32, onMsg func(*paho.Publish)) (*paho.Client, bool, error) {
	nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, false, err
	}
	cfg := paho.ClientConfig{Conn: nc, PacketTimeout: publishTimeout}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
		}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: cleanStart, KeepAlive: 10}
	if expiry > 0 {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		nc.Close()
		return nil, false, err
	}
	return c, ca.SessionPresent, nil
}

// hangUp ends a connection without waiting on a node that may be frozen.
func hangUp(c *paho.Client) {
	go c.Disconnect(&paho.Disconnect{})
	select {
	case <-c.Done():
	case <-time.After(time.Second):
	}
}

// publisher sends numbered messages at one QoS, one at a time, each until
// it is acknowledged: it retries on a refusal (0x97 and the others) and,
// on a lost connection, a timeout or a node that keeps refusing, moves to
// the next node.
type publisher struct {
	num   int
	qos   byte
	nodes []*node
	home  int
	pace  time.Duration // pause between two messages
	h     *history
}

func (p *publisher) clientID() string { return fmt.Sprintf("chaos-pub-%d", p.num) }

func (p *publisher) run(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	seq, at, conn := 1, p.home, 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := p.nodes[at%len(p.nodes)]
		cl, _, err := connectV5(n.addr(), p.clientID(), true, 0, nil)
		if err != nil {
			at++
			if sleepOrStop(stop, 200*time.Millisecond) {
				return
			}
			continue
		}
		conn++
		seq = p.session(cl, n, conn, seq, stop)
		hangUp(cl)
		at++
	}
}

// session publishes on one connection until it fails or stop closes, and
// returns the next sequence to send.
func (p *publisher) session(cl *paho.Client, n *node, conn, seq int, stop <-chan struct{}) int {
	var refusedSince time.Time
	topic := fmt.Sprintf("%sp%d", topicPrefix, p.num)
	for {
		select {
		case <-stop:
			return seq
		default:
		}
		id := msgID{p.num, seq}
		a := p.h.attempt(id, p.qos, n.name, conn)
		resp, err := publishOnce(cl, &paho.Publish{Topic: topic, QoS: p.qos, Payload: id.payload(p.qos, a)})
		switch {
		case err == nil && resp != nil && resp.ReasonCode < 0x80:
			p.h.ack(id, n.name)
			seq++
			refusedSince = time.Time{}
			if sleepOrStop(stop, p.pace) {
				return seq
			}
		case resp != nil: // refused: the same message again
			p.h.refused(id, a, resp.ReasonCode)
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			} else if time.Since(refusedSince) > refusedSwitch {
				return seq
			}
			if sleepOrStop(stop, 100*time.Millisecond) {
				return seq
			}
		default: // connection lost or no answer
			return seq
		}
	}
}

// publishOnce publishes and waits for the acknowledgement, publishTimeout
// at most, and no longer than the connection lives (paho's Publish would
// wait out its context after a lost connection).
func publishOnce(cl *paho.Client, pb *paho.Publish) (*paho.PublishResponse, error) {
	type result struct {
		resp *paho.PublishResponse
		err  error
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		resp, err := cl.Publish(ctx, pb)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-cl.Done():
		return nil, errors.New("connection lost")
	}
}

func sleepOrStop(stop <-chan struct{}, d time.Duration) bool {
	select {
	case <-stop:
		return true
	case <-time.After(d):
		return false
	}
}

// subscriber is a persistent session (clean start false after the first
// connection, one hour's expiry) on one node, reconnecting to it after it
// restarts.
type subscriber struct {
	node *node
	name string
	h    *history
	// parked: the subscriber stays offline (its session queues on its
	// node) until unparked; kick wakes it to notice.
	parked atomic.Bool
	kick   chan struct{}
}

// park takes the subscriber offline (on) or lets it reconnect (off).
func (s *subscriber) park(on bool) {
	s.parked.Store(on)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *subscriber) run(stop <-chan struct{}, done *sync.WaitGroup, subscribed chan<- error) {
	defer done.Done()
	first, conn := true, 0
	for {
		conn++
		thisConn := conn
		onMsg := func(p *paho.Publish) { s.h.deliver(s.name, p.Payload, thisConn) }
		cl, present, err := connectV5(s.node.addr(), s.name, first, 3600, onMsg)
		if err == nil && !first && !present {
			s.h.mu.Lock()
			s.h.lostSess[s.name] = append(s.h.lostSess[s.name], time.Now())
			s.h.mu.Unlock()
		}
		if err == nil && (first || !present) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topicPrefix + "#", QoS: 2}}})
			cancel()
			if err != nil {
				hangUp(cl)
			} else if first {
				first = false
				subscribed <- nil
			}
		}
		for err == nil {
			select {
			case <-stop:
				hangUp(cl)
				return
			case <-cl.Done():
				err = errors.New("connection lost")
			case <-s.kick:
				if s.parked.Load() {
					hangUp(cl)
					err = errors.New("parked")
				}
			}
		}
		if sleepOrStop(stop, 200*time.Millisecond) {
			return
		}
		for s.parked.Load() {
			select {
			case <-stop:
				return
			case <-s.kick:
			}
		}
	}
}
