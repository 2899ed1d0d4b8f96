// Package webui is Gantry's web console, served by every node under /ui/
// on the operations port: the first-boot setup wizard, login, the health
// of the node and the cluster (live over server-sent events), the LoT
// editor and the users page.
//
// Pages are templ components (*.templ; the generated *_templ.go are
// committed and make test fails when they are stale), rendered on the
// server; forms work without JavaScript. Every script, style and font is
// embedded (static/) and served with a fingerprinted name: a gateway on a
// factory LAN has no internet. The LoT editor is CodeMirror 6, bundled by
// esbuild from editor/ into static/lot-editor.min.js (make console-editor).
//
// # What it uses
//
// The console reads the broker's user store (Users), the cluster status
// GET /cluster serves (Options.Status), the counters of GET /info and
// /metrics (Options.Stats) and retained $SYS topics (Options.Retained). It
// changes the node only through the LoT command interface (Commander: the
// path $SYS/Coreflux/Command takes, with its rules) and, before setup is
// done, through Setup. The appliance wires these in (appliance/wire_webui.go).
//
// # Security
//
// No page but the login (and the wizard while setup is pending) is served
// without a session. Sessions are in memory, 30 minutes idle and 12 hours at
// most, behind an HttpOnly, SameSite=Strict cookie that is Secure when the
// console is reached over TLS. Every POST carries a CSRF token (the
// session's, or before login one bound to a cookie nonce by an HMAC) and
// passes net/http's cross-origin protection. Failed logins count per source
// address in the broker's Throttle, shared with MQTT. Changes need an
// administrator. The Content-Security-Policy allows only the node itself.
//
// # Concurrency
//
// A Console is safe for concurrent use: sessions, drafts and the wizard
// each have their own mutex, held only around map and file updates, never
// across a command or a render. Live streams end when the browser leaves
// or Options.Done is closed.
package webui
