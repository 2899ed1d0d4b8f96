package appliance

import (
	"html/template"
	"net/http"
	"os"
)

// The appliance image forwards port 80 to the operations port, so GET /
// here is what http://<gateway>.local/ shows: a setup page that names the
// node, its version and boot slot, and leads to the console under /ui/.

var setupPage = template.Must(template.New("setup").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry {{.Node}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
<h1>Gantry on {{.Node}}</h1>
<p>Version {{.Version}}{{if .Slot}}, root slot {{.Slot}}{{end}}.</p>
<p><a href="/ui/">Open the console and the setup wizard</a> (also at port 9100, under <code>/ui/</code>).</p>
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
	setupPage.Execute(w, struct{ Node, Version, Slot string }{node, Version, bootSlot()})
}
