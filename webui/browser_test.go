package webui_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLogin: a wrong password is refused with a message, the right
// one logs in, with the keyboard only.
func TestBrowserLogin(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 768)

	login(t, ctx, cn, "root", "not-the-password")
	waitJS(t, ctx, `!!document.querySelector("#login-error")`)
	if msg := evalJS[string](t, ctx, `document.querySelector("#login-error").textContent`); msg != "Wrong user name or password." {
		t.Fatalf("error shown: %q", msg)
	}
	if inv := evalJS[string](t, ctx, `document.querySelector("#password").getAttribute("aria-invalid")`); inv != "true" {
		t.Errorf("password field aria-invalid = %q, want true", inv)
	}
	screenshot(t, ctx, "login-refused")

	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	checkLayout(t, ctx)
}

// TestBrowserHealthLive: the health page follows the node's counters over
// SSE, and shows a banner when the node goes away.
func TestBrowserHealthLive(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	waitJS(t, ctx, `document.querySelector("#live-stamp").textContent.startsWith("Updated")`)
	before := evalJS[string](t, ctx, `document.querySelector("#node-msgs-in").textContent`)

	c, err := cn.mqttConnect("root", cn.rootPW)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(0)
	for range 20 {
		c.Publish("plant/line1/temp", 0, false, "21.5").Wait()
	}
	waitJS(t, ctx, `document.querySelector("#node-msgs-in").textContent !== `+jsString(before))
	waitJS(t, ctx, `document.querySelector("#node-connections").textContent === "1"`)
	waitJS(t, ctx, `!!document.querySelector("#rate-chart canvas")`)
	if !evalJS[bool](t, ctx, `document.querySelector("#conn-banner").hidden`) {
		t.Fatal("connection-lost banner shown while the node answers")
	}
	screenshot(t, ctx, "health")

	darkTablet(t, ctx)
	do(t, ctx, chromedp.Reload())
	waitJS(t, ctx, `document.querySelector("#live-stamp").textContent.startsWith("Updated")`)
	// The chart starts from the node's recent history, not empty.
	waitJS(t, ctx, `!!document.querySelector("#rate-chart canvas")`)
	if bg := evalJS[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(18, 18, 18)" {
		t.Errorf("dark mode background = %s", bg)
	}
	checkLayout(t, ctx)
	screenshot(t, ctx, "health-tablet-dark")

	cn.stop()
	waitJS(t, ctx, `!document.querySelector("#conn-banner").hidden`)
	if msg := evalJS[string](t, ctx, `document.querySelector("#conn-banner").textContent`); len(msg) < 20 {
		t.Fatalf("banner text %q", msg)
	}
	screenshot(t, ctx, "health-connection-lost")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBrowserKeyboard: the first Tab reaches the skip link, which shows
// itself and jumps to the content; focus is always visible.
func TestBrowserKeyboard(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"users"))
	waitJS(t, ctx, `!!document.querySelector("#users")`)
	do(t, ctx, chromedp.KeyEvent("\t"))
	waitJS(t, ctx, `document.activeElement.classList.contains("skip")`)
	if left := evalJS[float64](t, ctx, `document.activeElement.getBoundingClientRect().left`); left < 0 {
		t.Fatalf("focused skip link is off screen (left %v)", left)
	}
	if outline := evalJS[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`); outline != "solid" {
		t.Errorf("focused skip link outline %q, want solid", outline)
	}
	do(t, ctx, chromedp.KeyEvent("\r"))
	waitJS(t, ctx, `location.hash === "#main"`)
	// Tab from the content goes to the first control in it, not back to
	// the navigation.
	do(t, ctx, chromedp.KeyEvent("\t"))
	waitJS(t, ctx, `document.querySelector("main").contains(document.activeElement) && document.activeElement !== document.querySelector("main")`)
	// The navigation is reachable and activates with Enter.
	do(t, ctx, chromedp.Focus(chromedp.CSS(`nav a[href="/ui/lot"]`)), chromedp.KeyEvent("\r"))
	waitJS(t, ctx, `location.pathname === "/ui/lot"`)
}

// TestBrowserSessionEnds: a health page left open goes to the login when
// its user is removed.
func TestBrowserSessionEnds(t *testing.T) {
	cn := startConsoleNode(t, true)
	if err := cn.n.Users.Add("viewer", "viewer-pass-1", false); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "viewer", "viewer-pass-1")
	waitJS(t, ctx, `location.pathname === "/ui/health" && document.querySelector("#live-stamp").textContent.startsWith("Updated")`)
	if err := cn.n.Users.Remove("viewer"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `location.pathname === "/ui/login"`)
}
