package appliance

import (
	"strconv"
	"time"

	"gantry/broker"
)

// sysTopic is one $SYS/broker statistic.
type sysTopic struct {
	topic string
	value func(n *Node) string
}

func u64(f func(st *broker.Stats) uint64) func(n *Node) string {
	return func(n *Node) string { return strconv.FormatUint(f(n.Broker.Stats()), 10) }
}

func i64(f func(n *Node) int64) func(n *Node) string {
	return func(n *Node) string { return strconv.FormatInt(f(n), 10) }
}

var sysTopics = []sysTopic{
	{"$SYS/broker/version", func(n *Node) string { return "gantry " + Version }},
	{"$SYS/broker/uptime", func(n *Node) string { return strconv.Itoa(int(time.Since(n.started)/time.Second)) + " seconds" }},
	{"$SYS/broker/clients/connected", i64(func(n *Node) int64 { return n.Broker.Stats().Connections.Load() })},
	{"$SYS/broker/clients/total", i64(func(n *Node) int64 { return int64(n.Broker.SessionCount()) })},
	{"$SYS/broker/messages/received", u64(func(st *broker.Stats) uint64 { return st.MessagesIn.Load() })},
	{"$SYS/broker/messages/sent", u64(func(st *broker.Stats) uint64 { return st.MessagesOut.Load() })},
	{"$SYS/broker/messages/dropped", u64(func(st *broker.Stats) uint64 { return st.Dropped.Load() })},
	{"$SYS/broker/messages/inflight", i64(func(n *Node) int64 { _, f := n.Broker.QueueCounts(); return int64(f) })},
	{"$SYS/broker/messages/queued", i64(func(n *Node) int64 { q, _ := n.Broker.QueueCounts(); return int64(q) })},
	{"$SYS/broker/bytes/received", u64(func(st *broker.Stats) uint64 { return st.BytesIn.Load() })},
	{"$SYS/broker/bytes/sent", u64(func(st *broker.Stats) uint64 { return st.BytesOut.Load() })},
	{"$SYS/broker/retained messages/count", i64(func(n *Node) int64 { return int64(n.Broker.RetainedCount()) })},
	{"$SYS/broker/subscriptions/count", i64(func(n *Node) int64 { return int64(n.Broker.SubscriptionCount()) })},
}

// runSys publishes the $SYS/broker statistics, retained, every interval,
// each topic only when its value changed. It returns when stop closes.
func (n *Node) runSys(interval time.Duration, stop <-chan struct{}) {
	c := n.Broker.NewClient("$gantry-sys", broker.OriginBroker, nil)
	defer c.Close()
	last := make([]string, len(sysTopics))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for i, st := range sysTopics {
			v := st.value(n)
			if v != last[i] {
				c.Publish(st.topic, []byte(v), 0, true)
				last[i] = v
			}
		}
		n.publishUsers() // changes made with the gantry command while running
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
