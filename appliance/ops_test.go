package appliance_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, ip string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + ip + ":9100/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				out[name] += m.Counter.GetValue()
			case m.Gauge != nil:
				out[name] += m.Gauge.GetValue()
			}
		}
	}
	return out
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	// No $SYS topics: they would add retained messages of their own.
	_, ip := startNode(t, map[string]string{"COREFLUX_OPS_SYS_INTERVAL_SECONDS": "0"})
	before := scrape(t, ip)
	for _, name := range []string{"gantry_messages_received_total", "gantry_connections", "gantry_retained_messages", "go_goroutines", "gantry_users"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("/metrics has no %s", name)
		}
	}
	for i := 0; i < 3; i++ {
		if out, err := exec.Command(pub, "-h", ip, "-t", "m/x", "-m", "v", "-r", "-q", "1").CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub: %v %s", err, out)
		}
	}
	after := scrape(t, ip)
	if d := after["gantry_messages_received_total"] - before["gantry_messages_received_total"]; d != 3 {
		t.Errorf("messages received moved by %v, want 3", d)
	}
	if d := after["gantry_connects_total"] - before["gantry_connects_total"]; d != 3 {
		t.Errorf("connects moved by %v, want 3", d)
	}
	if d := after["gantry_retained_messages"] - before["gantry_retained_messages"]; d != 1 {
		t.Errorf("retained moved by %v, want 1 (three publishes to one topic)", d)
	}
	if after["gantry_users"] != 1 {
		t.Errorf("users = %v, want 1 (root)", after["gantry_users"])
	}
}

func TestHealthAndInfo(t *testing.T) {
	_, ip := startNode(t, nil)
	resp, err := http.Get("http://" + ip + ":9100/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + ip + ":9100/health/ready")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health/ready: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + ip + ":9100/info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Version   string            `json:"version"`
		Listeners map[string]string `json:"listeners"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || info.Listeners["mqtt"] != ip+":1883" {
		t.Fatalf("/info = %+v", info)
	}
}

// TestSysTopics: the retained $SYS/broker statistics are readable by an
// ordinary client, $SYS/# as a whole is not, and the counters follow
// traffic.
func TestSysTopics(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	pub := needTool(t, "mosquitto_pub")
	_, ip := startNode(t, map[string]string{"COREFLUX_OPS_SYS_INTERVAL_SECONDS": "1"})
	read := func(topic string) string {
		t.Helper()
		out, err := exec.Command(sub, "-h", ip, "-t", topic, "-C", "1", "-W", "5").CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_sub %s: %v %s", topic, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if v := read("$SYS/broker/version"); !strings.HasPrefix(v, "gantry ") {
		t.Fatalf("version %q", v)
	}
	exec.Command(pub, "-h", ip, "-t", "a/b", "-m", "x").Run()
	eventually(t, 5*time.Second, func() error {
		if v := read("$SYS/broker/messages/received"); v == "0" {
			return fmt.Errorf("messages/received still %s", v)
		}
		return nil
	})
	// $SYS/# is granted to an ordinary client without what it may not
	// read: the statistics arrive (retained), the user list does not.
	out, _ := exec.Command(sub, "-h", ip, "-t", "$SYS/#", "-v", "-W", "2").CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "$SYS/broker/") && !strings.HasPrefix(l, "Timed out") {
			t.Errorf("$SYS/# for an ordinary client delivered %q", l)
		}
	}
	if !strings.Contains(string(out), "$SYS/broker/version gantry") {
		t.Errorf("$SYS/# for an ordinary client: %q, want the statistics", out)
	}
}

// eventually polls f until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStoreMetrics: with durability, /metrics carries the store's commit
// counters and latency histogram, and they move when a retained message
// is stored.
func TestStoreMetrics(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	_, ip := startNode(t, map[string]string{"COREFLUX_DURABILITY_ENABLED": "true", "COREFLUX_OPS_SYS_INTERVAL_SECONDS": "0"})
	before := scrape(t, ip)
	if _, ok := before["gantry_store_commits_total"]; !ok {
		t.Fatal("/metrics has no gantry_store_commits_total with durability on")
	}
	if out, err := exec.Command(pub, "-h", ip, "-t", "s/x", "-m", "v", "-r", "-q", "1").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	after := scrape(t, ip)
	if after["gantry_store_commits_total"] <= before["gantry_store_commits_total"] {
		t.Fatalf("store commits %v -> %v: a retained QoS 1 publish was not committed", before["gantry_store_commits_total"], after["gantry_store_commits_total"])
	}
}

// TestStoreWithdrawnMetric: the broker's count of queued deliveries taken
// back after a failed write (broker.Stats.StoreWithdrawn, which the
// broker's durability tests drive) is on /metrics.
func TestStoreWithdrawnMetric(t *testing.T) {
	n, ip := startNode(t, map[string]string{"COREFLUX_DURABILITY_ENABLED": "true", "COREFLUX_OPS_SYS_INTERVAL_SECONDS": "0"})
	before, ok := scrape(t, ip)["gantry_store_withdrawn_total"]
	if !ok {
		t.Fatal("/metrics has no gantry_store_withdrawn_total")
	}
	n.Broker.Stats().StoreWithdrawn.Add(3)
	if got := scrape(t, ip)["gantry_store_withdrawn_total"]; got != before+3 {
		t.Fatalf("gantry_store_withdrawn_total = %v, want %v", got, before+3)
	}
}
