package webui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserClusterHealth: the health page of one node of a three-node
// cluster shows the leader, the members and the partition map, follows a
// member going down live, and drills down into a member.
func TestBrowserClusterHealth(t *testing.T) {
	ips := []string{loopbackIP(), loopbackIP(), loopbackIP()}
	var seeds []string
	for _, ip := range ips {
		seeds = append(seeds, ip+":9200")
	}
	var nodes []*consoleNode
	for i, ip := range ips {
		nodes = append(nodes, startConsoleNodeAt(t, ip, map[string]string{
			"COREFLUX_CLUSTER_ENABLED":                 "true",
			"COREFLUX_CLUSTER_ID":                      "cabinet-3",
			"COREFLUX_CLUSTER_NODE_NAME":               fmt.Sprintf("gw-%c", 'a'+i),
			"COREFLUX_CLUSTER_DISCOVERY":               "seeds",
			"COREFLUX_CLUSTER_SEEDS":                   strings.Join(seeds, ","),
			"COREFLUX_CLUSTER_SHARED_SECRET":           "a-long-random-secret",
			"COREFLUX_CLUSTER_BOOTSTRAP_GRACE_SECONDS": "1",
		}, true))
	}
	ctx := newBrowser(t, 1024, 900)
	a := nodes[0]
	login(t, ctx, a, "root", a.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	waitJS(t, ctx, `!!document.querySelector("#cluster-alive") && document.querySelector("#cluster-alive").textContent === "3 of 3"`)
	waitJS(t, ctx, `!!document.querySelector("#partitions") && document.querySelector("#cluster-leader").textContent.startsWith("gw-")`)
	screenshot(t, ctx, "health-cluster")

	// Stop a follower; the leader's view is the one that can tell, so
	// watch the leader's console.
	leader := evalJS[string](t, ctx, `document.querySelector("#cluster-leader").textContent`)
	var lead, victim *consoleNode
	for i, n := range nodes {
		if fmt.Sprintf("gw-%c", 'a'+i) == leader {
			lead = n
		} else if victim == nil {
			victim = n
		}
	}
	if lead != a {
		login(t, ctx, lead, "root", lead.rootPW)
		waitJS(t, ctx, `location.pathname === "/ui/health" && !!document.querySelector("#cluster-alive")`)
	}
	victim.stop()
	waitJS(t, ctx, `document.querySelector("#cluster-alive").textContent === "2 of 3"`)
	waitJS(t, ctx, `Array.from(document.querySelectorAll("#members tbody tr")).some(r => r.textContent.includes("unreachable"))`)
	screenshot(t, ctx, "health-cluster-member-down")

	do(t, ctx, chromedp.Click(chromedp.CSS(`#members a[href="/ui/health/node/`+leader+`"]`)))
	waitJS(t, ctx, `location.pathname === "/ui/health/node/`+leader+`" && document.querySelector("h1").textContent === "Node `+leader+`"`)
}
