package webui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// setEditor replaces the editor's text as a paste would.
func setEditor(t *testing.T, ctx context.Context, src string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.lotEditor.dispatch({changes: {from: 0, to: window.lotEditor.state.doc.length, insert: `+jsString(src)+`}}), null`))
}

// TestBrowserLoTEditor: a syntax error is shown where it is as you type,
// by the node's own parser; a draft survives a reload; deploy runs the
// action on the node.
func TestBrowserLoTEditor(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 900)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)

	do(t, ctx, chromedp.Navigate(cn.base+"lot/edit?kind=action"))
	waitJS(t, ctx, `!!window.lotEditor && !!document.querySelector(".cm-content")`)
	setEditor(t, ctx, "DEFINE ACTION Echo\nON TOPIC \"in/#\" DO\n    PUBLSH TOPIC \"out/\" + TOPIC POSITION 2 WITH PAYLOAD\n")
	waitJS(t, ctx, `document.querySelector("#diagnostics").textContent.startsWith("Line 3, column 5: error")`)
	waitJS(t, ctx, `!!document.querySelector(".cm-lintRange-error")`)
	screenshot(t, ctx, "lot-editor-error")

	// Fix it by typing, as a person would: select the misspelt word and
	// type over it.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const v = window.lotEditor, l = v.state.doc.line(3);
		v.focus(); v.dispatch({selection: {anchor: l.from + 4, head: l.from + 10}}); })()`))
	do(t, ctx, chromedp.KeyEvent("PUBLISH"))
	waitJS(t, ctx, `document.querySelector("#diagnostics").textContent === "No problems found."`)
	waitJS(t, ctx, `document.querySelector("#src").value.includes("    PUBLISH TOPIC")`)
	waitJS(t, ctx, `document.querySelector("#draft-status").textContent === "Draft saved on the node"`)

	// The draft is on the node: a reload brings it back.
	do(t, ctx, chromedp.Reload())
	waitJS(t, ctx, `!!window.lotEditor && window.lotEditor.state.doc.toString().includes("    PUBLISH TOPIC")`)
	waitJS(t, ctx, `!!document.querySelector("#draft-note")`)

	got := make(chan string, 1)
	sub, err := cn.mqttConnect("root", cn.rootPW)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Disconnect(0)
	sub.Subscribe("out/#", 0, func(_ mqtt.Client, m mqtt.Message) {
		select {
		case got <- m.Topic() + " " + string(m.Payload()):
		default:
		}
	}).Wait()

	do(t, ctx, chromedp.Click(chromedp.CSS("#deploy")))
	waitJS(t, ctx, `!!document.querySelector("#deploy-flash") && document.querySelector("#deploy-flash").textContent === "Deployed action Echo."`)
	screenshot(t, ctx, "lot-editor")
	if evalJS[bool](t, ctx, `!!document.querySelector("#draft-note")`) {
		t.Error("the draft is still shown after the deploy")
	}

	sub.Publish("in/press", 0, false, "hello").Wait()
	select {
	case m := <-got:
		if m != "out/press hello" {
			t.Fatalf("the deployed action published %q", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deployed action did not run")
	}

	do(t, ctx, chromedp.Navigate(cn.base+"lot"))
	waitJS(t, ctx, `Array.from(document.querySelectorAll("#lot-list tbody tr")).some(r => r.textContent.includes("Echo") && r.textContent.includes("running"))`)
	checkLayout(t, ctx)

	// The list follows what is deployed by others, without a reload.
	sub.Publish("$SYS/Coreflux/Command", 0, false, `-addAction DEFINE ACTION Heartbeat ON EVERY 1 MINUTE DO PUBLISH TOPIC "hb" WITH 1`).Wait()
	waitJS(t, ctx, `document.querySelector("#lot-list").textContent.includes("Heartbeat")`)
	screenshot(t, ctx, "lot-list")

	// Remove asks first, on a page of its own; Enter confirms.
	do(t, ctx, chromedp.Click(chromedp.CSS(`a[aria-label="Remove action Echo"]`)))
	waitJS(t, ctx, `location.pathname === "/ui/lot/remove" && document.activeElement.id === "confirm-yes"`)
	do(t, ctx, chromedp.KeyEvent("\r"))
	waitJS(t, ctx, `location.pathname === "/ui/lot" && !document.querySelector("#lot-list").textContent.includes("Echo")`)
}

// TestBrowserDeployRefused: a deploy the node refuses shows its errors with
// line and column, and keeps the text.
func TestBrowserDeployRefused(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"lot/edit?kind=action"))
	waitJS(t, ctx, `!!window.lotEditor`)
	setEditor(t, ctx, "DEFINE ACTION Bad\nON EVERY 1 SECOND DO\n    PUBLISH TOPIC \"a/#\" WITH 1\n")
	do(t, ctx, chromedp.Click(chromedp.CSS("#deploy")))
	waitJS(t, ctx, `!!document.querySelector("#deploy-errors")`)
	if txt := evalJS[string](t, ctx, `document.querySelector("#deploy-errors").textContent`); !containsAll(txt, "Not deployed", "Line 3") {
		t.Fatalf("errors shown: %q", txt)
	}
	waitJS(t, ctx, `window.lotEditor.state.doc.toString().includes("a/#")`)
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
