package appliance_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Mqtt.MaxConnectionsPerListener, set through the environment, reaches the
// broker: with 1, a second mosquitto_sub on the TCP listener is refused
// (MQTT 5: 0x97 quota exceeded; MQTT 3.1.1: 3 server unavailable), and
// /metrics counts the refusals.
func TestMaxConnectionsPerListenerFromEnv(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	n, ip := startNode(t, map[string]string{
		"COREFLUX_MQTT_MAX_CONNECTIONS_PER_LISTENER": "1",
		"COREFLUX_OPS_SYS_INTERVAL_SECONDS":          "0",
	})
	ctx, cancel := context.WithCancel(context.Background())
	first := exec.CommandContext(ctx, sub, "-h", ip, "-i", "first", "-t", "limits/#")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); first.Wait() })
	eventually(t, 5*time.Second, func() error {
		if c := n.Broker.Stats().Connections.Load(); c != 1 {
			return fmt.Errorf("%d connections, want the first mosquitto_sub", c)
		}
		return nil
	})
	for _, tc := range []struct{ version, want string }{
		{"mqttv5", "quota exceeded"},
		{"mqttv311", "unavailable"},
	} {
		out, err := exec.Command(sub, "-h", ip, "-V", tc.version, "-i", "second-"+tc.version, "-t", "limits/#", "-W", "5").CombinedOutput()
		if err == nil || !strings.Contains(strings.ToLower(string(out)), tc.want) {
			t.Fatalf("second mosquitto_sub %s: %v %q, want refused with %q", tc.version, err, out, tc.want)
		}
	}
	if got := scrape(t, ip)["gantry_connections_refused_total"]; got != 2 {
		t.Fatalf("gantry_connections_refused_total = %v, want 2", got)
	}
}
