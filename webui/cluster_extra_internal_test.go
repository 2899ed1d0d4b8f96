package webui

import (
	"fmt"
	"testing"
)

// TestClusterExtras: the fields of GET /cluster the health page has no
// tile for come out as tiles and tables, in the order they are served;
// the ones it shows itself are left out.
func TestClusterExtras(t *testing.T) {
	body := `{"enabled":true,"nodeName":"gw-a","role":"leader","members":[{"name":"gw-a"}],"voters":3,
		"replication":{"quorumFailures":2,"lagSeconds":0.25,"byPartition":[{"partition":0,"backlog":4},{"partition":1,"backlog":0,"stalled":true}]},
		"dataPlane":{"peers":[{"backlog":7,"name":"gw-b","connected":false}],"interest":3},
		"routeListeners":[],"waiting":""}`
	got := clusterExtras([]byte(body))
	want := "Voters: [Voters=3] []\n" +
		"Replication: [Lag seconds=0.25 Quorum failures=2] [By partition [Partition Backlog Stalled] [[0 4 ] [1 0 yes]]]\n" +
		"Data plane: [Interest=3] [Peers [Name Backlog Connected] [[gw-b 7 no]]]\n" +
		"Route listeners: [Route listeners=none] []\n" +
		"Waiting: [Waiting=—] []\n"
	s := ""
	for _, sec := range got {
		var tiles []string
		for _, tl := range sec.Tiles {
			tiles = append(tiles, tl.Label+"="+tl.Value)
		}
		var tables []string
		for _, tb := range sec.Tables {
			tables = append(tables, fmt.Sprint(tb.Title, " ", tb.Cols, " ", tb.Rows))
		}
		s += fmt.Sprintf("%s: %v %v\n", sec.Title, tiles, tables)
	}
	if s != want {
		t.Errorf("got\n%s\nwant\n%s", s, want)
	}
	for _, bad := range []string{"", "[]", "{", `{"a":`, "null"} {
		clusterExtras([]byte(bad)) // must not panic
	}
}
