package appliance

import (
	"html/template"
	"net/http"
	"os"
)

// The appliance image forwards port 80 to the operations port, so GET /
// here is what http://<gateway>.local/ shows: a setup page that names the
// node, its version and boot slot, and leads to the console under /ui/.
// Until the node is set up, the browser goes straight on to the setup
// wizard (a refresh, not a redirect: the boot check wants 200 here).

var setupPage = template.Must(template.New("setup").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry {{.Node}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Pending}}<meta http-equiv="refresh" content="0; url=/ui/setup">{{end}}</head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
<h1>Gantry on {{.Node}}</h1>
<p>Version {{.Version}}{{if .Slot}}, root slot {{.Slot}}{{end}}.</p>
{{if .Pending}}<p><a href="/ui/setup">Set this gateway up</a>: the setup wizard sets the administrator's password, the node name, the cluster and durability.</p>{{end}}
<p><a href="/ui/">Open the console</a> (also at port 9100, under <code>/ui/</code>).</p>
<p>MQTT listens on port 1883. Until the wizard has run, log in as <code>root</code> with the password
in <code>initial-root-password</code> in the data directory.</p>
<p><a href="/health/ready">/health/ready</a> · <a href="/info">/info</a> · <a href="/metrics">/metrics</a></p>
</body></html>
`))

func (n *Node) serveSetupPage(w http.ResponseWriter, r *http.Request) {
	node := n.cfg.Cluster.NodeName
	if node == "" {
		node, _ = os.Hostname()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	pending := (&consoleSetup{n: n}).Pending()
	setupPage.Execute(w, struct {
		Node, Version, Slot string
		Pending             bool
	}{node, Version, bootSlot(), pending})
}
