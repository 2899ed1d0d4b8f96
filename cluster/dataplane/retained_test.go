package dataplane

import (
	"slices"
	"testing"
	"time"

	"gantry/broker"
	"gantry/cluster/partition"
	"gantry/cluster/wire"
)

// retainedBroker is a nopBroker holding retained messages.
type retainedBroker struct {
	nopBroker
	msgs []*broker.Message
}

func (b retainedBroker) RangeRetained(fn func(*broker.Message) bool) {
	for _, m := range b.msgs {
		if !fn(m) {
			return
		}
	}
}

// TestRetainedTombstonesPruned: the version of a deleted retained topic
// (a tombstone) is kept for tombstoneKeep, travels in catch-ups while
// kept (a peer that missed the deletion deletes too), and is then pruned,
// also from the store; a live topic's version stays however old.
func TestRetainedTombstonesPruned(t *testing.T) {
	dir := t.TempDir()
	p := reviewPlane(t, "a", dir, 64, nil, []string{"b"}, partition.Assignment{Owner: "a", Replicas: []string{"a"}, Epoch: 1})
	p.opts.Broker = retainedBroker{msgs: []*broker.Message{{Topic: "live/old", Payload: []byte("v"), Retain: true}}}
	now := time.Now()
	at := func(d time.Duration) wire.Version {
		return wire.Version{Counter: uint64(now.Add(-d).UnixMicro()), Node: "x"}
	}
	for topic, v := range map[string]wire.Version{"gone/old": at(25 * time.Hour), "gone/new": at(time.Hour), "live/old": at(48 * time.Hour)} {
		if !p.retained.accept(topic, v) {
			t.Fatalf("%s not accepted", topic)
		}
	}
	if n := p.pruneTombstones(now); n != 1 {
		t.Fatalf("pruned %d, want gone/old only", n)
	}
	p.catchUp("b")
	var got []string
	eventually(t, func() bool { // with a store, records go once written (or leased)
		_, seqs, _, _ := takeFor(p, "b")
		o := p.out
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, seq := range seqs {
			d, err := wire.DecodeMessage(o.entries.at(int(seq - o.base - 1)).msg)
			if err != nil || !d.StoreOnly || d.Version == (wire.Version{}) {
				got = append(got, "bad record")
				continue
			}
			got = append(got, d.Msg.Topic+"="+string(d.Msg.Payload))
		}
		return len(got) >= 2
	})
	slices.Sort(got)
	if want := []string{"gone/new=", "live/old=v"}; !slices.Equal(got, want) {
		t.Fatalf("catch-up: %q, want %q (the kept tombstone as a deletion)", got, want)
	}
	p.Stop()
	st, err := openStore(dir + "/" + FileName)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	rv := newRetainedVersions(st)
	if _, ok := rv.topics["gone/old"]; ok || len(rv.topics) != 2 {
		t.Fatalf("after a restart: %v, want gone/old pruned", rv.topics)
	}
}
