package broker

import (
	"errors"
	"sync"
	"time"

	"gantry/broker/packet"
	"gantry/broker/topic"
)

// ErrClientClosed is returned by a closed in-process Client.
var ErrClientClosed = errors.New("broker: in-process client closed")

// Client publishes and subscribes from Go, without a socket: LoT and the
// device connectors use it. Messages it publishes carry its Origin.
// Matching messages are handed to the handler, one at a time, on a
// goroutine of the client's own, in the order they were routed.
type Client struct {
	srv     *Server
	sess    *session
	info    ConnInfo
	origin  Origin
	handler func(m *Message)

	wakeCh chan struct{}
	stop   chan struct{}
	once   sync.Once
}

// NewClient registers an in-process client with identifier id (which must
// not be used by a network client) and starts its delivery goroutine.
// handler may be nil for a client that only publishes.
func (s *Server) NewClient(id string, origin Origin, handler func(m *Message)) *Client {
	c := &Client{
		srv:     s,
		info:    ConnInfo{ClientID: id, Listener: "inproc"},
		origin:  origin,
		handler: handler,
		wakeCh:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	sess := newSession(s, id)
	sess.inproc = c
	sess.expiry = 0xFFFFFFFF
	c.sess = sess
	s.mu.Lock()
	if old := s.sessions[id]; old != nil {
		s.discardLocked(old)
	}
	s.sessions[id] = sess
	s.mu.Unlock()
	s.goTracked(c.run)
	return c
}

func (c *Client) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

func (c *Client) run() {
	var batch [64]outgoing
	for {
		select {
		case <-c.wakeCh:
		case <-c.stop:
			return
		case <-c.srv.ctx.Done():
			return
		}
		for {
			c.sess.mu.Lock()
			out := c.sess.take(batch[:0], 1<<30, time.Now().UnixNano())
			for i := range out {
				if out[i].qos > 0 {
					delete(c.sess.inflight, out[i].pid) // delivered in process: complete at once
					out[i].msg.release()                // the inflight entry's reference; the outgoing copy's is held
				}
			}
			c.sess.mu.Unlock()
			if len(out) == 0 {
				break
			}
			for i := range out {
				// A handler may keep the message (LoT caches payloads), so
				// it gets one whose payload is its own, never a pooled one.
				m := out[i].msg.forHandler(out[i].retain)
				out[i].msg.release()
				if c.handler != nil {
					c.handler(m)
				}
			}
			clear(out)
		}
	}
}

// Subscribe adds a subscription; retained messages are delivered as for a
// network client. Neither the Authorizer nor MaxSubscriptionsPerClient
// applies: an in-process client is part of the node (LoT, connectors,
// $SYS), and its users' access is checked where they enter.
func (c *Client) Subscribe(filter string, qos byte) error {
	if c.closed() {
		return ErrClientClosed
	}
	sub := packet.Subscription{Filter: filter, Options: packet.SubOptions{QoS: qos}}
	rc, want, _, err := c.srv.subscribe(c.sess, &c.info, sub, 0)
	if err != nil {
		return err
	}
	if rc.IsError() {
		return rc
	}
	if h := c.srv.subHook; h != nil {
		// Announced at once; nothing to hold back here (no SUBACK).
		h.SubscriptionsAdded([]string{filter}, func() {})
	}
	if want {
		c.srv.sendRetained(c.sess, retainedRequest{filter: filter, qos: qos})
	}
	return nil
}

// Unsubscribe removes a subscription.
func (c *Client) Unsubscribe(filter string) error {
	if rc := c.srv.unsubscribe(c.sess, &c.info, filter); rc.IsError() {
		return rc
	}
	return nil
}

// Publish routes a message through the publish pipeline and returns when
// a network publisher would have its acknowledgement (see
// Server.PublishMessage): for QoS 1/2 once what routing stored is
// durable, and after a pause while a subscriber's queue is full.
func (c *Client) Publish(tp string, payload []byte, qos byte, retain bool) error {
	if qos > 2 {
		return packet.QoSNotSupported
	}
	if err := topic.ValidateName(tp); err != nil {
		return err
	}
	return c.PublishMessage(&Message{Topic: tp, Payload: payload, QoS: qos, Retain: retain})
}

// PublishMessage routes m, stamped with this client's origin and identity.
// m must not be changed afterwards.
func (c *Client) PublishMessage(m *Message) error {
	if c.closed() {
		return ErrClientClosed
	}
	m.Origin = c.origin
	m.ClientID = c.info.ClientID
	return c.srv.PublishMessage(m)
}

func (c *Client) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// Close removes the client and its subscriptions.
func (c *Client) Close() {
	c.once.Do(func() {
		close(c.stop)
		c.srv.mu.Lock()
		c.srv.discardLocked(c.sess)
		c.srv.mu.Unlock()
	})
}
