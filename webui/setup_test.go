package webui_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupCluster walks the wizard's cluster path without a browser:
// seeds discovery, a bad seed refused by the configuration's own checks at
// review, then applied; setup.json is a configuration -config accepts.
func TestSetupCluster(t *testing.T) {
	cn := startConsoleNode(t, false)
	c := newClient(t)
	tok := getToken(t, c, cn.base+"setup")
	step := func(v url.Values, wantCode int) string {
		t.Helper()
		v.Set("csrf", tok)
		code, body := postForm(t, c, cn.base+"setup", v)
		if code != wantCode {
			t.Fatalf("step %s: %d, want %d\n%s", v.Get("step"), code, wantCode, body)
		}
		return body
	}
	step(url.Values{"step": {"password"}, "password": {"cabinet-7-pass"}, "password2": {"cabinet-7-pass"}}, http.StatusSeeOther)
	step(url.Values{"step": {"node"}, "nodeName": {"gw-a"}}, http.StatusSeeOther)
	step(url.Values{"step": {"cluster"}, "mode": {"cluster"}, "clusterId": {"cabinet-3"}, "sharedSecret": {"a-long-random-secret"}}, http.StatusSeeOther)
	body := step(url.Values{"step": {"discovery"}, "discovery": {"seeds"}}, http.StatusUnprocessableEntity)
	if !strings.Contains(body, "at least one seed") {
		t.Fatalf("no seeds: %s", body)
	}
	step(url.Values{"step": {"discovery"}, "discovery": {"seeds"}, "seeds": {"10.0.0.2:9200\nnot a seed"}}, http.StatusSeeOther)
	step(url.Values{"step": {"durability"}, "durability": {"on"}}, http.StatusSeeOther)
	body = step(url.Values{"step": {"review"}, "go": {"apply"}}, http.StatusUnprocessableEntity)
	if !strings.Contains(body, "Cluster.Seeds") {
		t.Fatalf("a bad seed was not refused by name at review:\n%s", body)
	}
	step(url.Values{"step": {"discovery"}, "discovery": {"seeds"}, "seeds": {"10.0.0.2:9200, 10.0.0.3:9200"}}, http.StatusSeeOther)
	step(url.Values{"step": {"review"}, "go": {"apply"}}, http.StatusSeeOther)

	b, err := os.ReadFile(filepath.Join(cn.dataDir, "setup.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cluster struct {
			Enabled             bool
			NodeName, ClusterId string
			Discovery           string
			Seeds               []string
		}
		Durability struct{ Enabled bool }
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Cluster.Enabled || got.Cluster.NodeName != "gw-a" || got.Cluster.ClusterId != "cabinet-3" || got.Cluster.Discovery != "seeds" ||
		len(got.Cluster.Seeds) != 2 || !got.Durability.Enabled {
		t.Fatalf("setup.json = %s", b)
	}
	if _, err := cn.mqttConnect("root", "cabinet-7-pass"); err != nil {
		t.Fatalf("MQTT with the new password: %v", err)
	}
}
