package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"gantry/lot/command"
	"gantry/lot/defs"
)

type routeListener struct {
	Connector, Type, Address, State, Error string
	Up                                     bool
}

// TestRouteListeners: two MODBUS_SERVER connectors on one port; the one
// that binds is up, the other failed (not retried), and both are listed
// under routeListeners in GET /cluster, on the retained
// $SYS/Coreflux/Cluster/RouteListeners and as coreflux_route_listener_up.
func TestRouteListeners(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	n, ip := startNode(t, nil)
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	src := func(name string) string {
		return fmt.Sprintf(`DEFINE CONNECTOR %s WITH TYPE MODBUS_SERVER
    ADD MODBUS_SERVER_CONFIG
        WITH BIND_IP "%s"
        WITH PORT '%s'
    ADD MAPPING Plant
        ADD TAG Temp
            WITH SOURCE_TOPIC "plc1/temp"
            WITH ADDRESS "0"
            WITH DATA_TYPE "INT16"
`, name, ip, port)
	}
	view := func() ([]routeListener, error) {
		resp, err := http.Get("http://" + ip + ":9100/cluster")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var v struct {
			RouteListeners *[]routeListener `json:"routeListeners"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return nil, err
		}
		if v.RouteListeners == nil {
			return nil, fmt.Errorf("GET /cluster has no routeListeners")
		}
		return *v.RouteListeners, nil
	}
	if ls, err := view(); err != nil || len(ls) != 0 {
		t.Fatalf("before any server connector: %v %+v", err, ls)
	}
	ctx := context.Background()
	if _, err := n.LoT.Add(ctx, command.Caller{User: "root"}, defs.Connector, src("ScadaA")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		ls, err := view()
		if err != nil || len(ls) != 1 || !ls[0].Up {
			return fmt.Errorf("ScadaA not up: %v %+v", err, ls)
		}
		return nil
	})
	if _, err := n.LoT.Add(ctx, command.Caller{User: "root"}, defs.Connector, src("ScadaB")); err != nil {
		t.Fatal(err)
	}
	check := func(ls []routeListener) error {
		if len(ls) != 2 {
			return fmt.Errorf("%d listeners: %+v", len(ls), ls)
		}
		a, b := ls[0], ls[1]
		if a.Connector != "ScadaA" || !a.Up || a.State != "Listening" || a.Type != "MODBUS_SERVER" {
			return fmt.Errorf("ScadaA: %+v", a)
		}
		if b.Connector != "ScadaB" || b.Up || b.State != "Failed" || b.Error == "" {
			return fmt.Errorf("ScadaB: %+v", b)
		}
		return nil
	}
	eventually(t, 10*time.Second, func() error {
		ls, err := view()
		if err != nil {
			return err
		}
		return check(ls)
	})
	ls, _ := view()
	t.Logf("GET /cluster routeListeners: %+v", ls)
	eventually(t, 10*time.Second, func() error {
		out, err := exec.Command(sub, "-h", ip, "-t", "$SYS/Coreflux/Cluster/RouteListeners", "-C", "1", "-W", "5").CombinedOutput()
		if err != nil {
			return fmt.Errorf("mosquitto_sub: %v %s", err, out)
		}
		var retained []routeListener
		if err := json.Unmarshal(out, &retained); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return check(retained)
	})
	if m := scrape(t, ip); m["coreflux_route_listener_up"] != 1 {
		t.Errorf("coreflux_route_listener_up sums to %v, want 1 (one up, one failed)", m["coreflux_route_listener_up"])
	}
}
