package broker_test

// Durability: an in-process broker on a real bbolt store (package store)
// in t.TempDir(), restarted the way a node restarts: Shutdown, store
// Close, then a new Server on store.Open of the same file, SetPersister and
// Restore before Serve. Each kind of durable state is checked with an
// MQTT 5 and an MQTT 3.1.1 client; faults come from Persister wrappers
// around the real store.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/broker/store"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ---- a restartable node ----

// durNode is a broker on a store file that the test stops and starts
// again, as a node restarts on its data directory.
type durNode struct {
	t    *testing.T
	path string
	opts broker.Options
	// wrap, when set, puts a Persister between the broker and the store
	// (fault injection); it is called at every start.
	wrap func(*store.Store) broker.Persister

	srv    *broker.Server
	st     *store.Store
	addr   string
	served chan error
}

// newDurNode starts a node on a new store file; t.Cleanup stops it.
func newDurNode(t *testing.T, opts broker.Options, wrap func(*store.Store) broker.Persister) *durNode {
	t.Helper()
	n := &durNode{t: t, path: filepath.Join(t.TempDir(), "gantry.db"), opts: opts, wrap: wrap}
	n.start()
	t.Cleanup(n.stop)
	return n
}

// start opens the store, restores the broker's state from it and serves
// a new listener (n.addr changes).
func (n *durNode) start() {
	t := n.t
	t.Helper()
	st, err := store.Open(n.path, store.Options{})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	srv, err := broker.New(n.opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	var p broker.Persister = st
	if n.wrap != nil {
		p = n.wrap(st)
	}
	srv.SetPersister(p)
	if err := srv.Restore(); err != nil {
		srv.Close()
		st.Close()
		t.Fatalf("Restore: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		st.Close()
		t.Fatal(err)
	}
	n.served = make(chan error, 1)
	go func() { n.served <- srv.Serve(l, anonymousTCP) }()
	n.srv, n.st, n.addr = srv, st, l.Addr().String()
}

// stop shuts the broker down, then closes the store (which commits what
// the broker queued while shutting down). Idempotent.
func (n *durNode) stop() {
	t := n.t
	t.Helper()
	if n.srv == nil {
		return
	}
	srv, st := n.srv, n.st
	n.srv, n.st = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-n.served; !errors.Is(err, broker.ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("store Close: %v", err)
	}
}

func (n *durNode) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}

// state reads the store file while the node is down.
func (n *durNode) state() *broker.PersistedState {
	t := n.t
	t.Helper()
	if n.srv != nil {
		t.Fatal("state: the node is running")
	}
	st, err := store.Open(n.path, store.Options{})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	defer st.Close()
	ps, err := st.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return ps
}

// durState is a loaded store state.
type durState broker.PersistedState

// session returns the stored session of id, or nil.
func (ps *durState) session(id string) *broker.PersistedSession {
	for i := range ps.Sessions {
		if ps.Sessions[i].ClientID == id {
			return &ps.Sessions[i]
		}
	}
	return nil
}

// connections waits until the node serves want client connections (a
// connection closed by the client has been detached from its session
// once it is no longer counted).
func (n *durNode) connections(want int64) {
	n.t.Helper()
	eventually(n.t, waitTimeout, func() error {
		if got := n.srv.Stats().Connections.Load(); got != want {
			return fmt.Errorf("%d connections, want %d", got, want)
		}
		return nil
	})
}

// drained waits until no session has a message queued or in flight.
func (n *durNode) drained() {
	n.t.Helper()
	eventually(n.t, waitTimeout, func() error {
		if q, f := n.srv.QueueCounts(); q+f != 0 {
			return fmt.Errorf("%d messages queued, %d in flight", q, f)
		}
		return nil
	})
}

// ---- clients of both protocol versions ----

// durMsg is a received application message.
type durMsg struct {
	topic, payload string
	qos            byte
	retain         bool
}

// durClient is a real MQTT client (paho.golang for v5, paho.mqtt.golang
// for v3.1.1) seen through what the restart tests need.
type durClient interface {
	present() bool // CONNACK Session Present
	subscribe(t testing.TB, filter string, qos byte)
	publish(t testing.TB, topic string, qos byte, retain bool, payload string) // waits for the handshake
	next(t testing.TB) durMsg
	none(t testing.TB) // nothing arrives during quietPeriod
	close()            // normal DISCONNECT
}

type durV5 struct{ *v5Client }

func (c durV5) present() bool                            { return c.connack.SessionPresent }
func (c durV5) subscribe(t testing.TB, f string, q byte) { c.sub(t, f, q) }
func (c durV5) publish(t testing.TB, topic string, qos byte, retain bool, payload string) {
	t.Helper()
	c.pub(t, &paho.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(payload)})
}
func (c durV5) next(t testing.TB) durMsg {
	t.Helper()
	m := recv(t, c.msgs, "a message")
	return durMsg{m.Topic, string(m.Payload), m.QoS, m.Retain}
}
func (c durV5) none(t testing.TB) { t.Helper(); noRecv(t, c.msgs, "message") }
func (c durV5) close()            { c.v5Client.close() }

type durV3 struct{ *v3Client }

func (c durV3) present() bool                            { return c.token.SessionPresent() }
func (c durV3) subscribe(t testing.TB, f string, q byte) { c.sub(t, f, q) }
func (c durV3) publish(t testing.TB, topic string, qos byte, retain bool, payload string) {
	t.Helper()
	c.pub(t, topic, qos, retain, payload)
}
func (c durV3) next(t testing.TB) durMsg {
	t.Helper()
	m := recv(t, c.msgs, "a message")
	return durMsg{m.Topic(), string(m.Payload()), m.Qos(), m.Retained()}
}
func (c durV3) none(t testing.TB) {
	t.Helper()
	select {
	case m := <-c.msgs: // not printed with %+v: paho's message has fields its goroutines write
		t.Fatalf("unexpected message %s %q QoS %d retain %v", m.Topic(), m.Payload(), m.Qos(), m.Retained())
	case <-time.After(quietPeriod): // bounded wait: proving absence
	}
}
func (c durV3) close() { c.Disconnect(50) }

// durProto is one protocol version of the table tests.
type durProto struct {
	name    string
	version packet.Version
	// persistent connects id to its persistent session (v5: session
	// expiry 3600 s, Clean Start when fresh; v3.1.1: Clean Session 0,
	// so ids must be new to the node on first use).
	persistent func(t *testing.T, addr, id string, fresh bool) durClient
	// clean connects a client whose session ends with its connection.
	clean func(t *testing.T, addr, id string) durClient
}

var durProtos = []durProto{
	{
		name: "v5", version: packet.V5,
		persistent: func(t *testing.T, addr, id string, fresh bool) durClient {
			t.Helper()
			return durV5{connectV5(t, addr, &paho.Connect{ClientID: id, CleanStart: fresh, KeepAlive: 30,
				Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(3600)}})}
		},
		clean: func(t *testing.T, addr, id string) durClient {
			t.Helper()
			return durV5{connectV5(t, addr, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})}
		},
	},
	{
		name: "v3.1.1", version: packet.V311,
		persistent: func(t *testing.T, addr, id string, _ bool) durClient {
			t.Helper()
			return durV3{connectV3(t, addr, id, func(o *mqtt.ClientOptions) { o.SetCleanSession(false) })}
		},
		clean: func(t *testing.T, addr, id string) durClient {
			t.Helper()
			return durV3{connectV3(t, addr, id)}
		},
	},
}

// durRawConnect is a raw CONNECT of a persistent session (v5: expiry
// 3600 s, Clean Start when fresh; v3.1.1: Clean Session 0).
func durRawConnect(v packet.Version, id string, fresh bool) packet.Connect {
	cp := packet.Connect{Version: v, CleanStart: fresh && v == packet.V5, KeepAlive: 60, ClientID: id}
	if v == packet.V5 {
		cp.Props.SessionExpiry = 3600
		cp.Props.Set(packet.PropSessionExpiry)
	}
	return cp
}

// durExpect fails unless m is payload on topic at qos.
func durExpect(t testing.TB, m durMsg, topic, payload string, qos byte) {
	t.Helper()
	if m.topic != topic || m.payload != payload || m.qos != qos {
		t.Fatalf("got %s %q QoS %d, want %s %q QoS %d", m.topic, m.payload, m.qos, topic, payload, qos)
	}
}

// ---- restart tests ----

// A persistent session is present after a restart with its
// subscriptions: a message published after the restart, while the client
// is offline, is queued for it, and one published once it is back
// arrives live, without a new SUBSCRIBE, at the subscribed QoS.
func TestDurableSessionRestored(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			id, topic := "sr-sub-"+p.name, "sr/"+p.name+"/t"
			s := p.persistent(t, n.addr, id, true)
			if s.present() {
				t.Fatal("new session present")
			}
			s.subscribe(t, "sr/"+p.name+"/#", 2)
			s.close()

			n.restart()
			if c := n.srv.SessionCount(); c != 1 {
				t.Fatalf("%d sessions after restart, want 1", c)
			}
			pub := p.clean(t, n.addr, "sr-pub-"+p.name)
			pub.publish(t, topic, 2, false, "while offline")
			s = p.persistent(t, n.addr, id, false)
			if !s.present() {
				t.Fatal("session not present after restart")
			}
			durExpect(t, s.next(t), topic, "while offline", 2)
			pub.publish(t, topic, 2, false, "live")
			durExpect(t, s.next(t), topic, "live", 2)
			s.none(t)
		})
	}
}

// QoS 1 and QoS 2 messages queued for an offline persistent session are
// delivered after a restart, in order, at their QoS; once acknowledged
// they are gone from the store and not delivered again after another
// restart.
func TestDurableQueuedMessages(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			id, prefix := "dq-sub-"+p.name, "dq/"+p.name+"/"
			s := p.persistent(t, n.addr, id, true)
			s.subscribe(t, prefix+"#", 2)
			s.close()
			pub := p.clean(t, n.addr, "dq-pub-"+p.name)
			pub.publish(t, prefix+"1", 1, false, "one")
			pub.publish(t, prefix+"2", 2, false, "two")
			pub.publish(t, prefix+"3", 1, false, "three")

			n.restart()
			s = p.persistent(t, n.addr, id, false)
			if !s.present() {
				t.Fatal("session not present after restart")
			}
			durExpect(t, s.next(t), prefix+"1", "one", 1)
			durExpect(t, s.next(t), prefix+"2", "two", 2)
			durExpect(t, s.next(t), prefix+"3", "three", 1)
			s.none(t)
			n.drained()
			s.close()

			n.stop()
			ss := (*durState)(n.state()).session(id)
			if ss == nil {
				t.Fatal("session not in the store")
			}
			if len(ss.Entries) != 0 {
				t.Fatalf("%d entries stored after every message was acknowledged: %+v", len(ss.Entries), ss.Entries)
			}
			n.start()
			s = p.persistent(t, n.addr, id, false)
			if !s.present() {
				t.Fatal("session not present after the second restart")
			}
			s.none(t)
		})
	}
}

// Messages in flight to a client when the node stops are sent again
// after the restart, on reconnect, with their packet identifiers: a QoS
// 2 PUBLISH with DUP=1, and PUBREL for one whose PUBREC the client had
// sent. Once completed they are not sent again after another restart.
func TestDurableOutboundInflightQoS2(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			id, prefix := "oi2-sub-"+p.name, "oi2/"+p.name+"/"
			c, _ := connectRaw(t, n.addr, durRawConnect(p.version, id, true))
			c.subscribe(1, 0, sub(prefix+"#", 2))
			pub := p.clean(t, n.addr, "oi2-pub-"+p.name)
			pub.publish(t, prefix+"a", 2, false, "a")
			pub.publish(t, prefix+"b", 2, false, "b")
			var ids [2]uint16
			for i, want := range []string{"a", "b"} {
				m := c.expectPublish()
				if string(m.Topic) != prefix+want || m.QoS != 2 || m.Dup {
					t.Fatalf("first delivery: %s QoS %d dup %v", m.Topic, m.QoS, m.Dup)
				}
				ids[i] = m.PacketID
			}
			c.sendPackets(ack(packet.PUBREC, ids[0]))
			if a := c.expectAck(packet.PUBREL); a.PacketID != ids[0] {
				t.Fatalf("PUBREL %d, want %d", a.PacketID, ids[0])
			}

			n.restart()
			c, ca := connectRaw(t, n.addr, durRawConnect(p.version, id, false))
			if !ca.SessionPresent {
				t.Fatal("session not present after restart")
			}
			if a := c.expectAck(packet.PUBREL); a.PacketID != ids[0] {
				t.Fatalf("PUBREL %d after restart, want %d", a.PacketID, ids[0])
			}
			m := c.expectPublish()
			if string(m.Topic) != prefix+"b" || m.QoS != 2 || !m.Dup || m.PacketID != ids[1] {
				t.Fatalf("redelivery: %s QoS %d dup %v id %d, want %sb QoS 2 DUP id %d",
					m.Topic, m.QoS, m.Dup, m.PacketID, prefix, ids[1])
			}
			c.expectSilence()
			c.sendPackets(ack(packet.PUBCOMP, ids[0]), ack(packet.PUBREC, ids[1]))
			if a := c.expectAck(packet.PUBREL); a.PacketID != ids[1] {
				t.Fatalf("PUBREL %d, want %d", a.PacketID, ids[1])
			}
			c.sendPackets(ack(packet.PUBCOMP, ids[1]))
			n.drained()

			n.restart()
			c, ca = connectRaw(t, n.addr, durRawConnect(p.version, id, false))
			if !ca.SessionPresent {
				t.Fatal("session not present after the second restart")
			}
			c.expectSilence()
		})
	}
}

// A QoS 1 message sent to a client that did not acknowledge it before
// the node stopped is sent again after the restart with DUP=1 and its
// packet identifier (MQTT-4.4.0-1, MQTT-3.3.1-1), as it is after a plain
// reconnect (TestOutboundInflightRedelivery).
func TestDurableOutboundInflightQoS1(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			id, prefix := "oi1-sub-"+p.name, "oi1/"+p.name+"/"
			c, _ := connectRaw(t, n.addr, durRawConnect(p.version, id, true))
			c.subscribe(1, 0, sub(prefix+"#", 1))
			pub := p.clean(t, n.addr, "oi1-pub-"+p.name)
			// Two messages: the first identifier is 1 either way, the
			// second one shows whether the identifier was kept.
			pub.publish(t, prefix+"x", 1, false, "x")
			pub.publish(t, prefix+"a", 1, false, "a")
			first := c.expectPublish()
			c.sendPackets(ack(packet.PUBACK, first.PacketID))
			m := c.expectPublish()
			if string(m.Topic) != prefix+"a" || m.QoS != 1 || m.Dup {
				t.Fatalf("first delivery: %s QoS %d dup %v", m.Topic, m.QoS, m.Dup)
			}
			pid := m.PacketID
			n.drainedExcept(1)

			n.restart()
			c, ca := connectRaw(t, n.addr, durRawConnect(p.version, id, false))
			if !ca.SessionPresent {
				t.Fatal("session not present after restart")
			}
			m = c.expectPublish()
			if string(m.Topic) != prefix+"a" || m.QoS != 1 || !m.Dup || m.PacketID != pid {
				t.Fatalf("redelivery after restart: %s QoS %d dup %v id %d, want %sa QoS 1 DUP id %d",
					m.Topic, m.QoS, m.Dup, m.PacketID, prefix, pid)
			}
			c.sendPackets(ack(packet.PUBACK, pid))
			c.expectSilence()
		})
	}
}

// drainedExcept waits until exactly inflight messages are in flight and
// none is queued.
func (n *durNode) drainedExcept(inflight int) {
	n.t.Helper()
	eventually(n.t, waitTimeout, func() error {
		if q, f := n.srv.QueueCounts(); q != 0 || f != inflight {
			return fmt.Errorf("%d messages queued, %d in flight; want 0 and %d", q, f, inflight)
		}
		return nil
	})
}

// An inbound QoS 2 packet identifier survives a restart: the publisher
// reconnects and sends the same PUBLISH with DUP=1, which is acknowledged
// (PUBREC) but not routed a second time; PUBREL then completes it
// (PUBCOMP), and the release is durable too: after another restart the
// identifier starts a new message.
func TestDurableInboundQoS2(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			subID, pubID, topic := "iq-sub-"+p.name, "iq-pub-"+p.name, "iq/"+p.name
			s := p.persistent(t, n.addr, subID, true)
			s.subscribe(t, topic, 2)

			c, _ := connectRaw(t, n.addr, durRawConnect(p.version, pubID, true))
			c.sendPackets(rawPublish(topic, 2, 5, "once"))
			c.expectAck(packet.PUBREC)
			durExpect(t, s.next(t), topic, "once", 2)
			n.drained() // the subscriber's own QoS 2 flow is complete

			n.restart()
			s = p.persistent(t, n.addr, subID, false)
			c, ca := connectRaw(t, n.addr, durRawConnect(p.version, pubID, false))
			if !ca.SessionPresent {
				t.Fatal("publisher's session not present after restart")
			}
			dup := rawPublish(topic, 2, 5, "once")
			dup.Dup = true
			c.sendPackets(dup)
			c.expectAck(packet.PUBREC)
			s.none(t)
			c.sendPackets(ack(packet.PUBREL, 5))
			if a := c.expectAck(packet.PUBCOMP); a.ReasonCode != packet.Success {
				t.Fatalf("PUBCOMP %v, want success", a.ReasonCode)
			}

			n.restart()
			s = p.persistent(t, n.addr, subID, false)
			c, _ = connectRaw(t, n.addr, durRawConnect(p.version, pubID, false))
			c.sendPackets(rawPublish(topic, 2, 5, "again"))
			c.expectAck(packet.PUBREC)
			durExpect(t, s.next(t), topic, "again", 2)
			c.sendPackets(ack(packet.PUBREL, 5))
			c.expectAck(packet.PUBCOMP)
			s.none(t)
		})
	}
}

// Retained messages survive a restart as they were left: set, replaced
// (the newest value), cleared (gone), QoS 0 and QoS 1.
func TestDurableRetained(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			prefix := "rt/" + p.name + "/"
			pub := p.clean(t, n.addr, "rt-pub-"+p.name)
			pub.publish(t, prefix+"set", 1, true, "a")
			pub.publish(t, prefix+"replaced", 1, true, "old")
			pub.publish(t, prefix+"replaced", 1, true, "new")
			pub.publish(t, prefix+"cleared", 1, true, "x")
			pub.publish(t, prefix+"cleared", 1, true, "")
			pub.publish(t, prefix+"zero", 0, true, "qos0")
			// The QoS 0 message has no acknowledgement to wait for: a
			// QoS 1 publish after it is acknowledged once it is stored.
			pub.publish(t, prefix+"set", 1, true, "a")

			n.restart()
			if c := n.srv.RetainedCount(); c != 3 {
				t.Fatalf("%d retained messages after restart, want 3", c)
			}
			s := p.clean(t, n.addr, "rt-sub-"+p.name)
			s.subscribe(t, prefix+"#", 1)
			want := map[string]durMsg{
				prefix + "set":      {prefix + "set", "a", 1, true},
				prefix + "replaced": {prefix + "replaced", "new", 1, true},
				prefix + "zero":     {prefix + "zero", "qos0", 0, true},
			}
			for range len(want) {
				m := s.next(t)
				if w, ok := want[m.topic]; !ok || m != w {
					t.Fatalf("retained %+v, want one of %+v", m, want)
				}
				delete(want, m.topic)
			}
			s.none(t)
		})
	}
}

// willRawConnect is a raw v5 CONNECT with a QoS 1 will on topic, a will
// delay and a session expiry (seconds).
func willRawConnect(id, topic string, delay, expiry uint32) packet.Connect {
	cp := packet.Connect{Version: packet.V5, CleanStart: true, KeepAlive: 60, ClientID: id,
		WillFlag: true, WillQoS: 1, WillTopic: topic, WillPayload: []byte("gone:" + id)}
	cp.WillProps.WillDelay = delay
	cp.WillProps.Set(packet.PropWillDelay)
	cp.Props.SessionExpiry = expiry
	cp.Props.Set(packet.PropSessionExpiry)
	return cp
}

// A will waiting for its delay (MQTT 5) when the node stops is kept: it
// is published after its delay counted from the disconnect, by the
// restarted node; when the delay passed while the node was down it is
// published at once on restart. Either way it is published once, not
// again after a further restart.
func TestDurableWillDelay(t *testing.T) {
	t.Parallel()
	v5 := durProtos[0]
	t.Run("pending across restart", func(t *testing.T) {
		t.Parallel()
		n := newDurNode(t, broker.Options{}, nil)
		w := v5.persistent(t, n.addr, "wd1-watch", true)
		w.subscribe(t, "wd1/#", 1)
		c, _ := connectRaw(t, n.addr, willRawConnect("wd1", "wd1/will", 2, 60))
		gone := time.Now()
		c.nc.Close()
		n.connections(1) // the watcher only: the will's delay runs
		n.restart()
		w = v5.persistent(t, n.addr, "wd1-watch", false)
		durExpect(t, w.next(t), "wd1/will", "gone:wd1", 1)
		if e := time.Since(gone); e < 2*time.Second {
			t.Fatalf("will published %v after the disconnect, want after its 2 s delay", e)
		}
		n.drained() // the watcher acknowledged it
		n.restart()
		w = v5.persistent(t, n.addr, "wd1-watch", false)
		w.none(t)
	})
	for _, tc := range []struct {
		name      string
		connected bool // the client is still connected when the node stops
	}{{"delay passed while down", false}, {"connected at shutdown, delay passed while down", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			w := v5.persistent(t, n.addr, "wd2-watch", true)
			w.subscribe(t, "wd2/#", 1)
			w.close() // offline: the will is queued for it on restart
			c, _ := connectRaw(t, n.addr, willRawConnect("wd2", "wd2/will", 1, 60))
			if !tc.connected {
				c.nc.Close()
				n.connections(0)
			}
			n.stop()
			// The node is down longer than the will delay: time passing
			// is the point, not a condition to wait for.
			time.Sleep(1500 * time.Millisecond)
			n.start()
			w = v5.persistent(t, n.addr, "wd2-watch", false)
			durExpect(t, w.next(t), "wd2/will", "gone:wd2", 1)
			w.none(t)
			n.drained()
			n.restart()
			w = v5.persistent(t, n.addr, "wd2-watch", false)
			w.none(t)
		})
	}
}

// A restored session whose will is then published by its delay timer is
// stored again with the time its client disconnected, so that its expiry
// is still counted from the disconnect after a further restart.
func TestDurableWillDelayKeepsDisconnectTime(t *testing.T) {
	t.Parallel()
	n := newDurNode(t, broker.Options{}, nil)
	w := durProtos[0].persistent(t, n.addr, "wk-watch", true)
	w.subscribe(t, "wk/#", 1)
	c, _ := connectRaw(t, n.addr, willRawConnect("wk", "wk/will", 1, 600))
	c.nc.Close()
	n.connections(1)
	n.stop()
	before := (*durState)(n.state()).session("wk")
	if before == nil || before.DisconnectedAt == 0 || before.Will == nil {
		t.Fatalf("stored session before restart: %+v", before)
	}
	n.start()
	w = durProtos[0].persistent(t, n.addr, "wk-watch", false)
	durExpect(t, w.next(t), "wk/will", "gone:wk", 1)
	n.stop()
	after := (*durState)(n.state()).session("wk")
	if after == nil {
		t.Fatal("session gone from the store")
	}
	if after.Will != nil {
		t.Fatalf("published will still stored: %+v", after.Will)
	}
	if after.DisconnectedAt != before.DisconnectedAt {
		t.Fatalf("DisconnectedAt %d after the will was published, want %d (the disconnect)",
			after.DisconnectedAt, before.DisconnectedAt)
	}
}

// A session whose expiry passed while the node was down is gone after
// the restart, from memory and from the store, and its pending will (MQTT
// 5: delay longer than the expiry) is published. v3.1.1 sessions get an
// expiry from Options.MaxSessionExpiry.
func TestDurableSessionExpiry(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			opts := broker.Options{}
			if p.version == packet.V311 {
				opts.MaxSessionExpiry = 1
			}
			n := newDurNode(t, opts, nil)
			id := "se-" + p.name
			var w durClient
			cp := durRawConnect(p.version, id, true)
			if p.version == packet.V5 {
				w = p.persistent(t, n.addr, "se-watch", true)
				w.subscribe(t, "se/#", 1)
				w.close()
				cp = willRawConnect(id, "se/will", 10, 1)
			}
			c, _ := connectRaw(t, n.addr, cp)
			c.subscribe(1, 0, sub("se/"+p.name, 1))
			c.nc.Close()
			n.connections(0)
			n.stop()
			if ss := (*durState)(n.state()).session(id); ss == nil || ss.Expiry != 1 {
				t.Fatalf("stored session before the restart: %+v, want expiry 1", ss)
			}
			// The node is down for twice the session's expiry: time
			// passing is the point, not a condition to wait for.
			time.Sleep(2 * time.Second)
			n.start()
			want := 0
			if w != nil {
				want = 1 // the watcher
			}
			if c := n.srv.SessionCount(); c != want {
				t.Fatalf("%d sessions after restart, want %d", c, want)
			}
			if w != nil {
				w = p.persistent(t, n.addr, "se-watch", false)
				durExpect(t, w.next(t), "se/will", "gone:"+id, 1)
				w.none(t)
				w.close()
			}
			n.stop()
			if ss := (*durState)(n.state()).session(id); ss != nil {
				t.Fatalf("expired session still stored: %+v", ss)
			}
			n.start()
			if _, ca := connectRaw(t, n.addr, durRawConnect(p.version, id, false)); ca.SessionPresent {
				t.Fatal("expired session present after restart")
			}
		})
	}
}

// A clean session (v5 session expiry 0, v3.1.1 Clean Session 1) leaves
// nothing on disk, and a persistent session that reconnects as a clean
// one is deleted from the store.
func TestDurableCleanSessionLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n := newDurNode(t, broker.Options{}, nil)
			topic := "cs/" + p.name
			c := p.clean(t, n.addr, "cs-"+p.name)
			c.subscribe(t, topic, 2)
			c.publish(t, topic, 1, false, "q1")
			durExpect(t, c.next(t), topic, "q1", 1)
			c.publish(t, topic, 2, false, "q2")
			durExpect(t, c.next(t), topic, "q2", 2)

			// A persistent session, then the same client id as a clean one.
			was := "cs-was-persistent-" + p.name
			s := p.persistent(t, n.addr, was, true)
			s.subscribe(t, topic, 1)
			s.close()
			c.publish(t, topic, 1, false, "queued")
			durExpect(t, c.next(t), topic, "queued", 1)
			if p.version == packet.V5 {
				// Clean Start 0 with expiry 0: the session resumes and ends
				// with this connection.
				s = durV5{connectV5(t, n.addr, &paho.Connect{ClientID: was, CleanStart: false, KeepAlive: 30})}
				durExpect(t, s.next(t), topic, "queued", 1)
			} else {
				s = p.clean(t, n.addr, was)
			}
			n.drained()
			s.close()
			c.close()
			n.connections(0)

			n.stop()
			ps := n.state()
			if len(ps.Sessions) != 0 {
				t.Fatalf("%d sessions stored, want none: %+v", len(ps.Sessions), ps.Sessions)
			}
			if len(ps.Retained) != 0 {
				t.Fatalf("%d retained messages stored, want none", len(ps.Retained))
			}
		})
	}
}

// ---- faults ----

var errInjected = errors.New("injected write failure")

// failingPersister is the real store with a switch that makes the next
// write fail: the next Persist call that carries operations writes
// nothing, and the calls after it up to and including the first one with
// a done callback (the broker's barrier for the publish) fail with it, as
// the calls of one failed bbolt transaction do. With splitBatch, only the
// call with the operations fails (its done, often nil, gets the error)
// and the barrier goes to the store in a later, empty, successful batch:
// what the real store does when its writer takes the queue between the
// two calls.
type failingPersister struct {
	*store.Store
	splitBatch bool

	mu      sync.Mutex
	armed   bool // the next write fails
	failing bool // a write failed; its batch is not finished
	failed  int  // writes failed
}

func (f *failingPersister) failNext() {
	f.mu.Lock()
	f.armed = true
	f.mu.Unlock()
}

func (f *failingPersister) Persist(ops []broker.PersistOp, done func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock() // held while forwarding, so that calls keep their order
	if f.armed && len(ops) > 0 {
		// Without splitBatch, the calls up to the next done share the
		// failed transaction; a call with its own done ends it.
		f.armed, f.failing = false, !f.splitBatch && done == nil
		f.failed++
		f.Store.Persist(nil, failWith(done)) // nothing written; done in order
		return
	}
	if f.failing {
		if done != nil {
			f.failing = false
		}
		f.Store.Persist(nil, failWith(done))
		return
	}
	f.Store.Persist(ops, done)
}

func (f *failingPersister) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func failWith(done func(error)) func(error) {
	if done == nil {
		return nil
	}
	return func(error) { done(errInjected) }
}

// A store write that fails refuses the QoS 1 publish whose message it
// carried: an MQTT 5 publisher gets PUBACK 0x80, an MQTT 3.1.1 publisher
// is disconnected without PUBACK (so that it sends the message again).
// The broker goes on serving: the next publish succeeds, and is delivered
// to the persistent session after a restart.
func TestDurableStoreWriteFailure(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			testStoreWriteFailure(t, p, false)
		})
	}
}

// The same, when the store commits the message in a batch of its own that
// fails and the broker's barrier in a later, empty batch: the publish
// must still be refused.
func TestDurableStoreWriteFailureSplitBatch(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			testStoreWriteFailure(t, p, true)
		})
	}
}

func testStoreWriteFailure(t *testing.T, p durProto, splitBatch bool) {
	var fp *failingPersister
	n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
		fp = &failingPersister{Store: st, splitBatch: splitBatch}
		return fp
	})
	subID, topic := "wf-sub-"+p.name, "wf/"+p.name
	s := p.persistent(t, n.addr, subID, true)
	s.subscribe(t, topic, 1)
	s.close()
	// The subscriber's detach writes its session record: wait until it
	// has, so that the injected failure hits the publish, not that write.
	eventually(t, waitTimeout, func() error {
		if c := n.srv.Stats().Connections.Load(); c != 0 {
			return fmt.Errorf("%d connections still open", c)
		}
		return nil
	})

	cp := packet.Connect{Version: p.version, CleanStart: true, KeepAlive: 60, ClientID: "wf-pub-" + p.name}
	c, _ := connectRaw(t, n.addr, cp)
	fp.failNext()
	c.sendPackets(rawPublish(topic, 1, 1, "refused"))
	if p.version == packet.V5 {
		a := c.expectAck(packet.PUBACK)
		if a.PacketID != 1 || a.ReasonCode != packet.UnspecifiedError {
			t.Fatalf("PUBACK %d %v, want 1 with 0x80 (unspecified error)", a.PacketID, a.ReasonCode)
		}
	} else {
		if d := c.expectClosed(waitTimeout); d != nil {
			t.Fatalf("v3.1.1 publisher got %+v", d)
		}
		c, _ = connectRaw(t, n.addr, cp)
	}
	if got := n.srv.Stats().StoreFailures.Load(); got != 1 {
		t.Fatalf("StoreFailures = %d, want 1", got)
	}
	c.sendPackets(rawPublish(topic, 1, 2, "stored"))
	if a := c.expectAck(packet.PUBACK); a.PacketID != 2 || a.ReasonCode != packet.Success {
		t.Fatalf("PUBACK %d %v, want 2 success", a.PacketID, a.ReasonCode)
	}
	if k := fp.failures(); k != 1 {
		t.Fatalf("%d writes failed, want 1", k)
	}

	n.restart()
	s = p.persistent(t, n.addr, subID, false)
	m := s.next(t)
	if m.payload == "refused" {
		// Allowed only while the broker's memory held it; not after a
		// restart, since the write failed.
		t.Fatalf("the refused message survived the restart")
	}
	durExpect(t, m, topic, "stored", 1)
	s.none(t)
}

// A QoS 2 message whose write to an offline persistent session failed is
// sent again by its sender: a peer node that got no confirmation resends
// the same record of its stream (DeliverBatch again), a client refused
// with 0x80 publishes it again. The session must hold it once: the
// subscriber that comes back gets it exactly once (the full disk of make
// chaos delivered it once per attempt, from the unwritten copy the queue
// kept), and nothing is left of it after a restart.
func TestDurableStoreWriteFailureResend(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		for _, from := range []string{"peer", "client"} {
			t.Run(p.name+"/"+from, func(t *testing.T) {
				t.Parallel()
				var fp *failingPersister
				n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
					fp = &failingPersister{Store: st}
					return fp
				})
				subID, topic := "wr-sub-"+p.name+"-"+from, "wr/"+p.name+"/"+from
				s := p.persistent(t, n.addr, subID, true)
				s.subscribe(t, topic, 2)
				s.close()
				n.connections(0)

				fp.failNext()
				if from == "peer" {
					waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "once", 7)), errInjected)
					waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "once", 7)), nil) // the peer's resend
				} else {
					publishAgainAfterRefusal(t, n, topic, "once")
				}
				if k := fp.failures(); k != 1 {
					t.Fatalf("%d writes failed, want 1", k)
				}
				if got := n.srv.Stats().StoreWithdrawn.Load(); got != 1 {
					t.Fatalf("StoreWithdrawn = %d, want 1", got)
				}

				s = p.persistent(t, n.addr, subID, false)
				durExpect(t, s.next(t), topic, "once", 2)
				s.none(t)
				n.drained()
				s.close()
				n.connections(0)

				// Delivered and acknowledged: nothing is left after a
				// restart either.
				n.restart()
				s = p.persistent(t, n.addr, subID, false)
				s.none(t)
			})
		}
	}
}

// peerMsg is a QoS 2 message from peer node-2, record seq of its stream.
func peerMsg(topic, payload string, seq uint64) *broker.Message {
	return &broker.Message{Topic: topic, Payload: []byte(payload), QoS: 2, Origin: broker.OriginPeer, ClientID: "node-2",
		Record: broker.PeerRecord{Node: "node-2", Boot: 1, Seq: seq}}
}

// deliverPeer routes messages from a peer node as the data plane does;
// the store's answer comes on the channel.
func deliverPeer(t *testing.T, srv *broker.Server, ms ...*broker.Message) <-chan error {
	t.Helper()
	answer := make(chan error, 1)
	if !srv.DeliverBatch(ms, func(err error) { answer <- err }) {
		t.Fatal("DeliverBatch stored nothing for a persistent session")
	}
	return answer
}

// waitAnswer waits for DeliverBatch's answer, which must match want.
func waitAnswer(t *testing.T, answer <-chan error, want error) {
	t.Helper()
	select {
	case err := <-answer:
		if !errors.Is(err, want) {
			t.Fatalf("DeliverBatch answered %v, want %v", err, want)
		}
	case <-time.After(waitTimeout):
		t.Fatal("DeliverBatch did not answer")
	}
}

// newFullDiskNode is a durable node whose store is a fullDiskPersister.
func newFullDiskNode(t *testing.T) (*durNode, *fullDiskPersister) {
	var fp *fullDiskPersister
	n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
		fp = &fullDiskPersister{Store: st}
		return fp
	})
	return n, fp
}

// fullDiskPersister is the real store behind two switches: while holding,
// calls wait (in order); while full, every call writes nothing and its
// done gets errInjected, as on a full disk.
type fullDiskPersister struct {
	*store.Store

	mu            sync.Mutex // guards the fields below; held while forwarding, so that calls keep their order
	holding, full bool
	held          []heldCall
}

func (f *fullDiskPersister) Persist(ops []broker.PersistOp, done func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holding {
		f.held = append(f.held, heldCall{append([]broker.PersistOp(nil), ops...), done})
		return
	}
	f.forward(ops, done)
}

func (f *fullDiskPersister) forward(ops []broker.PersistOp, done func(error)) {
	if f.full {
		f.Store.Persist(nil, failWith(done))
		return
	}
	f.Store.Persist(ops, done)
}

// set switches; the calls held so far go on once holding is off.
func (f *fullDiskPersister) set(holding, full bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding, f.full = holding, full
	if !holding {
		for _, c := range f.held {
			f.forward(c.ops, c.done)
		}
		f.held = nil
	}
}

// A peer's message whose writes failed reaches, when the peer resends it,
// only the sessions that took their delivery back: not a connected
// persistent subscriber that was sent it before its write failed, nor a
// connected subscriber without a session to store, nor anyone for a
// message of the same batch that failed only because the other did (the
// data plane confirms a frame as a whole, and the peer resends it
// whole). The offline persistent subscriber gets it once, on its return.
func TestDurableStoreWriteFailurePeerResendOnlyWhereOwed(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n, fp := newFullDiskNode(t)
			topic, other := "wo/"+p.name+"/t", "wo/"+p.name+"/other"
			offID := "wo-off-" + p.name
			off := p.persistent(t, n.addr, offID, true)
			off.subscribe(t, topic, 2)
			off.close()
			n.connections(0)
			online := p.persistent(t, n.addr, "wo-on-"+p.name, true)
			online.subscribe(t, topic, 2)
			clean := p.clean(t, n.addr, "wo-clean-"+p.name)
			clean.subscribe(t, topic, 2)
			clean.subscribe(t, other, 2)

			// The writes wait while the connected subscribers are sent the
			// messages, then fail: the disk is full.
			fp.set(true, false)
			answer := deliverPeer(t, n.srv, peerMsg(topic, "m1", 1), peerMsg(other, "m2", 2))
			durExpect(t, online.next(t), topic, "m1", 2)
			seen := map[string]bool{}
			for range 2 {
				seen[clean.next(t).payload] = true
			}
			if !seen["m1"] || !seen["m2"] {
				t.Fatalf("the clean subscriber got %v, want m1 and m2", seen)
			}
			fp.set(false, true)
			waitAnswer(t, answer, errInjected)
			if got := n.srv.Stats().StoreWithdrawn.Load(); got != 1 {
				t.Fatalf("StoreWithdrawn = %d, want 1 (the offline session's; the online one was sent it)", got)
			}

			// Room again; the peer resends the frame.
			fp.set(false, false)
			waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "m1", 1), peerMsg(other, "m2", 2)), nil)
			online.none(t)
			clean.none(t)
			off = p.persistent(t, n.addr, offID, false)
			durExpect(t, off.next(t), topic, "m1", 2)
			off.none(t)

			// A new message with the same content is not a resend.
			waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "m1", 3)), nil)
			durExpect(t, online.next(t), topic, "m1", 2)
			durExpect(t, clean.next(t), topic, "m1", 2)
			durExpect(t, off.next(t), topic, "m1", 2)
		})
	}
}

// A peer's message written while an earlier one of the same peer, whose
// write failed, waits for its resend in an offline session is taken back
// too: queued, it stood ahead of the earlier one's resend, and the
// subscriber got the peer's messages out of order (make chaos, the full
// disk: a write fails, the next fits once the failed one was cut off).
func TestDurableStoreWriteFailurePeerOrderKept(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			n, fp := newFullDiskNode(t)
			topic := "wk/" + p.name + "/t"
			offID := "wk-off-" + p.name
			off := p.persistent(t, n.addr, offID, true)
			off.subscribe(t, topic, 2)
			off.close()
			n.connections(0)

			fp.set(false, true)
			waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "m1", 1)), errInjected)
			fp.set(false, false) // m2's write succeeds: behind m1, it is refused all the same
			if err := <-deliverPeer(t, n.srv, peerMsg(topic, "m2", 2)); err == nil {
				t.Fatal("m2 was stored ahead of m1, which the session took back")
			}
			// The peer resends both, in order.
			waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "m1", 1), peerMsg(topic, "m2", 2)), nil)
			waitAnswer(t, deliverPeer(t, n.srv, peerMsg(topic, "m3", 3)), nil)
			off = p.persistent(t, n.addr, offID, false)
			for _, want := range []string{"m1", "m2", "m3"} {
				durExpect(t, off.next(t), topic, want, 2)
			}
			off.none(t)
		})
	}
}

// publishAgainAfterRefusal publishes payload at QoS 2 from an MQTT 5
// client, which the failed write refuses (PUBREC 0x80), then again as the
// client does after a refusal, which succeeds.
func publishAgainAfterRefusal(t *testing.T, n *durNode, topic, payload string) {
	t.Helper()
	c, _ := connectRaw(t, n.addr, packet.Connect{Version: packet.V5, CleanStart: true, KeepAlive: 60, ClientID: "wr-pub-" + topic})
	c.sendPackets(rawPublish(topic, 2, 1, payload))
	if a := c.expectAck(packet.PUBREC); a.PacketID != 1 || a.ReasonCode != packet.UnspecifiedError {
		t.Fatalf("PUBREC %d %v, want 1 with 0x80 (unspecified error)", a.PacketID, a.ReasonCode)
	}
	c.sendPackets(rawPublish(topic, 2, 2, payload))
	if a := c.expectAck(packet.PUBREC); a.PacketID != 2 || a.ReasonCode != packet.Success {
		t.Fatalf("PUBREC %d %v, want 2 success", a.PacketID, a.ReasonCode)
	}
	c.sendPackets(ack(packet.PUBREL, 2))
	c.expectAck(packet.PUBCOMP)
	c.nc.Close()
}

// A peer's message for a shared subscription whose member could not
// store it reaches, when the peer resends it, that member: not the next
// one in the group's round robin (which the resend would otherwise pick,
// and which does not hold it either), so the group gets it exactly once.
func TestDurableStoreWriteFailurePeerResendShared(t *testing.T) {
	t.Parallel()
	n, fp := newFullDiskNode(t)
	const topic, filter = "ws/t", "$share/g/ws/t"
	members := []string{"ws-1", "ws-2"}
	for _, id := range members {
		c := durProtos[0].persistent(t, n.addr, id, true)
		c.subscribe(t, filter, 2)
		c.close()
	}
	n.connections(0)
	shared := func() *broker.Message {
		m := peerMsg(topic, "m1", 1)
		m.PeerGroups = []string{filter} // the publisher's node chose this node for the group
		return m
	}
	fp.set(false, true)
	waitAnswer(t, deliverPeer(t, n.srv, shared()), errInjected)
	fp.set(false, false)
	waitAnswer(t, deliverPeer(t, n.srv, shared()), nil)
	got := 0
	for _, id := range members {
		c := durProtos[0].persistent(t, n.addr, id, false)
		c.(durV5).drain(t, func(m durMsg) {
			durExpect(t, m, topic, "m1", 2)
			got++
		})
	}
	if got != 1 {
		t.Fatalf("the group got m1 %d times, want once", got)
	}
}

// drain passes every message that arrives until none does for
// quietPeriod.
func (c durV5) drain(t testing.TB, f func(durMsg)) {
	t.Helper()
	for {
		select {
		case m := <-c.msgs:
			f(durMsg{m.Topic, string(m.Payload), m.QoS, m.Retain})
		case <-time.After(quietPeriod): // bounded wait: proving absence
			return
		}
	}
}

// A SUBSCRIBE whose session write fails is refused (SUBACK 0x80): a
// client that has a successful SUBACK keeps the subscription across a
// crash.
func TestDurableStoreWriteFailureSubscribe(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var fp *failingPersister
			n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
				fp = &failingPersister{Store: st}
				return fp
			})
			c, _ := connectRaw(t, n.addr, durRawConnect(p.version, "wfs-"+p.name, true))
			fp.failNext()
			sa := c.subscribe(1, 0, sub("wfs/t", 1))
			if len(sa.ReasonCodes) != 1 || sa.ReasonCodes[0] != packet.UnspecifiedError {
				t.Fatalf("SUBACK %v after a failed write, want [0x80]", sa.ReasonCodes)
			}
		})
	}
}

// holdingPersister is the real store with writes held back until
// release: Persist only queues the call while holding.
type holdingPersister struct {
	*store.Store

	mu      sync.Mutex
	holding bool
	held    []heldCall
}

type heldCall struct {
	ops  []broker.PersistOp
	done func(error)
}

func (h *holdingPersister) Persist(ops []broker.PersistOp, done func(error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding {
		h.held = append(h.held, heldCall{append([]broker.PersistOp(nil), ops...), done})
		return
	}
	h.Store.Persist(ops, done)
}

func (h *holdingPersister) hold() {
	h.mu.Lock()
	h.holding = true
	h.mu.Unlock()
}

// release hands the held calls to the store, in order.
func (h *holdingPersister) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holding = false
	for _, c := range h.held {
		h.Store.Persist(c.ops, c.done)
	}
	h.held = nil
}

func (h *holdingPersister) heldCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// A QoS 1/2 publish that must be stored (for a persistent session, or
// retained) is acknowledged only once the store has made it durable:
// while the write is held back no PUBACK/PUBREC comes; once released it
// does. A publish that needs no store is acknowledged at once.
func TestDurableAckWaitsForStore(t *testing.T) {
	t.Parallel()
	for _, p := range durProtos {
		for _, tc := range []struct {
			name   string
			topic  string
			qos    byte
			retain bool
			waits  bool
		}{
			{"QoS 1 to a persistent session", "aw/s/1", 1, false, true},
			{"QoS 2 to a persistent session", "aw/s/2", 2, false, true},
			{"QoS 1 retained", "aw/r", 1, true, true},
			{"QoS 1 to no one", "aw/none", 1, false, false},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var hp *holdingPersister
				n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
					hp = &holdingPersister{Store: st}
					return hp
				})
				subID := "aw-sub-" + p.name
				s := p.persistent(t, n.addr, subID, true)
				s.subscribe(t, "aw/s/#", 2)
				s.close()
				n.connections(0)

				c, _ := connectRaw(t, n.addr, packet.Connect{Version: p.version, CleanStart: true, KeepAlive: 60, ClientID: "aw-pub"})
				hp.hold()
				pub := rawPublish(tc.topic, tc.qos, 9, "safe")
				pub.Retain = tc.retain
				c.sendPackets(pub)
				want := packet.PUBACK
				if tc.qos == 2 {
					want = packet.PUBREC
				}
				if !tc.waits {
					c.expectAck(want)
					if k := hp.heldCalls(); k != 0 {
						t.Fatalf("%d store calls for a message nobody keeps", k)
					}
					return
				}
				c.expectSilence() // the write is held: no acknowledgement
				if hp.heldCalls() == 0 {
					t.Fatal("nothing reached the persister")
				}
				hp.release()
				if a := c.expectAck(want); a.PacketID != 9 || a.ReasonCode != packet.Success {
					t.Fatalf("%v %d %v, want id 9 success", a.Type, a.PacketID, a.ReasonCode)
				}
				if tc.qos == 2 {
					c.sendPackets(ack(packet.PUBREL, 9))
					c.expectAck(packet.PUBCOMP)
				}

				// What was acknowledged is on disk.
				n.restart()
				if tc.retain {
					if k := n.srv.RetainedCount(); k != 1 {
						t.Fatalf("%d retained messages after restart, want 1", k)
					}
					return
				}
				s = p.persistent(t, n.addr, subID, false)
				durExpect(t, s.next(t), tc.topic, "safe", tc.qos)
			})
		}
	}
}

// countingPersister is the real store that counts Persist calls once
// counting is on.
type countingPersister struct {
	*store.Store
	counting atomic.Bool
	calls    atomic.Int64
}

func (c *countingPersister) Persist(ops []broker.PersistOp, done func(error)) {
	if c.counting.Load() {
		c.calls.Add(1)
	}
	c.Store.Persist(ops, done)
}

// Shutdown stops every session timer: no will and no session expiry of
// the stopped server changes its state, or calls its persister, after
// Shutdown returned (the node closes the store right after it).
func TestDurableNoTimerAfterShutdown(t *testing.T) {
	t.Parallel()
	var cp *countingPersister
	n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
		cp = &countingPersister{Store: st}
		return cp
	})
	connectRaw(t, n.addr, willRawConnect("ts", "ts/will", 1, 1))
	srv, p := n.srv, cp
	n.stop()
	p.counting.Store(true)
	before := srv.SessionCount()
	// Past the will delay and the session expiry: time passing is the
	// point, not a condition to wait for.
	time.Sleep(1500 * time.Millisecond)
	if after, calls := srv.SessionCount(), p.calls.Load(); after != before || calls != 0 {
		t.Fatalf("after Shutdown: sessions %d -> %d, %d Persist calls; want no change", before, after, calls)
	}
}

// The broker's statistics under $SYS/broker/ are retained in memory but
// never written to the store: a restart does not bring them back, other
// retained messages survive it.
func TestDurableStatisticsNotStored(t *testing.T) {
	t.Parallel()
	n := newDurNode(t, broker.Options{}, nil)
	c := n.srv.NewClient("$sys-test", broker.OriginBroker, nil)
	for i := range 3 {
		c.Publish("$SYS/broker/uptime", []byte(fmt.Sprint(i, " seconds")), 0, true)
	}
	c.Publish("plant/kept", []byte("yes"), 1, true)
	if m, ok := n.srv.Retained("$SYS/broker/uptime"); !ok || string(m.Payload) != "2 seconds" {
		t.Fatalf("retained uptime in memory: %v %v", m, ok)
	}
	c.Close()
	n.stop()
	n.start()
	if _, ok := n.srv.Retained("$SYS/broker/uptime"); ok {
		t.Error("$SYS/broker/uptime came back from the store")
	}
	if m, ok := n.srv.Retained("plant/kept"); !ok || string(m.Payload) != "yes" {
		t.Errorf("plant/kept after the restart: %v %v", m, ok)
	}
}
