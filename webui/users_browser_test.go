package webui_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestBrowserUsers: an administrator adds a user, who can log in, sees no
// administrator controls, and changes their own password; then the
// administrator removes them.
func TestBrowserUsers(t *testing.T) {
	cn := startConsoleNode(t, true)
	ctx := newBrowser(t, 1024, 768)
	login(t, ctx, cn, "root", cn.rootPW)
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"users"))
	waitJS(t, ctx, `!!document.querySelector("#add-user")`)
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#new-name"), "operator"),
		chromedp.SendKeys(chromedp.CSS("#new-password"), "shift-A-2026"),
		chromedp.SendKeys(chromedp.CSS("#new-password2"), "shift-A-2026"),
		chromedp.Click(chromedp.CSS(`#add-user button[type=submit]`)))
	waitJS(t, ctx, `!!document.querySelector("#users-flash") && document.querySelector("#users-flash").textContent === "User operator added."`)
	checkLayout(t, ctx)
	screenshot(t, ctx, "users")
	if _, ok := cn.n.Users.Lookup("operator"); !ok {
		t.Fatal("operator not in the user store")
	}

	do(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)))
	waitJS(t, ctx, `location.pathname === "/ui/login"`)
	login(t, ctx, cn, "operator", "shift-A-2026")
	waitJS(t, ctx, `location.pathname === "/ui/health"`)
	do(t, ctx, chromedp.Navigate(cn.base+"users"))
	waitJS(t, ctx, `!!document.querySelector("#change-password")`)
	if evalJS[bool](t, ctx, `!!document.querySelector("#add-user") || !!document.querySelector('form[action="/ui/users/remove"]')`) {
		t.Fatal("a user who is not an administrator sees the administrator's forms")
	}
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#pw-current"), "shift-A-2026"), chromedp.SendKeys(chromedp.CSS("#pw-new"), "shift-B-2026"), chromedp.SendKeys(chromedp.CSS("#pw-new2"), "shift-B-2026"),
		chromedp.Click(chromedp.CSS(`#change-password button[type=submit]`)))
	waitJS(t, ctx, `!!document.querySelector("#users-flash") && document.querySelector("#users-flash").textContent === "Password of operator changed."`)
	c, err := cn.mqttConnect("operator", "shift-B-2026")
	if err != nil {
		t.Fatalf("MQTT login with the changed password: %v", err)
	}
	c.Disconnect(0)

	// Not an administrator: no deploy, even with the session's own token.
	do(t, ctx, chromedp.Navigate(cn.base+"lot/edit?kind=action"))
	waitJS(t, ctx, `!!window.lotEditor`)
	if evalJS[bool](t, ctx, `!!document.querySelector("#deploy")`) {
		t.Fatal("deploy button shown to a user who is not an administrator")
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => (await fetch("/ui/lot/deploy", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content},
		body: "src=" + encodeURIComponent('DEFINE ACTION X ON EVERY 1 SECOND DO PUBLISH TOPIC "x" WITH 1')})).status)()`,
		func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusForbidden {
		t.Fatalf("deploy by a user who is not an administrator: %v, want 403", status)
	}
}

// TestRemoveUserEndsSessions: a removed user's session ends at once.
func TestRemoveUserEndsSessions(t *testing.T) {
	cn := startConsoleNode(t, true)
	if err := cn.n.Users.Add("temp", "temporary-1", false); err != nil {
		t.Fatal(err)
	}
	admin, user := newClient(t), newClient(t)
	loginHTTP(t, admin, cn, "root", cn.rootPW)
	loginHTTP(t, user, cn, "temp", "temporary-1")
	tok := getToken(t, admin, cn.base+"users")
	if code, body := postForm(t, admin, cn.base+"users/remove", url.Values{"csrf": {tok}, "name": {"temp"}}); code != http.StatusSeeOther {
		t.Fatalf("remove: %d %s", code, body)
	}
	resp, err := user.Get(cn.base + "health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("removed user's session: %d, want a redirect to the login", resp.StatusCode)
	}
}

func loginHTTP(t *testing.T, c *http.Client, cn *consoleNode, user, password string) {
	t.Helper()
	tok := getToken(t, c, cn.base+"login")
	if code, _ := postForm(t, c, cn.base+"login", url.Values{"csrf": {tok}, "username": {user}, "password": {password}}); code != http.StatusSeeOther {
		t.Fatalf("login %s: %d", user, code)
	}
}
