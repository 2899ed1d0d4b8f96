package webui_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// client is a browser without JavaScript: a cookie jar, no redirects
// followed.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// getToken fetches a page and returns its form's CSRF token.
func getToken(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := csrfInput.FindSubmatch(b)
	if m == nil {
		t.Fatalf("GET %s: %d, no CSRF token in\n%s", u, resp.StatusCode, b)
	}
	return string(m[1])
}

func postForm(t *testing.T, c *http.Client, u string, v url.Values) (int, string) {
	t.Helper()
	resp, err := c.PostForm(u, v)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCSRF: a post without the form's token is refused, before and after
// login, and changes nothing; a cross-site post is refused even with one.
func TestCSRF(t *testing.T) {
	cn := startConsoleNode(t, true)
	c := newClient(t)
	tok := getToken(t, c, cn.base+"login")
	if code, _ := postForm(t, c, cn.base+"login", url.Values{"username": {"root"}, "password": {cn.rootPW}}); code != http.StatusForbidden {
		t.Fatalf("login without token: %d, want 403", code)
	}
	if code, _ := postForm(t, c, cn.base+"login", url.Values{"username": {"root"}, "password": {cn.rootPW}, "csrf": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("login with token: %d, want 303", code)
	}
	tok = getToken(t, c, cn.base+"users")
	for _, p := range []string{"users/add", "lot/deploy", "logout"} {
		code, body := postForm(t, c, cn.base+p, url.Values{"name": {"mallory"}, "password": {"longenough1"}, "password2": {"longenough1"},
			"src": {"DEFINE ACTION X ON EVERY 1 SECOND DO PUBLISH TOPIC \"x\" WITH 1"}})
		if code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("POST %s without token: %d %q, want 403 naming CSRF", p, code, body)
		}
	}
	req, _ := http.NewRequest("POST", cn.base+"users/add", strings.NewReader(url.Values{"csrf": {tok}, "name": {"mallory"},
		"password": {"longenough1"}, "password2": {"longenough1"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %v %v, want 403", resp.StatusCode, err)
	}
	if _, ok := cn.n.Users.Lookup("mallory"); ok {
		t.Fatal("a refused post added a user")
	}
	// The same post with the token works.
	if code, body := postForm(t, c, cn.base+"users/add", url.Values{"csrf": {tok}, "name": {"op"}, "password": {"longenough1"}, "password2": {"longenough1"}}); code != http.StatusSeeOther {
		t.Fatalf("add user with token: %d %s", code, body)
	}
	if _, ok := cn.n.Users.Lookup("op"); !ok {
		t.Fatal("user op not added")
	}
}

// TestLoginLockout: after five wrong passwords from one address, even the
// right one is refused for a while.
func TestLoginLockout(t *testing.T) {
	cn := startConsoleNode(t, true)
	c := newClient(t)
	tok := getToken(t, c, cn.base+"login")
	for i := range 5 {
		code, body := postForm(t, c, cn.base+"login", url.Values{"csrf": {tok}, "username": {"root"}, "password": {"wrong"}})
		if code != http.StatusUnauthorized || !strings.Contains(body, "Wrong user name or password.") {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	code, body := postForm(t, c, cn.base+"login", url.Values{"csrf": {tok}, "username": {"root"}, "password": {cn.rootPW}})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") {
		t.Fatalf("right password after 5 failures: %d, want 429", code)
	}
	// MQTT shares the throttle: guesses cannot move over to it.
	if _, err := cn.mqttConnect("root", cn.rootPW); err == nil {
		t.Fatal("MQTT login from a locked-out address accepted")
	}
}

// TestPagesNeedLogin: every page but the login (and the wizard before
// setup) sends a stranger to the login page.
func TestPagesNeedLogin(t *testing.T) {
	cn := startConsoleNode(t, true)
	c := newClient(t)
	for _, p := range []string{"health", "health/events", "lot", "lot/edit", "users", "setup"} {
		resp, err := c.Get(cn.base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/") || strings.Contains(loc, "setup") {
			t.Errorf("GET %s: %d to %q, want a redirect to the login", p, resp.StatusCode, loc)
		}
	}
	resp, err := c.Get(cn.base + "static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unfingerprinted asset: %d, want 404", resp.StatusCode)
	}
}

// TestConnectorState: a connector whose device does not answer is listed
// as failed, with the drivers' error.
func TestConnectorState(t *testing.T) {
	cn := startConsoleNode(t, true)
	c := newClient(t)
	loginHTTP(t, c, cn, "root", cn.rootPW)
	src := "DEFINE CONNECTOR PLC1 WITH TYPE MODBUS_TCP\n" +
		"    ADD MODBUS_CONFIG\n        WITH HOST \"127.0.0.1\"\n        WITH PORT '1'\n        WITH SLAVE_ID '1'\n" +
		"    ADD MAPPING Fast\n        WITH EVERY 500 MILLISECONDS\n        WITH SOURCE_TOPIC \"plc1\"\n" +
		"        ADD TAG Temperature\n            WITH ADDRESS \"100\"\n            WITH ADDRESS_TYPE \"HOLDING_REGISTER\"\n            WITH DATA_TYPE \"INT16\"\n"
	tok := getToken(t, c, cn.base+"lot/edit?kind=connector")
	if code, body := postForm(t, c, cn.base+"lot/deploy", url.Values{"csrf": {tok}, "kind": {"connector"}, "src": {src}}); code != http.StatusSeeOther {
		t.Fatalf("deploy: %d %s", code, body)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		resp, err := c.Get(cn.base + "lot/rows")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		row := string(b)
		if i := strings.Index(row, "PLC1"); i >= 0 && strings.Contains(row[i:], "state-failed") && strings.Contains(row[i:], "MODBUS_TCP") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connector never listed as failed:\n%s", row)
		}
		time.Sleep(200 * time.Millisecond) // polling a page, as the browser does
	}
}
