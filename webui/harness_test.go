package webui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	mqtt "github.com/eclipse/paho.mqtt.golang"

	"gantry/appliance"
	"gantry/appliance/config"
	"gantry/broker/auth"
)

// consoleNode is a real node whose console a test drives.
type consoleNode struct {
	n       *appliance.Node
	ip      string
	base    string // http://ip:9100/ui/
	dataDir string
	rootPW  string // "" while setup is pending
	stop    func()
}

func loopbackIP() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
}

// startConsoleNode starts a node with its own data directory on a random
// loopback address. With setupDone, root's initial password is read and
// its file removed, as an operator at a terminal would.
func startConsoleNode(t *testing.T, setupDone bool) *consoleNode {
	t.Helper()
	return startConsoleNodeAt(t, loopbackIP(), nil, setupDone)
}

// startConsoleNodeAt is startConsoleNode on ip, with env over the test
// defaults.
func startConsoleNodeAt(t *testing.T, ip string, env map[string]string, setupDone bool) *consoleNode {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{"COREFLUX_MQTT_BIND_IP": ip, "COREFLUX_DATA_DIR": dir, "COREFLUX_MQTT_WEBSOCKET_PORT": "0"}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	n, err := appliance.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	cn := &consoleNode{n: n, ip: ip, base: "http://" + ip + ":9100/ui/", dataDir: dir}
	cn.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n.Shutdown(ctx)
		})
	}
	t.Cleanup(cn.stop)
	if setupDone {
		path := filepath.Join(dir, auth.InitialRootFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cn.rootPW = strings.TrimSpace(string(b))
		os.Remove(path)
	}
	return cn
}

// mqttConnect connects a paho client to the node.
func (cn *consoleNode) mqttConnect(user, password string) (mqtt.Client, error) {
	o := mqtt.NewClientOptions().AddBroker("tcp://" + cn.ip + ":1883").SetClientID(fmt.Sprintf("t%d", rand.Int())).
		SetUsername(user).SetPassword(password).SetConnectTimeout(30 * time.Second).SetAutoReconnect(false)
	c := mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(40 * time.Second) {
		return nil, fmt.Errorf("connect timed out")
	}
	return c, tok.Error()
}

func chromePath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROME_BIN"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH; .ci/run installs it")
	}
	t.Skip("no chromium on PATH (apt-get install --no-install-recommends chromium)")
	return ""
}

// newBrowser starts a headless chromium for one test. Register the node's
// cleanup first: cleanups run last-in first-out, so the browser (and its
// live streams) go before the node.
func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromePath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(width, height))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// waitJS polls a JavaScript condition until it holds.
func waitJS(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	// A navigation while polling destroys the page's JavaScript context:
	// poll again in the new page until the deadline.
	deadline := time.Now().Add(45 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline)))); err == nil {
			return
		}
		if !strings.Contains(err.Error(), "context") && !strings.Contains(err.Error(), "navigated") {
			break
		}
	}
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
		t.Fatalf("waiting for %s: %v\npage:\n%s", expr, err, body)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// login logs in through the login page, with the keyboard only.
func login(t *testing.T, ctx context.Context, cn *consoleNode, user, password string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(cn.base+"login"), chromedp.WaitVisible(chromedp.CSS("#username")))
	waitJS(t, ctx, `document.activeElement && document.activeElement.id === "username"`)
	do(t, ctx, chromedp.KeyEvent(user), chromedp.KeyEvent("\t"))
	waitJS(t, ctx, `document.activeElement.id === "password"`)
	do(t, ctx, chromedp.KeyEvent(password), chromedp.KeyEvent("\r"))
}

// screenshot writes a PNG of the page under $GANTRY_SCREENSHOTS (make
// console-screenshots sets it to docs/screenshots).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("GANTRY_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// darkTablet emulates a tablet in portrait with a dark colour scheme.
func darkTablet(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, chromedp.EmulateViewport(768, 1024, chromedp.EmulatePortrait, chromedp.EmulateTouch),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
}

// checkLayout asserts what every page must hold at the current viewport:
// no horizontal scrolling, and no visible control smaller than 44 px high.
func checkLayout(t *testing.T, ctx context.Context) {
	t.Helper()
	if w := evalJS[bool](t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`); !w {
		t.Errorf("page scrolls sideways at width %v", evalJS[float64](t, ctx, `window.innerWidth`))
	}
	small := evalJS[[]string](t, ctx, `Array.from(document.querySelectorAll("button, a.button, nav a, input:not([type=hidden]):not([type=checkbox]):not([type=radio]), select"))
		.filter(e => e.offsetParent !== null && e.getBoundingClientRect().height < 44)
		.map(e => e.outerHTML.slice(0, 80))`)
	if len(small) > 0 {
		t.Errorf("controls under 44 px high: %q", small)
	}
}
