package main

import (
	"encoding/json"
	"testing"
	"time"
)

// TestCheck: the checker finds each kind of violation in a hand-made
// history, and excuses what a failover allows.
func TestCheck(t *testing.T) {
	t0 := time.Now()
	type send struct {
		id    msgID
		qos   byte
		nodes []string // node of each attempt
		conns []int    // connection of each attempt
		acked bool
		refs  int // the first refs attempts were refused
	}
	type recv struct {
		sub     string
		id      msgID
		conn    int
		attempt int
	}
	cases := []struct {
		name  string
		sends []send
		recvs []recv
		want  row
	}{
		{"all delivered",
			[]send{{msgID{0, 1}, 1, []string{"a"}, []int{1}, true, 0}, {msgID{0, 2}, 1, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{0, 1}, 1, 0}, {"s1", msgID{0, 2}, 1, 0}},
			row{acked: 2, delivered: 2}},
		{"acknowledged, missing",
			[]send{{msgID{0, 1}, 1, []string{"a"}, []int{1}, true, 0}, {msgID{0, 2}, 1, []string{"a"}, []int{1}, false, 0}},
			nil,
			row{acked: 1, lost: 1}},
		{"QoS 1 twice is a duplicate, not a violation",
			[]send{{msgID{0, 1}, 1, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{0, 1}, 1, 0}, {"s1", msgID{0, 1}, 1, 0}},
			row{acked: 1, delivered: 1, dups: 1}},
		{"QoS 2 twice on one connection, sent once",
			[]send{{msgID{1, 1}, 2, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{1, 1}, 1, 0}, {"s1", msgID{1, 1}, 1, 0}},
			row{acked: 1, delivered: 1, dups: 1, qos2Dup: 1}},
		{"QoS 2 twice after the subscriber reconnected",
			[]send{{msgID{1, 1}, 2, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{1, 1}, 1, 0}, {"s1", msgID{1, 1}, 2, 0}},
			row{acked: 1, delivered: 1, dups: 1}},
		{"QoS 2 twice after the publisher resent on another node",
			[]send{{msgID{1, 1}, 2, []string{"a", "b"}, []int{1, 2}, true, 0}},
			[]recv{{"s1", msgID{1, 1}, 1, 0}, {"s1", msgID{1, 1}, 1, 1}},
			row{acked: 1, delivered: 1, dups: 1, qos2Resnt: 1}},
		{"QoS 2 resent, its first attempt delivered twice",
			[]send{{msgID{1, 1}, 2, []string{"a", "b"}, []int{1, 2}, true, 0}},
			[]recv{{"s1", msgID{1, 1}, 1, 0}, {"s1", msgID{1, 1}, 1, 0}},
			row{acked: 1, delivered: 1, dups: 1, qos2Dup: 1}},
		{"QoS 2 twice on one connection after the subscriber's node restarted",
			[]send{{msgID{1, 2}, 2, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{1, 2}, 1, 0}, {"s1", msgID{1, 2}, 1, 0}},
			row{acked: 1, delivered: 1, dups: 1}},
		{"out of order on one node",
			[]send{{msgID{0, 1}, 1, []string{"a"}, []int{1}, true, 0}, {msgID{0, 2}, 1, []string{"a"}, []int{1}, true, 0}},
			[]recv{{"s1", msgID{0, 2}, 1, 0}, {"s1", msgID{0, 1}, 1, 0}},
			row{acked: 2, delivered: 2, order: 1}},
		{"out of order across a publisher's failover",
			[]send{{msgID{0, 1}, 1, []string{"a"}, []int{1}, true, 0}, {msgID{0, 2}, 1, []string{"b"}, []int{2}, true, 0}},
			[]recv{{"s1", msgID{0, 2}, 1, 0}, {"s1", msgID{0, 1}, 1, 0}},
			row{acked: 2, delivered: 2}},
		{"refused every time, delivered",
			[]send{{msgID{0, 1}, 1, []string{"a", "a"}, []int{1, 1}, false, 2}},
			[]recv{{"s1", msgID{0, 1}, 1, 1}},
			row{refused: 2, refusedIn: 1}},
		{"refused, then acknowledged: the refused attempt delivered",
			[]send{{msgID{0, 1}, 1, []string{"a", "a"}, []int{1, 1}, true, 1}},
			[]recv{{"s1", msgID{0, 1}, 1, 0}, {"s1", msgID{0, 1}, 1, 1}},
			row{acked: 1, refused: 1, delivered: 1, dups: 1, refusedIn: 1}},
		{"refused, then acknowledged, delivered once",
			[]send{{msgID{0, 1}, 1, []string{"a", "a"}, []int{1, 1}, true, 1}},
			[]recv{{"s1", msgID{0, 1}, 1, 1}},
			row{acked: 1, refused: 1, delivered: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			for i, s := range tc.sends {
				for k, n := range s.nodes {
					a := h.attempt(s.id, s.qos, n, s.conns[k])
					if a < s.refs {
						h.refused(s.id, a, 0x97)
					}
				}
				if s.acked {
					h.ack(s.id, s.nodes[len(s.nodes)-1])
				}
				h.sent[s.id].first = t0.Add(time.Duration(i) * time.Millisecond)
			}
			if tc.name == "QoS 2 twice on one connection after the subscriber's node restarted" {
				h.restarts["s1"] = []time.Time{t0.Add(time.Nanosecond)}
			}
			for _, r := range tc.recvs {
				h.deliver(r.sub, r.id.payload(h.sent[r.id].qos, r.attempt), r.conn)
			}
			got := check(h, []phase{{start: t0.Add(-time.Second), end: t0.Add(time.Second)}}, []string{"s1"})[0]
			if got.acked != tc.want.acked || got.refused != tc.want.refused || got.delivered != tc.want.delivered ||
				got.lost != tc.want.lost || got.dups != tc.want.dups || got.qos2Dup != tc.want.qos2Dup ||
				got.qos2Resnt != tc.want.qos2Resnt || got.order != tc.want.order || got.refusedIn != tc.want.refusedIn {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestOwnersIn reads the partitions of GET /cluster as today's nodes serve
// them and in the other shapes the checker tolerates.
func TestOwnersIn(t *testing.T) {
	cases := []struct {
		name, body string
		want       []ownerEntry
	}{
		{"map", `{"partitions":{"version":3,"partitions":[{"partition":0,"owner":"a","epoch":2},{"partition":1,"owner":"b","epoch":3}]}}`,
			[]ownerEntry{{0, "a", 2, true}, {1, "b", 3, true}}},
		{"bare list, other case, no epoch", `{"Partitions":[{"Owner":"a"},{"Owner":"b","Epoch":7}]}`,
			[]ownerEntry{{0, "a", 0, false}, {1, "b", 7, true}}},
		{"none yet", `{"enabled":true}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw map[string]any
			if err := json.Unmarshal([]byte(tc.body), &raw); err != nil {
				t.Fatal(err)
			}
			got := ownersIn(raw)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

// TestOwnerLog: two owners named for one partition in one epoch, by any
// two views, is a violation; a new owner in a new epoch is not.
func TestOwnerLog(t *testing.T) {
	l := newOwnerLog()
	l.record("a", []ownerEntry{{0, "a", 1, true}, {1, "b", 1, true}})
	l.record("b", []ownerEntry{{0, "a", 1, true}, {1, "c", 4, true}})
	if v := l.violations(); len(v) != 0 {
		t.Fatalf("violations %v, want none", v)
	}
	l.record("c", []ownerEntry{{0, "c", 1, true}})
	if v := l.violations(); len(v) != 1 {
		t.Fatalf("violations %v, want partition 0 epoch 1", v)
	}
}

// TestSplitNeverKnowsLoss: a known issue covers only its kinds of
// violation; a lost message always counts against the run.
func TestSplitNeverKnowsLoss(t *testing.T) {
	r := row{lost: 2, refusedIn: 3, qos2Dup: 1}
	r.knownKinds = []string{"refusedIn", "lost"}
	if bad, known := r.split(); bad != 3 || known != 3 {
		t.Fatalf("split = %d bad, %d known; want 3 (2 lost, 1 QoS 2 twice) and 3", bad, known)
	}
}
