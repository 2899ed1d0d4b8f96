package webui_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gantry/broker/auth"
)

// TestBrowserWizard: on a fresh node every page leads to the wizard; it
// survives a reload, shows what is wrong, and applies: root's random
// password is replaced, MQTT takes the new one, and the console logs in.
func TestBrowserWizard(t *testing.T) {
	cn := startConsoleNode(t, false)
	initial, err := os.ReadFile(filepath.Join(cn.dataDir, auth.InitialRootFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, 1024, 768)
	darkTablet(t, ctx)
	do(t, ctx, chromedp.Navigate(cn.base+"lot"))
	waitJS(t, ctx, `location.pathname === "/ui/setup" && !!document.querySelector("#password")`)
	screenshot(t, ctx, "setup-password")

	// Passwords that differ are refused with a message; the keyboard alone
	// fills the form.
	waitJS(t, ctx, `document.activeElement.id === "password"`)
	do(t, ctx, chromedp.KeyEvent("cabinet-7-pass"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("cabinet-7-pasS"), chromedp.KeyEvent("\r"))
	waitJS(t, ctx, `!!document.querySelector("#setup-errors") && document.querySelector("#setup-errors").textContent.includes("differ")`)
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#password"), "cabinet-7-pass"), chromedp.SendKeys(chromedp.CSS("#password2"), "cabinet-7-pass"),
		chromedp.Click(chromedp.CSS("#setup-next")))

	waitJS(t, ctx, `!!document.querySelector("#nodeName")`)
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#nodeName"), "press-line-2"), chromedp.Click(chromedp.CSS("#setup-next")))

	// A cluster without a secret is refused.
	waitJS(t, ctx, `!!document.querySelector("#clusterId")`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#mode-cluster")), chromedp.SetValue(chromedp.CSS("#sharedSecret"), "short"),
		chromedp.Click(chromedp.CSS("#setup-next")))
	waitJS(t, ctx, `!!document.querySelector("#setup-errors") && document.querySelector("#setup-errors").textContent.includes("16 characters")`)
	screenshot(t, ctx, "setup-cluster-error")
	do(t, ctx, chromedp.Click(chromedp.CSS(`input[name=mode][value=standalone]`)), chromedp.Click(chromedp.CSS("#setup-next")))

	// Standalone skips discovery. A reload keeps the step.
	waitJS(t, ctx, `!!document.querySelector("#durability")`)
	do(t, ctx, chromedp.Reload())
	waitJS(t, ctx, `!!document.querySelector("#durability") && document.querySelector('[aria-current="step"]').textContent === "Durability"`)
	checkLayout(t, ctx)
	do(t, ctx, chromedp.Click(chromedp.CSS("#setup-next")))

	waitJS(t, ctx, `!!document.querySelector("#review-node")`)
	if got := evalJS[string](t, ctx, `document.querySelector("#review-node").textContent`); got != "press-line-2" {
		t.Fatalf("review shows node %q", got)
	}
	if evalJS[bool](t, ctx, `!!document.querySelector("#setup-errors")`) {
		t.Fatalf("review shows errors: %s", evalJS[string](t, ctx, `document.querySelector("#setup-errors").textContent`))
	}
	screenshot(t, ctx, "setup-review")
	do(t, ctx, chromedp.Click(chromedp.CSS("#setup-next")))
	waitJS(t, ctx, `location.pathname === "/ui/health" && !!document.querySelector("#node-tiles")`)

	// MQTT: the new password works, the random one no longer does.
	c, err := cn.mqttConnect("root", "cabinet-7-pass")
	if err != nil {
		t.Fatalf("MQTT login with the new password: %v", err)
	}
	c.Disconnect(0)
	if _, err := cn.mqttConnect("root", strings.TrimSpace(string(initial))); err == nil {
		t.Fatal("MQTT login with the initial random password still works")
	}
	if _, err := os.Stat(filepath.Join(cn.dataDir, auth.InitialRootFile)); !os.IsNotExist(err) {
		t.Errorf("initial password file still there: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(cn.dataDir, "setup.json"))
	if err != nil || !strings.Contains(string(b), `"press-line-2"`) {
		t.Fatalf("setup.json: %v %s", err, b)
	}
	// Setup is over: the wizard is gone.
	do(t, ctx, chromedp.Navigate(cn.base+"setup"))
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
}
