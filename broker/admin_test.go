package broker_test

import (
	"errors"
	"fmt"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// TestSessionsList: real v5 and v3 clients, an offline persistent session
// and an in-process client are listed, searched and paged as an operator
// sees them.
func TestSessionsList(t *testing.T) {
	srv := startServer(t, broker.Options{})
	v5 := connectV5(t, srv.addr, &paho.Connect{ClientID: "press-line-1", CleanStart: true, KeepAlive: 30,
		Username: "alice", UsernameFlag: true})
	v5.sub(t, "plant/#", 1)
	connectV3(t, srv.addr, "press-line-2")
	gone := connectV5(t, srv.addr, &paho.Connect{ClientID: "scada-offline", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: uint32Ptr(600)}})
	gone.sub(t, "a/b", 0)
	gone.close()
	in := srv.NewClient("$lot/x", broker.OriginBroker, nil)
	t.Cleanup(func() { in.Close() })

	eventually(t, waitTimeout, func() error {
		list, total := srv.Sessions(broker.SessionFilter{}, 0)
		if total != 3 || len(list) != 3 {
			return fmt.Errorf("listed %d of %d sessions: %+v", len(list), total, list)
		}
		if list[2].Connected || list[2].DisconnectedAt.IsZero() {
			return fmt.Errorf("scada-offline still connected: %+v", list[2])
		}
		return nil
	})
	list, _ := srv.Sessions(broker.SessionFilter{}, 0)
	p1, p2, off := list[0], list[1], list[2]
	if p1.ClientID != "press-line-1" || !p1.Connected || p1.Username != "alice" || p1.Version != 5 ||
		p1.Subscriptions != 1 || p1.Listener != "tcp" || p1.Remote == "" {
		t.Errorf("press-line-1 = %+v", p1)
	}
	if p2.ClientID != "press-line-2" || !p2.Connected || p2.Version != 4 {
		t.Errorf("press-line-2 = %+v", p2)
	}
	if off.ClientID != "scada-offline" || off.Expiry != 600 || off.Subscriptions != 1 || off.Remote != "" {
		t.Errorf("scada-offline = %+v", off)
	}

	cases := []struct {
		name  string
		f     broker.SessionFilter
		limit int
		want  []string
		total int
	}{
		{"search by id, any case", broker.SessionFilter{Search: "PRESS"}, 0, []string{"press-line-1", "press-line-2"}, 2},
		{"search by user", broker.SessionFilter{Search: "alic"}, 0, []string{"press-line-1"}, 1},
		{"connected only", broker.SessionFilter{ConnectedOnly: true}, 0, []string{"press-line-1", "press-line-2"}, 2},
		{"limit keeps the total", broker.SessionFilter{}, 1, []string{"press-line-1"}, 3},
		{"in-process too", broker.SessionFilter{InProcess: true, Search: "$lot"}, 0, []string{"$lot/x"}, 1},
		{"no match", broker.SessionFilter{Search: "nobody"}, 0, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, total := srv.Sessions(tc.f, tc.limit)
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ClientID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.want) || total != tc.total {
				t.Errorf("got %v of %d, want %v of %d", ids, total, tc.want, tc.total)
			}
		})
	}
}

func uint32Ptr(v uint32) *uint32 { return &v }

// TestDisconnectAdministrative: a v5 client gets DISCONNECT 0x98 and its
// will is published; a v3 client's socket closes; an offline or unknown
// client is ErrNotConnected, and so is an in-process one.
func TestDisconnectAdministrative(t *testing.T) {
	srv := startServer(t, broker.Options{})
	watcher := connectV5(t, srv.addr, &paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30})
	watcher.sub(t, "wills/#", 0)

	v5 := connectV5(t, srv.addr, &paho.Connect{ClientID: "kick-me", CleanStart: true, KeepAlive: 30,
		WillMessage: &paho.WillMessage{Topic: "wills/kick-me", Payload: []byte("gone")}})
	if err := srv.Disconnect("kick-me", 0); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	d := recv(t, v5.disc, "the server's DISCONNECT")
	if d.ReasonCode != byte(packet.AdministrativeAction) {
		t.Errorf("DISCONNECT reason = 0x%02X, want 0x98", d.ReasonCode)
	}
	if m := recv(t, watcher.msgs, "kick-me's will"); string(m.Payload) != "gone" {
		t.Errorf("will payload %q", m.Payload)
	}
	if list, _ := srv.Sessions(broker.SessionFilter{Search: "kick-me", ConnectedOnly: true}, 0); len(list) != 0 {
		t.Errorf("kick-me still listed as connected: %+v", list)
	}

	lost := make(chan error, 1)
	connectV3(t, srv.addr, "kick-v3", func(o *mqtt.ClientOptions) {
		o.SetConnectionLostHandler(func(_ mqtt.Client, err error) { lost <- err })
	})
	if err := srv.Disconnect("kick-v3", packet.AdministrativeAction); err != nil {
		t.Fatalf("Disconnect v3: %v", err)
	}
	recv(t, lost, "the v3 client's connection loss")

	in := srv.NewClient("$lot/y", broker.OriginBroker, nil)
	t.Cleanup(func() { in.Close() })
	for _, id := range []string{"kick-me", "nobody", "$lot/y"} {
		if err := srv.Disconnect(id, 0); !errors.Is(err, broker.ErrNotConnected) {
			t.Errorf("Disconnect(%q) = %v, want ErrNotConnected", id, err)
		}
	}
	if err := srv.Disconnect("watcher", packet.DisconnectWithWill); err == nil {
		t.Error("Disconnect with reason 0x04 accepted")
	}
}
