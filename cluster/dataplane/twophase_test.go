package dataplane

// Two-phase delivery (issue 14): a copy stores a quorum record at once
// but delivers it only once its origin decided the write acknowledged, and
// never when it was refused.

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// recordingBroker is a Deliverer that remembers the payloads delivered.
type recordingBroker struct {
	nopBroker
	mu  sync.Mutex
	got []string
}

func (b *recordingBroker) DeliverBatch(ms []*broker.Message, _ func(error)) bool {
	b.mu.Lock()
	for _, m := range ms {
		b.got = append(b.got, string(m.Payload))
	}
	b.mu.Unlock()
	return false
}

func (b *recordingBroker) delivered() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

func twoPhasePlane(t *testing.T, name, dir string, br *recordingBroker, a partition.Assignment) *Plane {
	t.Helper()
	opts := Options{NodeName: name, Username: "cluster", Broker: br, BestEffort: true, Reliable: true,
		ForwardQueueEntries: 8192, DataDir: dir, Replication: &Replication{Gate: true, Timeout: time.Minute}}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p.SetMap(partition.Map{Version: 1, Partitions: []partition.Assignment{a}})
	return p
}

// frameFrom is a frame of sender "a" (boot 1) with its decisions and
// quorum records (Copy, Decide) numbered from first.
// testConn numbers the link connection the tests' frames come on
// (frameConn): a test whose frame failed sends it again on a new one
// (reconnect), as a link does. Tests do not run in parallel here.
var testConn atomic.Uint64

func frameConn() uint64 { return testConn.Load() + 1 }
func reconnect()        { testConn.Add(1) }

func frameFrom(p *Plane, decided uint64, refused []uint64, first uint64, payloads ...string) *broker.Message {
	f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), decided, refused)
	for i, pl := range payloads {
		msg := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte(pl), QoS: 1, ClientID: "pub"})
		f = wire.AppendRecordRep(f, first+uint64(i), msg, nil, &wire.Rep{Copy: true, Partition: 0, Epoch: 1, Decide: true})
	}
	time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
	return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)}
}

func receiveOK(t *testing.T, p *Plane, m *broker.Message) {
	t.Helper()
	r := make(chanResolver, 1)
	err := p.receive(m, r)
	if err == broker.ErrDeferred {
		err = <-r
	}
	if err != nil {
		t.Fatalf("frame answered %v", err)
	}
}

func copiesHeld(p *Plane) []string {
	var out []string
	p.copies.records(0, 0, func(_ uint64, r copyRec) bool {
		if d, err := wire.DecodeMessage(r.msg); err == nil {
			out = append(out, string(d.Msg.Payload))
		}
		return true
	})
	return out
}

func TestTwoPhaseCopyHeldUntilDecided(t *testing.T) {
	for _, dir := range []string{"", "durable"} {
		t.Run(fmt.Sprintf("store=%v", dir != ""), func(t *testing.T) {
			if dir != "" {
				dir = t.TempDir()
			}
			br := &recordingBroker{}
			a := partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1}
			p := twoPhasePlane(t, "b", dir, br, a)
			defer func() { p.Stop() }()

			receiveOK(t, p, frameFrom(p, 0, nil, 1, "m1", "m2"))
			if got := br.delivered(); len(got) != 0 {
				t.Fatalf("undecided copies delivered: %v", got)
			}
			if got := copiesHeld(p); !slices.Equal(got, []string{"m1", "m2"}) {
				t.Fatalf("copy log %v, want both stored before the decision", got)
			}
			if h := p.ReplicationStatus().Held; h != 2 {
				t.Fatalf("held %d, want 2", h)
			}
			// m1 refused, m2 acknowledged: a header alone decides them.
			receiveOK(t, p, frameFrom(p, 2, []uint64{1}, 0))
			if got := br.delivered(); !slices.Equal(got, []string{"m2"}) {
				t.Fatalf("delivered %v after the decisions, want only the acknowledged m2", got)
			}
			if got := copiesHeld(p); !slices.Equal(got, []string{"m2"}) {
				t.Fatalf("copy log %v: the refused m1 must be gone (a replay must not deliver it)", got)
			}
			st := p.ReplicationStatus()
			if st.Held != 0 || st.Released != 1 || st.RefusedDropped != 1 {
				t.Fatalf("held %d released %d refused %d, want 0 1 1", st.Held, st.Released, st.RefusedDropped)
			}
			// Decided in the frame that carries it (a resend after the
			// decision): delivered at once, in order.
			receiveOK(t, p, frameFrom(p, 4, nil, 3, "m3", "m4"))
			if got := br.delivered(); !slices.Equal(got, []string{"m2", "m3", "m4"}) {
				t.Fatalf("delivered %v", got)
			}
			if dir == "" {
				return
			}
			// Held across a restart: m5 waits in the held bucket.
			receiveOK(t, p, frameFrom(p, 4, nil, 5, "m5"))
			p.Stop()
			br2 := &recordingBroker{}
			p = twoPhasePlane(t, "b", dir, br2, a)
			if h := p.ReplicationStatus().Held; h != 1 {
				t.Fatalf("held %d after a restart, want 1", h)
			}
			receiveOK(t, p, frameFrom(p, 5, nil, 0))
			if got := br2.delivered(); !slices.Equal(got, []string{"m5"}) {
				t.Fatalf("delivered %v after the restart's decision, want m5", got)
			}
		})
	}
}

// TestTwoPhaseOriginLeftMap: copies held for a node that leaves the
// partition map are delivered (its decision will not come; it may have
// acknowledged them).
func TestTwoPhaseOriginLeftMap(t *testing.T) {
	br := &recordingBroker{}
	p := twoPhasePlane(t, "b", t.TempDir(), br, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	receiveOK(t, p, frameFrom(p, 0, nil, 1, "m1"))
	p.SetMap(partition.Map{Version: 2, Partitions: []partition.Assignment{{Owner: "b", Replicas: []string{"b", "c"}, Epoch: 2}}})
	eventuallyT(t, func() bool { return slices.Equal(br.delivered(), []string{"m1"}) })
}

func eventuallyT(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met in 5 s")
}

// takeHead takes a frame for peer name and returns its decisions and the
// numbers of its records.
func takeHead(p *Plane, name string) (pid uint16, decided uint64, refused []uint64, seqs []uint64, reps []wire.Rep) {
	ps := p.out.peers[name]
	pid, _ = p.out.take(ps, 1<<20, func(d uint64, r []uint64) { decided, refused = d, slices.Clone(r) },
		func(string) bool { return true }, func(seq uint64, msg []byte, _ []string, r *wire.Rep) int {
			seqs = append(seqs, seq)
			if r != nil {
				reps = append(reps, *r)
			}
			return len(msg)
		}, nextPID)
	return
}

// TestTwoPhaseOriginDecisions: the origin marks its quorum records for
// the copies (Decide), tells them each decision in the next header (a
// header alone when nothing else is due), names the refused ones, and
// sends no refused record to a copy that does not have it yet.
func TestTwoPhaseOriginDecisions(t *testing.T) {
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", "", 8192, rep, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	publish := func(pl string) chanResolver {
		r := make(chanResolver, 1)
		if err := p.InterceptPublish(&broker.Message{Topic: "t", Payload: []byte(pl), QoS: 1, ClientID: "pub", Origin: broker.OriginClient}, r); err != broker.ErrDeferred {
			t.Fatalf("publish: %v, want it deferred for its majority", err)
		}
		return r
	}
	r1 := publish("m1")
	pid, decided, _, seqs, reps := takeHead(p, "b")
	if len(seqs) != 1 || !reps[0].Decide || !reps[0].Copy || decided >= seqs[0] {
		t.Fatalf("first frame to b: seqs %v reps %+v decided %d; want one Decide copy, undecided", seqs, reps, decided)
	}
	m1 := seqs[0]
	p.out.confirm("b", p.out.peers["b"], pid, false)
	if err := <-r1; err != nil {
		t.Fatalf("m1: %v", err)
	}
	pid, decided, refused, seqs, _ := takeHead(p, "b")
	if pid == 0 || len(seqs) != 0 || decided < m1 || len(refused) != 0 {
		t.Fatalf("after m1's majority b gets pid %d seqs %v decided %d refused %v; want a header alone deciding m1", pid, seqs, decided, refused)
	}
	p.out.confirm("b", p.out.peers["b"], pid, false)
	// m2 reaches b (whose confirmation is lost), then is refused: its
	// deadline passed.
	r2 := publish("m2")
	_, _, _, seqs, _ = takeHead(p, "b")
	m2 := seqs[0]
	r3 := publish("m3")
	p.gate.sweep(time.Now().Add(2 * time.Minute))
	if err := <-r2; err == nil {
		t.Fatal("m2 acknowledged after its deadline")
	}
	<-r3
	_, decided, refused, seqs, _ = takeHead(p, "b")
	if len(seqs) != 0 || decided < m2+1 || !slices.Equal(refused, []uint64{m2, m2 + 1}) {
		t.Fatalf("after the refusals b gets seqs %v decided %d refused %v; want no record (m3 refused before it was sent) and both named", seqs, decided, refused)
	}
	// c never had m2 or m3: they are not sent to it.
	_, _, _, seqs, _ = takeHead(p, "c")
	if !slices.Equal(seqs, []uint64{m1}) {
		t.Fatalf("c gets %v, want only m1", seqs)
	}
}

// TestOutboxRestartKeepsDecisionsAndOrigins: after a restart a refused
// record is still named refused and sent to nobody, and a replayed record
// still carries its origin's identity (receivers drop it if they had it).
func TestOutboxRestartKeepsDecisionsAndOrigins(t *testing.T) {
	dir := t.TempDir()
	a := partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1}
	rep := &Replication{Gate: true, Timeout: time.Minute}
	p := reviewPlane(t, "a", dir, 8192, rep, []string{"b", "c"}, a)
	r := make(chanResolver, 1)
	if err := p.InterceptPublish(&broker.Message{Topic: "t", Payload: []byte("refused"), QoS: 1, ClientID: "pub", Origin: broker.OriginClient}, r); err != broker.ErrDeferred {
		t.Fatal(err)
	}
	p.gate.sweep(time.Now().Add(2 * time.Minute))
	if err := <-r; err == nil {
		t.Fatal("not refused")
	}
	enc := wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("replayed"), QoS: 1})
	lost := copyID{origin: "x", boot: 7, seq: 42}
	p.out.appendIfRoom([]entry{{msg: enc, topic: "t", rep: &repInfo{partition: 0, origin: lost, at: 99}}}, 8192)
	p.Stop()

	p = reviewPlane(t, "a", dir, 8192, rep, []string{"b", "c"}, a)
	defer p.Stop()
	_, decided, refused, seqs, reps := takeHead(p, "b")
	if len(refused) != 1 || decided < refused[0] {
		t.Fatalf("after a restart b's header: decided %d refused %v, want the refused record named", decided, refused)
	}
	if len(seqs) != 1 || len(reps) != 1 || reps[0].Origin != "x" || reps[0].OriginBoot != 7 || reps[0].OriginSeq != 42 || reps[0].At != 99 {
		t.Fatalf("after a restart b gets %v with %+v, want only the replayed record under its origin x/7/42", seqs, reps)
	}
}

// TestTwoPhaseReleaseKeepsStreamOrder: copies released by a frame are
// delivered in stream order with the frame's other messages (a partition
// whose copies changed sends one record held and the next one not).
func TestTwoPhaseReleaseKeepsStreamOrder(t *testing.T) {
	br := &recordingBroker{}
	p := twoPhasePlane(t, "b", "", br, partition.Assignment{Owner: "a", Replicas: []string{"a", "b", "c"}, Epoch: 1})
	defer p.Stop()
	receiveOK(t, p, frameFrom(p, 0, nil, 1, "m1"))
	f := wire.AppendHeaderDecided(nil, "a", 1, frameConn(), 3, nil)
	f = wire.AppendRecord(f, 2, wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("m2"), QoS: 1, ClientID: "pub"}), nil)
	f = wire.AppendRecordRep(f, 3, wire.AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("m3"), QoS: 1, ClientID: "pub"}), nil,
		&wire.Rep{Copy: true, Partition: 0, Epoch: 1, Decide: true})
	time.Sleep(time.Microsecond)
	receiveOK(t, p, &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: p.opts.Signer.Sign(f)})
	if got := br.delivered(); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("delivered %v, want m1 m2 m3", got)
	}
}

// TestHeldStaysInStreamOrder: a copy resent below what is held (after a
// restart of the copy) takes its place, and a repeat is not held twice.
func TestHeldStaysInStreamOrder(t *testing.T) {
	var s senderState
	h := func(seq uint64) heldRec { return heldRec{id: copyID{origin: "a", boot: 1, seq: seq}} }
	if n := s.addHeld([]heldRec{h(10), h(20)}); n != 2 {
		t.Fatalf("added %d", n)
	}
	if n := s.addHeld([]heldRec{h(5), h(15), h(20)}); n != 2 {
		t.Fatalf("added %d, want 2 (20 is held already)", n)
	}
	var got []uint64
	for _, x := range s.held {
		got = append(got, x.id.seq)
	}
	if !slices.Equal(got, []uint64{5, 10, 15, 20}) {
		t.Fatalf("held %v, want 5 10 15 20", got)
	}
}
