package broker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
)

// mover is a SessionClaimer that takes every session from another server
// as the cluster does: takeover, subscriptions, then the whole session.
type mover struct{ from, to *broker.Server }

func (m *mover) ClaimSession(info *broker.ConnInfo, clean bool, _ uint32) {
	sub, held := m.from.TakeOver(info.ClientID)
	if !held {
		return
	}
	if clean {
		m.from.ExportSession(info.ClientID, true)
		return
	}
	m.to.ImportSession(&broker.SessionState{ClientID: info.ClientID, Expiry: sub.Expiry, Subscriptions: sub.Subscriptions})
	if st, ok := m.from.ExportSession(info.ClientID, false); ok {
		m.to.ImportSession(st)
	}
}

// A session moves between two servers with its subscriptions, its
// in-flight messages (sent again first, with DUP and their identifiers)
// and its queue, in order, once each; the first server keeps nothing,
// and a connection there is taken over with 0x8E.
func TestSessionHandover(t *testing.T) {
	t.Parallel()
	a := startServer(t, broker.Options{})
	m := &mover{from: a.Server}
	b := startServer(t, broker.Options{}, func(s *broker.Server) { s.SetSessionClaimer(m) })
	m.to = b.Server
	expiry := uint32(3600)
	props := &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	onA := connectV5(t, a.addr, &paho.Connect{ClientID: "x", KeepAlive: 30, Properties: props})
	onA.sub(t, "t/#", 1)
	onA.close()
	for i := range 5 {
		a.PublishMessage(&broker.Message{Topic: "t/1", Payload: fmt.Appendf(nil, "m%d", i), QoS: 1})
	}
	cp := packet.Connect{Version: packet.V5, ClientID: "x"}
	cp.Props.SessionExpiry, cp.Props.ReceiveMaximum = 3600, 2
	cp.Props.Set(packet.PropSessionExpiry)
	cp.Props.Set(packet.PropReceiveMaximum)
	raw, _ := connectRaw(t, a.addr, cp)
	for i := range 2 {
		if p := expectPacket[*packet.Publish](raw); string(p.Payload) != fmt.Sprintf("m%d", i) {
			t.Fatalf("in flight %d: %q", i, p.Payload)
		}
	}
	raw.nc.Close()
	eventually(t, waitTimeout, func() error {
		if ss := a.PersistentSessions(); len(ss) != 1 || ss[0].Connected {
			return fmt.Errorf("a's sessions: %+v", ss)
		}
		return nil
	})
	onB := connectV5(t, b.addr, &paho.Connect{ClientID: "x", KeepAlive: 30, Properties: props})
	if !onB.connack.SessionPresent {
		t.Fatal("session present = 0 on b")
	}
	for i := range 5 {
		p := recv(t, onB.msgs, "a moved message")
		if string(p.Payload) != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d on b: %q", i, p.Payload)
		}
	}
	noRecv(t, onB.msgs, "a message twice")
	if ss := a.PersistentSessions(); len(ss) != 0 {
		t.Fatalf("a keeps %+v", ss)
	}
	b.PublishMessage(&broker.Message{Topic: "t/2", Payload: []byte("after"), QoS: 1})
	if p := recv(t, onB.msgs, "a message after the move"); string(p.Payload) != "after" {
		t.Fatalf("got %q", p.Payload)
	}
	onB.close()
	if ss := b.PersistentSessions(); len(ss) != 1 || len(ss[0].Subscriptions) != 1 {
		t.Fatalf("b's sessions: %+v", ss)
	}
}

// TakeOver closes the client's connection with DISCONNECT 0x8E and
// reports the session while it lasts.
func TestTakeOverClosesConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, broker.Options{})
	expiry := uint32(60)
	c := connectV5(t, s.addr, &paho.Connect{ClientID: "y", KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	c.sub(t, "a/b", 1)
	st, held := s.TakeOver("y")
	if !held || len(st.Subscriptions) != 1 || st.Subscriptions[0].Filter != "a/b" || st.Expiry != 60 {
		t.Fatalf("TakeOver: %+v %v", st, held)
	}
	select {
	case d := <-c.disc:
		if d.ReasonCode != byte(packet.SessionTakenOver) {
			t.Fatalf("DISCONNECT %#x", d.ReasonCode)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no DISCONNECT")
	}
	if _, held := s.ExportSession("y", false); !held {
		t.Fatal("no session to export")
	}
	if _, held := s.TakeOver("y"); held {
		t.Fatal("exported, yet held")
	}
}

// A QoS 2 publish the client sent on the first server (PUBREC received,
// PUBREL not sent yet) completes on the second: its identifier moved
// with the session.
func TestSessionHandoverInboundQoS2(t *testing.T) {
	t.Parallel()
	a := startServer(t, broker.Options{})
	m := &mover{from: a.Server}
	b := startServer(t, broker.Options{}, func(s *broker.Server) { s.SetSessionClaimer(m) })
	m.to = b.Server
	cp := packet.Connect{Version: packet.V5, ClientID: "q2"}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	onA, _ := connectRaw(t, a.addr, cp)
	onA.sendPackets(&packet.Publish{Topic: []byte("q/1"), Payload: []byte("x"), QoS: 2, PacketID: 7})
	if ack := expectPacket[*packet.Ack](onA); ack.Type != packet.PUBREC || ack.PacketID != 7 || ack.ReasonCode.IsError() {
		t.Fatalf("got %+v, want PUBREC 7", ack)
	}
	onA.nc.Close()
	eventually(t, waitTimeout, func() error {
		if ss := a.PersistentSessions(); len(ss) != 1 || ss[0].Connected {
			return fmt.Errorf("a's sessions: %+v", ss)
		}
		return nil
	})
	onB, ack := connectRaw(t, b.addr, cp)
	if !ack.SessionPresent {
		t.Fatal("session present = 0 on b")
	}
	onB.sendPackets(&packet.Ack{Type: packet.PUBREL, PacketID: 7})
	if comp := expectPacket[*packet.Ack](onB); comp.Type != packet.PUBCOMP || comp.PacketID != 7 || comp.ReasonCode != packet.Success {
		t.Fatalf("got %+v, want PUBCOMP 7 success", comp)
	}
}

// A session imported into one that queued some of the same messages
// meanwhile (published while the session moved, they reached both
// nodes: the same Message.Record) holds each once, the imported copy in
// its place; a copy that arrives shortly after the import is dropped
// too. Messages without a record, or with another, stay.
func TestImportDropsQueuedCopies(t *testing.T) {
	t.Parallel()
	b := startServer(t, broker.Options{})
	rec := func(seq uint64) broker.PeerRecord { return broker.PeerRecord{Node: "a", Boot: 7, Seq: seq} }
	msg := func(p string, r broker.PeerRecord) *broker.Message {
		return &broker.Message{Topic: "t/1", Payload: []byte(p), QoS: 1, Origin: broker.OriginPeer, Record: r}
	}
	subs := []broker.SubscriptionRecord{{Filter: "t/#", Options: packet.SubOptions{QoS: 1}}}
	if err := b.ImportSession(&broker.SessionState{ClientID: "x", Expiry: 3600, Subscriptions: subs}); err != nil {
		t.Fatal(err)
	}
	// Queued here since the claim's announcement.
	b.PublishMessage(msg("both-1", rec(1)))
	b.PublishMessage(msg("here-only", broker.PeerRecord{}))
	b.PublishMessage(msg("here-3", rec(3)))
	// The export: what the holder queued, some of it queued here too.
	err := b.ImportSession(&broker.SessionState{ClientID: "x", Expiry: 3600, Subscriptions: subs, Queued: []broker.EntryRecord{
		{Msg: msg("both-1", rec(1)), QoS: 1}, {Msg: msg("both-4", rec(4)), QoS: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	b.PublishMessage(msg("both-4", rec(4))) // this node's copy, late
	b.PublishMessage(msg("new-5", rec(5)))
	expiry := uint32(3600)
	c := connectV5(t, b.addr, &paho.Connect{ClientID: "x", KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	for _, want := range []string{"both-1", "both-4", "here-only", "here-3", "new-5"} {
		if p := recv(t, c.msgs, want); string(p.Payload) != want {
			t.Fatalf("got %q, want %q", p.Payload, want)
		}
	}
	noRecv(t, c.msgs, "a message twice")
	if n := b.Stats().HandoverDuplicates.Load(); n != 2 {
		t.Fatalf("HandoverDuplicates = %d, want 2", n)
	}
}

// A handover names the peer messages its client acknowledged on the old
// server lately (SessionState.Delivered): the new server, which had
// installed the subscriptions and got its own copies of some of them
// (one before the import, one after: a peer's stream to it lagged),
// drops them rather than sending them again without DUP.
func TestHandoverNamesAcknowledged(t *testing.T) {
	t.Parallel()
	a := startServer(t, broker.Options{})
	b := startServer(t, broker.Options{})
	rec := func(seq uint64) broker.PeerRecord { return broker.PeerRecord{Node: "c", Boot: 3, Seq: seq} }
	msg := func(p string, r broker.PeerRecord) *broker.Message {
		return &broker.Message{Topic: "t/1", Payload: []byte(p), QoS: 1, Origin: broker.OriginPeer, Record: r}
	}
	cp := packet.Connect{Version: packet.V5, ClientID: "x"}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	onA, _ := connectRaw(t, a.addr, cp)
	onA.subscribe(1, 0, sub("t/#", 1))
	for i, p := range []string{"acked-1", "acked-2"} {
		a.PublishMessage(msg(p, rec(uint64(i+1))))
		pub := onA.expectPublish()
		if string(pub.Payload) != p {
			t.Fatalf("on a: %q, want %q", pub.Payload, p)
		}
		onA.sendPackets(ack(packet.PUBACK, pub.PacketID))
	}
	onA.sendPackets(&packet.Disconnect{})
	eventually(t, waitTimeout, func() error {
		if ss := a.PersistentSessions(); len(ss) != 1 || ss[0].Connected {
			return fmt.Errorf("a's sessions: %+v", ss)
		}
		return nil
	})
	ls, ok := a.LendSession("x")
	if !ok {
		t.Fatal("no session to lend on a")
	}
	st := ls.State()
	if want := []broker.PeerRecord{rec(1), rec(2)}; !slices.Equal(st.Delivered, want) {
		t.Fatalf("Delivered = %v, want %v", st.Delivered, want)
	}
	if err := b.ImportSession(&broker.SessionState{ClientID: "x", Expiry: 3600, Subscriptions: st.Subscriptions}); err != nil {
		t.Fatal(err)
	}
	b.PublishMessage(msg("acked-1", rec(1))) // b's copy, before the export
	if err := b.ImportSession(st); err != nil {
		t.Fatal(err)
	}
	b.PublishMessage(msg("acked-2", rec(2))) // b's copy, after it
	b.PublishMessage(msg("new-3", rec(3)))
	expiry := uint32(3600)
	c := connectV5(t, b.addr, &paho.Connect{ClientID: "x", KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if p := recv(t, c.msgs, "new-3"); string(p.Payload) != "new-3" {
		t.Fatalf("on b: %q, want new-3 (the others were acknowledged on a)", p.Payload)
	}
	noRecv(t, c.msgs, "a message twice")
	if n := b.Stats().HandoverDuplicates.Load(); n != 2 {
		t.Fatalf("HandoverDuplicates = %d, want 2", n)
	}
}
