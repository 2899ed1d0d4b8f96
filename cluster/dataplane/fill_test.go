package dataplane

import (
	"fmt"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// frameFor takes the next frame p's outbox has for peer, as its link
// writes it, signed with to's signer (the receiver's); n is the number of
// records and headers it carries.
func frameFor(p *Plane, peer string, to *Plane) (m *broker.Message, n int) {
	var frame []byte
	head := func(decided uint64, refused []uint64) {
		frame = wire.AppendHeaderDecided(frame, p.opts.NodeName, p.boot, 1, decided, refused)
	}
	_, n = p.out.take(p.out.peers[peer], 1<<20, head, func(string) bool { return true },
		func(seq uint64, msg []byte, groups []string, rep *wire.Rep) int {
			frame = wire.AppendRecordRep(frame, seq, msg, groups, rep)
			return wire.RecordSizeRep(seq, msg, groups, rep)
		}, nextPID)
	time.Sleep(time.Microsecond) // each frame's timestamp newer than the last
	return &broker.Message{Origin: broker.OriginClient, Username: "cluster", Topic: frameTopic, QoS: 1, Payload: to.opts.Signer.Sign(frame)}, n
}

// TestFilledCopyRecognisesQoS2Resend: a QoS 2 message written while b was
// not yet a copy of its partition reaches b's copy by the owner's fill;
// after a failover its publisher's resend (DUP) on b is recognised there
// (PUBREC, not a new write delivered a second time) and goes to the peers
// under its first identity, which those that delivered it drop. The
// fill's records used to carry no packet identifier: b made a new quorum
// write, and the subscriber on c got the message twice
// (TestQuorumQoS2ResentAfterFailoverDeliveredOnce, with the map still
// settling when it published).
func TestFilledCopyRecognisesQoS2Resend(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", durable), func(t *testing.T) {
			dirA, dirB := "", ""
			if durable {
				dirA, dirB = t.TempDir(), t.TempDir()
			}
			rep := &Replication{Gate: true, Timeout: time.Minute}
			a := reviewPlane(t, "a", dirA, 8192, rep, []string{"b", "c"}, partition.Assignment{Owner: "a", Replicas: []string{"a", "c"}, Epoch: 1})
			defer a.Stop()
			pub := func(dup bool) *broker.Message {
				return &broker.Message{Topic: "t", Payload: []byte("once"), QoS: 2, PacketID: 7, Dup: dup, ClientID: "pub", Origin: broker.OriginClient}
			}
			r := make(chanResolver, 1)
			if err := a.InterceptPublish(pub(false), r); err != broker.ErrDeferred {
				t.Fatalf("publish on a: %v, want it deferred for its majority", err)
			}
			// c confirms its copy (with a store, once a sent it).
			eventuallyT(t, func() bool {
				if pid, _, _, seqs, _ := takeHead(a, "c"); len(seqs) > 0 {
					a.out.confirm("c", a.out.peers["c"], pid, false)
				}
				return len(r) > 0
			})
			if err := <-r; err != nil {
				t.Fatalf("publish on a: %v", err)
			}

			// b becomes a copy; a, the owner, fills it.
			m2 := partition.Map{Version: 2, Partitions: []partition.Assignment{
				{Owner: "a", Replicas: []string{"a", "b", "c"}, Syncing: []string{"b"}, Epoch: 1}}}
			b := reviewPlane(t, "b", dirB, 8192, rep, []string{"a", "c"}, m2.Partitions[0])
			defer b.Stop()
			a.SetMap(m2)
			eventuallyT(t, func() bool {
				if f, n := frameFor(a, "b", b); n > 0 {
					receiveOK(t, b, f)
				}
				return b.copies.counts()[0] > 0
			})

			// a is lost; the publisher resends on b.
			err := b.InterceptPublish(pub(true), make(chanResolver, 1))
			if err != broker.ErrDuplicate {
				t.Fatalf("the resend on b: %v, want it recognised from b's filled copy (%v)", err, broker.ErrDuplicate)
			}
			var reps []wire.Rep
			eventuallyT(t, func() bool { _, _, _, _, reps = takeHead(b, "c"); return len(reps) > 0 }) // with a store, once written
			if len(reps) != 1 || reps[0].Origin != "a" || reps[0].OriginSeq == 0 {
				t.Fatalf("b sends c %+v, want the message under its identity on a", reps)
			}
		})
	}
}
