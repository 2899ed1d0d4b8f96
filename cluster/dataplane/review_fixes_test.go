package dataplane

// Tests from the review of the quorum write (issue 14): each one showed a
// defect the code has since been mended for.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

type chanResolver chan error

func (c chanResolver) Resolve(err error) { c <- err }

// reviewPlane is a Plane named name with fake, connected links to peers (as
// BenchmarkForward builds it) and a one-partition map.
func reviewPlane(t *testing.T, name, dir string, fq int, rep *Replication, peers []string, a partition.Assignment) *Plane {
	t.Helper()
	opts := Options{NodeName: name, Username: "cluster", Broker: nopBroker{}, BestEffort: true, Reliable: true,
		ForwardQueueEntries: fq, DataDir: dir, Replication: rep}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range peers {
		ps, _ := p.out.addPeer(n)
		p.out.setUp(ps, true)
		l := &link{p: p, peer: n, ps: ps, done: make(chan struct{})}
		l.connected.Store(true)
		close(l.done)
		p.links[n] = l
	}
	p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{a}})
	return p
}

func takeFor(p *Plane, name string) (pid uint16, seqs []uint64, payloads []string, reps []*wire.Rep) {
	ps := p.out.peers[name]
	pid, _ = p.out.take(ps, 1<<20, noHead, func(string) bool { return true }, func(seq uint64, msg []byte, _ []string, r *wire.Rep) int {
		seqs = append(seqs, seq)
		if d, err := wire.DecodeMessage(msg); err == nil {
			payloads = append(payloads, string(d.Msg.Payload))
		}
		if r != nil {
			c := *r
			reps = append(reps, &c)
		} else {
			reps = append(reps, nil)
		}
		return len(msg)
	}, nextPID)
	return
}

// TestReviewReplayStallsOnDeadPeer: replayLost paces on backlogOver, which
// counts every peer in o.peers, the lost node itself included (it stays a
// Raft member, so SetPeers keeps its link and its cursor never moves).
// Each replayed record grows that backlog, so a replay of more than
// ForwardQueueEntries/2 records never ends, and runMaps (fills, catch-up
// reports, later replays) is stuck behind it until the lost node returns.
func TestReviewReplayStallsOnDeadPeer(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute, Replay: 5 * time.Minute}
	p := reviewPlane(t, "a", "", 64, rep, []string{"b", "x"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b"}, Epoch: 1})
	defer p.Stop()
	p.links["x"].connected.Store(false) // x is the node that was lost
	now := time.Now().UnixNano()
	for i := range 100 {
		enc := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(fmt.Sprint("m", i)), QoS: 1})
		p.copies.add(0, []copyRec{{id: copyID{origin: "x", boot: 1, seq: uint64(i + 1)}, at: now, epoch: 1, msg: enc}}, nil)
	}
	// b keeps up (its link takes and confirms everything).
	stopB := make(chan struct{})
	defer close(stopB)
	go func() {
		for {
			select {
			case <-stopB:
				return
			case <-time.After(5 * time.Millisecond):
			}
			p.out.mu.Lock()
			ps := p.out.peers["b"]
			p.out.mu.Unlock()
			if pid, _, _, _ := takeFor(p, "b"); pid != 0 {
				p.out.confirm("b", ps, pid, false)
			}
		}
	}()
	done := make(chan struct{})
	go func() { p.replayLost("x", *p.gate.pmap.Load()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("replayLost of 100 records (ForwardQueueEntries 64) has not finished after 5 s: replayed %d, x's backlog %d",
			p.out.head(), p.out.stats(p.out.peers["x"]).Backlog)
	}
}

func TestReviewPublishWithClosedStoreDeadlocks(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", t.TempDir(), 8192, rep, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	p.Stop()
	r := make(chanResolver, 1)
	ret := make(chan error, 1)
	go func() {
		ret <- p.InterceptPublish(&broker.Message{Topic: "t", Payload: []byte("late"), QoS: 1, ClientID: "pub", Origin: broker.OriginClient}, r)
	}()
	select {
	case <-ret:
	case <-time.After(3 * time.Second):
		t.Fatal("InterceptPublish after Stop has not returned in 3 s (self-deadlock on outbox.mu)")
	}
}

func TestReviewResentCopyConfirmedBeforeDurable(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "b", t.TempDir(), 8192, rep, []string{"a", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	held, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	p.store.putCopies(999, nil, nil, 0, func(error) { close(held); <-release })
	<-held
	frame := wire.AppendHeader(nil, "a", 1, frameConn())
	msg := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("m"), QoS: 1, ClientID: "pub"})
	frame = wire.AppendRecordRep(frame, 1, msg, nil, &wire.Rep{Copy: true, Partition: 0, Epoch: 1})
	send := func() (error, chanResolver) {
		r := make(chanResolver, 1)
		err := p.receive(&broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1,
			Payload: p.opts.Signer.Sign(frame)}, r)
		return err, r
	}
	if err, _ := send(); err != broker.ErrDeferred {
		t.Fatalf("first frame: %v, want it deferred until the copy is on disk", err)
	}
	if err, _ := send(); err != broker.ErrDeferred {
		t.Fatalf("the resent frame is answered %v at once, while its copy is not on disk yet", err)
	}
}

// TestStopAnswersWaitingWrites: a publish still waiting for its majority
// when the data plane stops is refused (0x97), not left unanswered.
func TestStopAnswersWaitingWrites(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", t.TempDir(), 8192, rep, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	r := make(chanResolver, 1)
	if err := p.InterceptPublish(&broker.Message{Topic: "t", Payload: []byte("m"), QoS: 1, ClientID: "pub", Origin: broker.OriginClient}, r); err != broker.ErrDeferred {
		t.Fatal(err)
	}
	p.Stop()
	select {
	case err := <-r:
		if err == nil {
			t.Fatal("a write without its majority acknowledged at Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write waiting at Stop is never answered")
	}
}

// TestRefusedWriteLeavesOwnCopy: a QoS 2 write refused at its origin
// (here its timeout), which is one of the partition's copies, leaves the
// origin's copy and QoS 2 index: the publisher's resend (DUP, same packet
// id) is a new publish, not taken for one accepted, and no fill or replay
// brings the refused record back.
func TestRefusedWriteLeavesOwnCopy(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", "", 8192, rep, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	msg := func(dup bool) *broker.Message {
		return &broker.Message{Topic: "t", Payload: []byte("m"), QoS: 2, PacketID: 5, Dup: dup, ClientID: "pub", Origin: broker.OriginClient}
	}
	r := make(chanResolver, 1)
	if err := p.InterceptPublish(msg(false), r); err != broker.ErrDeferred {
		t.Fatalf("publish: %v", err)
	}
	p.gate.sweep(time.Now().Add(2 * time.Minute))
	if err := <-r; err == nil {
		t.Fatal("acknowledged without a majority")
	}
	n := 0
	p.copies.records(0, 0, func(uint64, copyRec) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d copies left of the refused write", n)
	}
	r2 := make(chanResolver, 1)
	if err := p.InterceptPublish(msg(true), r2); err == broker.ErrDuplicate {
		t.Fatal("the resend of a refused QoS 2 publish was taken for one accepted")
	}
}

// failingOnceBroker fails its first delivery's write (a full disk: the
// broker takes the queued copies back) and records the later ones.
type failingOnceBroker struct {
	recordingBroker
	failed atomic.Bool
}

func (b *failingOnceBroker) DeliverBatch(ms []*broker.Message, done func(error)) bool {
	if b.failed.CompareAndSwap(false, true) {
		go done(errors.New("disk full"))
		return true
	}
	return b.recordingBroker.DeliverBatch(ms, done)
}

// TestReplayResentAfterFailedDelivery: a replayed record (another node's,
// re-delivered after its origin left the map) whose delivery failed is
// delivered when its frame comes again: it was remembered as a replay
// delivered, and the resend was dropped as a duplicate and confirmed.
func TestReplayResentAfterFailedDelivery(t *testing.T) {
	br := &failingOnceBroker{}
	p, err := New(Options{NodeName: "n", Username: "cluster", Broker: br, BestEffort: true, Reliable: true,
		ForwardQueueEntries: 8192, Replication: &Replication{Gate: true, Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{{Owner: "a", Replicas: []string{"a", "n"}, Epoch: 1}}})
	frame := func() *broker.Message {
		f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), 0, nil)
		msg := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("replayed"), QoS: 1, ClientID: "pub"})
		f = wire.AppendRecordRep(f, 1, msg, nil, &wire.Rep{Partition: 0, Origin: "x", OriginBoot: 9, OriginSeq: 7})
		time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
		return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
	}
	send := func() error {
		r := make(chanResolver, 1)
		err := p.receive(frame(), r)
		if err == broker.ErrDeferred {
			err = <-r
		}
		return err
	}
	if err := send(); err == nil {
		t.Fatal("the frame whose delivery failed was confirmed")
	}
	// The sender resends once it has the answer; the receiver's rollback
	// of what it took from "a" runs on a goroutine of its own.
	s := p.recv.sender("a")
	for end := time.Now().Add(5 * time.Second); ; {
		s.mu.Lock()
		back := s.lastSeq == 0
		s.mu.Unlock()
		if back {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the receiver did not take back what the failed frame delivered")
		}
		time.Sleep(time.Millisecond)
	}
	reconnect()
	if err := send(); err != nil {
		t.Fatalf("resend: %v", err)
	}
	if got := br.delivered(); len(got) != 1 || got[0] != "replayed" {
		t.Fatalf("delivered %q after the resend, want the replayed record once", got)
	}
}

// TestFrameResentAfterCopyWriteFailedDeliveredOnce: a frame whose
// messages were delivered while its copy could not be written (the
// store's log failed, as on a full disk) is not confirmed, and its resend
// writes the copy again but does not deliver the messages a second time
// (the broker took nothing back: its own writes succeeded).
func TestFrameResentAfterCopyWriteFailedDeliveredOnce(t *testing.T) {
	br := &recordingBroker{}
	p := twoPhasePlane(t, "n", t.TempDir(), br, partition.Assignment{Owner: "a", Replicas: []string{"a", "n"}, Epoch: 1})
	defer p.Stop()
	frame := func(seq uint64, payload string) *broker.Message {
		f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), seq, nil)
		msg := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(payload), QoS: 1, ClientID: "pub"})
		f = wire.AppendRecordRep(f, seq, msg, nil, &wire.Rep{Copy: true, Partition: 0, Epoch: 1})
		time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
		return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
	}
	receiveOK(t, p, frame(1, "m1")) // the log's first segment exists now
	// What m1's frame writes after its answer (what was received) is
	// logged first: otherwise that write may take the injected failure
	// and m2's copy be written (1 run in 300).
	if err := p.store.settle(); err != nil {
		t.Fatal(err)
	}
	p.store.log.failNext.Store(true) // the next write, m2's copy, fails
	r := make(chanResolver, 1)
	err := p.receive(frame(2, "m2"), r)
	if err == broker.ErrDeferred {
		err = <-r
	}
	if err == nil {
		t.Fatal("a frame whose copy could not be written was confirmed")
	}
	s := p.recv.sender("a")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		back := s.lastSeq == 1
		s.mu.Unlock()
		if back {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the receiver did not take back the failed frame")
		}
	}
	reconnect()
	receiveOK(t, p, frame(2, "m2"))
	if got := br.delivered(); fmt.Sprint(got) != "[m1 m2]" {
		t.Fatalf("delivered %q, want m1 and m2 once each", got)
	}
	if got := copiesHeld(p); fmt.Sprint(got) != "[m1 m2]" {
		t.Fatalf("copies %q after the resend, want m1 and m2", got)
	}
}

// TestQoS1NotIndexedAsQoS2: a QoS 1 publish's packet identifier goes
// neither to the copies nor into the QoS 2 index (in memory or on disk):
// only QoS 2 has exactly-once state, and indexing QoS 1 cost every copy
// an index entry and a hash of the payload per message.
func TestQoS1NotIndexedAsQoS2(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", t.TempDir(), 8192, rep, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	for qos := byte(1); qos <= 2; qos++ {
		m := &broker.Message{Topic: "t", Payload: []byte("m"), QoS: qos, PacketID: uint16(qos), ClientID: "pub", Origin: broker.OriginClient}
		if err := p.InterceptPublish(m, make(chanResolver, 1)); err != broker.ErrDeferred {
			t.Fatalf("QoS %d publish: %v", qos, err)
		}
	}
	if err := p.store.settle(); err != nil { // both written: sendable, and in bbolt
		t.Fatal(err)
	}
	_, _, _, reps := takeFor(p, "b")
	if len(reps) != 2 || reps[0].PacketID != 0 || reps[1].PacketID != 2 {
		t.Fatalf("packet identifiers sent to a copy: %+v, want none for QoS 1 and 2 for QoS 2", reps)
	}
	if _, ok := p.copies.acceptedQoS2(0, "pub", 1, 0); ok {
		t.Fatal("the QoS 1 publish is in the QoS 2 index")
	}
	indexed := 0
	p.store.db.View(func(tx *bolt.Tx) error { indexed = tx.Bucket(bucketQoS2).Stats().KeyN; return nil })
	if indexed != 1 {
		t.Fatalf("%d entries in the qos2 bucket, want the QoS 2 publish's only", indexed)
	}
}

// TestFrameBehindFailedFrameRefused: the sender's second frame, sent
// before it learned that the first failed, arrives after the receiver
// rewound to the first: it is refused, and the resend of both, on a new
// connection, delivers both. Taken, it covered the first frame's numbers
// too (everything above the rewound position was its own), its write
// marked them written, and the resend of the first was dropped as a
// duplicate: m1 lost.
func TestFrameBehindFailedFrameRefused(t *testing.T) {
	br := &failingOnceBroker{}
	p, err := New(Options{NodeName: "n", Username: "cluster", Broker: br, BestEffort: true, Reliable: true, ForwardQueueEntries: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	frame := func(seq uint64, payload string) *broker.Message {
		f := wire.AppendHeader(nil, "a", 1, frameConn())
		f = wire.AppendRecord(f, seq, wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(payload), QoS: 1, ClientID: "pub"}), nil)
		time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
		return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
	}
	if err := answer(t, p, frame(1, "m1")); err == nil {
		t.Fatal("the frame whose delivery failed was confirmed")
	}
	s := p.recv.sender("a")
	eventuallyT(t, func() bool { return s.seen.Load() == 0 }) // rewound to it
	if err := answer(t, p, frame(2, "m2")); err == nil {
		t.Fatal("the frame behind the failed one, on its connection, was taken")
	}
	reconnect()
	receiveOK(t, p, frame(1, "m1"))
	receiveOK(t, p, frame(2, "m2"))
	if got := br.delivered(); fmt.Sprint(got) != "[m1 m2]" {
		t.Fatalf("delivered %q, want m1 and m2 after the resend", got)
	}
	if n := p.Status().Received.AfterFailure; n != 1 {
		t.Fatalf("afterFailureRefused %d, want 1", n)
	}
}
