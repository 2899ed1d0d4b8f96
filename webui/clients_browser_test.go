package webui_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/eclipse/paho.golang/paho"
	svm "github.com/simonvetter/modbus"

	"gantry/lot/command"
	"gantry/lot/defs"
)

// TestBrowserClients: a real MQTT 5 client is listed on the clients page,
// found by search, and disconnected by the administrator: it receives
// DISCONNECT 0x98 (administrative action) and its session stays, offline.
func TestBrowserClients(t *testing.T) {
	cn := startConsoleNode(t, true)
	nc, err := net.DialTimeout("tcp", cn.ip+":1883", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	disc := make(chan *paho.Disconnect, 1)
	cli := paho.NewClient(paho.ClientConfig{Conn: nc, OnServerDisconnect: func(d *paho.Disconnect) { disc <- d }})
	expiry := uint32(600)
	cctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := cli.Connect(cctx, &paho.Connect{ClientID: "press-line-7", CleanStart: true, KeepAlive: 30,
		Username: "root", UsernameFlag: true, Password: []byte(cn.rootPW), PasswordFlag: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatalf("MQTT 5 connect: %v", err)
	}
	t.Cleanup(func() { cli.Disconnect(&paho.Disconnect{}) })
	if _, err := cli.Subscribe(cctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "plant/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}

	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"clients"))
	row := `document.querySelector('tr[data-client="press-line-7"]')`
	waitJS(t, ctx, `!!`+row+` && `+row+`.textContent.includes("connected") && `+row+`.textContent.includes("MQTT 5")`)
	if got := evalJS[string](t, ctx, row+`.cells[5].textContent.trim()`); got != "1" {
		t.Errorf("subscriptions shown: %q", got)
	}
	checkLayout(t, ctx)
	screenshot(t, ctx, "clients")

	// Search with the keyboard: a query that matches nothing, then one
	// that matches.
	do(t, ctx, chromedp.Focus(chromedp.CSS("#clients-q")), chromedp.KeyEvent("nobody-here\r"))
	waitJS(t, ctx, `location.search.includes("q=nobody-here") && !!document.querySelector("#clients-none")`)
	do(t, ctx, chromedp.Navigate(cn.base+"clients?q=PRESS&connected=1"))
	waitJS(t, ctx, `!!`+row)

	do(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-client="press-line-7"] button`)))
	waitJS(t, ctx, `!!document.querySelector("#clients-flash") && document.querySelector("#clients-flash").textContent === "Disconnected press-line-7."`)
	select {
	case d := <-disc:
		if d.ReasonCode != 0x98 {
			t.Errorf("DISCONNECT reason 0x%02X, want 0x98", d.ReasonCode)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client got no DISCONNECT")
	}
	// The filter (connected only) survived the post: the client is gone
	// from the list; without it, its session is listed offline.
	waitJS(t, ctx, `location.search.includes("connected=1") && !`+row)
	do(t, ctx, chromedp.Navigate(cn.base+"clients?q=press"))
	waitJS(t, ctx, `!!`+row+` && `+row+`.textContent.includes("offline")`)

	// Disconnecting a client that is not connected says so.
	status, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => (await fetch("/ui/clients/disconnect", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "client=press-line-7&csrf=" + encodeURIComponent(document.querySelector('meta[name="csrf-token"]').content)})).status)()`,
		func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
	if err != nil {
		t.Fatal(err)
	}
	if status != 422 {
		t.Errorf("disconnecting an offline client: HTTP %v, want 422", status)
	}
}

// holding is a Modbus TCP device (simonvetter/modbus) of 10 holding
// registers.
type holding struct {
	mu   sync.Mutex
	regs [10]uint16
}

func (h *holding) HandleCoils(*svm.CoilsRequest) ([]bool, error) { return nil, svm.ErrIllegalFunction }
func (h *holding) HandleDiscreteInputs(*svm.DiscreteInputsRequest) ([]bool, error) {
	return nil, svm.ErrIllegalFunction
}
func (h *holding) HandleInputRegisters(*svm.InputRegistersRequest) ([]uint16, error) {
	return nil, svm.ErrIllegalFunction
}
func (h *holding) HandleHoldingRegisters(q *svm.HoldingRegistersRequest) ([]uint16, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if int(q.Addr)+int(q.Quantity) > len(h.regs) {
		return nil, svm.ErrIllegalDataAddress
	}
	if q.IsWrite {
		copy(h.regs[q.Addr:], q.Args)
		return nil, nil
	}
	return append([]uint16(nil), h.regs[q.Addr:q.Addr+q.Quantity]...), nil
}

// TestBrowserConnectors: a Modbus TCP connector on a real Modbus server;
// the connectors page shows each tag's value, updates it live when the
// register changes, and shows the error of a tag the device refuses.
func TestBrowserConnectors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dev := &holding{}
	dev.regs[5] = 215
	srv, err := svm.NewServer(&svm.ServerConfiguration{URL: "tcp://" + addr, MaxClients: 4, Logger: log.New(io.Discard, "", 0)}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	cn := startConsoleNode(t, true)
	_, port, _ := net.SplitHostPort(addr)
	src := fmt.Sprintf(`DEFINE CONNECTOR Press1 WITH TYPE MODBUS_TCP
    ADD MODBUS_CONFIG
        WITH HOST "127.0.0.1"
        WITH PORT '%s'
    ADD MAPPING Fast
        WITH EVERY 100 MILLISECONDS
        ADD TAG Temperature
            WITH ADDRESS "5"
            WITH DATA_TYPE "INT16"
            WITH SOURCE_TOPIC "press1/temp"
            WITH SCALING "0.1"
            WITH UNIT "°C"
        ADD TAG Missing
            WITH ADDRESS "40"
            WITH DATA_TYPE "UINT16"
            WITH SOURCE_TOPIC "press1/missing"
`, port)
	if _, err := cn.n.LoT.Add(context.Background(), command.Caller{User: "root"}, defs.Connector, src); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"connectors"))
	temp := `document.querySelector('#connector-Press1 tr[data-tag="Temperature"] [data-value]')`
	waitJS(t, ctx, `!!`+temp+` && `+temp+`.textContent.trim() === "21.5 °C"`)
	waitJS(t, ctx, `document.querySelector('#connector-Press1 tr[data-tag="Missing"]').textContent.includes("illegal data address")`)
	waitJS(t, ctx, `document.querySelector('#connector-Press1 [data-state]').textContent === "degraded"`)
	checkLayout(t, ctx)
	screenshot(t, ctx, "connectors")
	dev.mu.Lock()
	dev.regs[5] = 300
	dev.mu.Unlock()
	waitJS(t, ctx, temp+`.textContent.trim() === "30 °C"`) // no reload: the page refreshes itself

	// The health page lists the rest of GET /cluster as it comes.
	do(t, ctx, chromedp.Navigate(cn.base+"health"))
	waitJS(t, ctx, `!!document.querySelector("#extra-routeListeners") && document.querySelector("#cluster-extra").textContent.includes("Voters")`)
}
