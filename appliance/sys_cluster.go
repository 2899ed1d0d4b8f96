package appliance

import (
	"encoding/json"
	"strconv"
	"time"

	"gantry/broker"
)

// clusterSysInterval is how often the $SYS/Coreflux/Cluster topics are
// refreshed, as the Coreflux reference documents.
const clusterSysInterval = 7 * time.Second

// clusterSysStatus is the JSON summary on $SYS/Coreflux/Cluster/Status.
type clusterSysStatus struct {
	NodeName     string `json:"nodeName"`
	ClusterID    string `json:"clusterId"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	MembersTotal int    `json:"membersTotal"`
	MembersAlive int    `json:"membersAlive"`
	Partitions   int    `json:"partitionsOwned"`
	MapVersion   uint64 `json:"partitionMapVersion"`
	// LoT is lot of GET /cluster: definitions version per node, mixedMode,
	// the owner map (wire_cluster_lot.go).
	LoT *lotStatus `json:"lot,omitempty"`
}

// runClusterSys publishes, retained, every interval until stop closes,
// and within a second of any change (a new leader, a member lost):
// $SYS/Coreflux/Cluster/Role (leader, follower, candidate, joining),
// IsLeader (true/false), Leader (its NodeName), Term, Members (the number
// of members) and Status (clusterSysStatus as JSON).
func (n *Node) runClusterSys(interval time.Duration, stop <-chan struct{}) {
	c := n.Broker.NewClient("$gantry-cluster-sys", broker.OriginBroker, nil)
	defer c.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := map[string]string{}
	refreshed := time.Time{}
	for {
		full := time.Since(refreshed) >= interval
		if full {
			refreshed = time.Now()
		}
		st := n.Cluster.Status()
		status, _ := json.Marshal(clusterSysStatus{NodeName: st.NodeName, ClusterID: st.ClusterID, Role: st.Role,
			Leader: st.Leadership.Leader, Term: st.Leadership.Term, MembersTotal: st.MembersTotal,
			MembersAlive: st.MembersAlive, Partitions: st.OwnedByMe, MapVersion: st.Partitions.Version, LoT: n.lotClusterStatus()})
		for _, kv := range [][2]string{
			{"Role", st.Role},
			{"IsLeader", strconv.FormatBool(st.Leadership.IsLeader)},
			{"Leader", st.Leadership.Leader},
			{"Term", strconv.FormatUint(st.Leadership.Term, 10)},
			{"Members", strconv.Itoa(st.MembersTotal)},
			{"Status", string(status)},
		} {
			if full || last[kv[0]] != kv[1] {
				c.Publish("$SYS/Coreflux/Cluster/"+kv[0], []byte(kv[1]), 0, true)
				last[kv[0]] = kv[1]
			}
		}
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
