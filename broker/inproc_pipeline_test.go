package broker_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/broker/store"
)

// An in-process QoS 1 publish returns when a network publisher would get
// its PUBACK: once what its routing stored (here: the offline queue of a
// persistent session) is durable. While the write is held back the call
// does not return; once released it does, and the message survives a
// restart. A publish that needs no store returns at once.
func TestInprocPublishWaitsForStore(t *testing.T) {
	t.Parallel()
	var hp *holdingPersister
	n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
		hp = &holdingPersister{Store: st}
		return hp
	})
	p := durProtos[0]
	s := p.persistent(t, n.addr, "ipw-sub", true)
	s.subscribe(t, "ipw/s/#", 1)
	s.close()
	n.connections(0)

	c := n.srv.NewClient("ipw-go", broker.OriginConnector, nil)
	hp.hold()
	if err := c.Publish("ipw/none", []byte("x"), 1, false); err != nil {
		t.Fatalf("publish to no one: %v", err)
	}
	if k := hp.heldCalls(); k != 0 {
		t.Fatalf("%d store calls for a message nobody keeps", k)
	}
	done := make(chan error, 1)
	go func() { done <- c.Publish("ipw/s/1", []byte("safe"), 1, false) }()
	select {
	case err := <-done:
		t.Fatalf("Publish returned (%v) while its write was held back", err)
	case <-time.After(quietPeriod): // bounded wait: proving it does not return
	}
	if hp.heldCalls() == 0 {
		t.Fatal("nothing reached the persister")
	}
	hp.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Publish after the write: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Publish did not return after the write was released")
	}
	c.Close()

	n.restart()
	s = p.persistent(t, n.addr, "ipw-sub", false)
	durExpect(t, s.next(t), "ipw/s/1", "safe", 1)
}

// An in-process QoS 1 publish whose store write fails is refused with
// 0x80, as a network publisher's PUBACK would be, and counted; the next
// one succeeds, and only that one is on disk after a restart.
func TestInprocPublishStoreFailure(t *testing.T) {
	t.Parallel()
	var fp *failingPersister
	n := newDurNode(t, broker.Options{}, func(st *store.Store) broker.Persister {
		fp = &failingPersister{Store: st}
		return fp
	})
	p := durProtos[0]
	s := p.persistent(t, n.addr, "ipf-sub", true)
	s.subscribe(t, "ipf/#", 1)
	s.close()
	n.connections(0)

	c := n.srv.NewClient("ipf-go", broker.OriginLoT, nil)
	fp.failNext()
	if err := c.Publish("ipf/x", []byte("refused"), 1, false); !errors.Is(err, packet.UnspecifiedError) {
		t.Fatalf("Publish with a failed write returned %v, want 0x80 (unspecified error)", err)
	}
	if got := n.srv.Stats().StoreFailures.Load(); got != 1 {
		t.Fatalf("StoreFailures = %d, want 1", got)
	}
	if err := c.Publish("ipf/x", []byte("stored"), 1, false); err != nil {
		t.Fatalf("Publish after the failure: %v", err)
	}
	c.Close()

	n.restart()
	s = p.persistent(t, n.addr, "ipf-sub", false)
	durExpect(t, s.next(t), "ipf/x", "stored", 1)
	s.none(t)
}

// An in-process publisher is paused like a network one while a connected
// subscriber's queue is full, instead of the broker dropping its QoS 1
// messages: every message arrives, in order, none is dropped.
func TestInprocPublishPausesForCongestedSubscriber(t *testing.T) {
	t.Parallel()
	const queue, total = 4, 40
	srv := startServer(t, broker.Options{MaxQueuedMessages: queue})
	cp := v5Connect("ipbp-sub")
	cp.Props.ReceiveMaximum = 1
	cp.Props.Set(packet.PropReceiveMaximum)
	subc, _ := connectRaw(t, srv.addr, cp)
	subc.subscribe(1, 0, sub("ipbp/#", 1))

	c, _ := inproc(t, srv, "ipbp-go", broker.OriginConnector)
	finished := make(chan error, 1)
	go func() {
		for i := 1; i <= total; i++ {
			if err := c.Publish("ipbp/x", []byte(fmt.Sprint(i)), 1, false); err != nil {
				finished <- err
				return
			}
		}
		finished <- nil
	}()
	eventually(t, waitTimeout, func() error {
		if srv.Stats().PublisherPauses.Load() == 0 {
			return errors.New("the in-process publisher was not paused")
		}
		return nil
	})
	for want := 1; want <= total; want++ {
		p := subc.expectPublish()
		if got := string(p.Payload); got != fmt.Sprint(want) {
			t.Fatalf("subscriber got message %s, want %d (lost or reordered)", got, want)
		}
		subc.sendPackets(ack(packet.PUBACK, p.PacketID))
	}
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the in-process publisher did not finish")
	}
	if d := srv.Stats().Dropped.Load(); d != 0 {
		t.Fatalf("%d messages dropped; backpressure should have kept them", d)
	}
}
