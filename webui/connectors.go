package webui

import (
	"net/http"
	"time"
)

// ConnectorView is one connector deployed on this node, with its tags'
// latest readings (the appliance fills it from the drivers' engine).
type ConnectorView struct {
	Name, Type                                                                   string
	Device                                                                       string // what it connects to or listens on
	Connection                                                                   string // Connected, Reconnecting, Listening, Stopped, Invalid...
	Health                                                                       string // Green, Yellow, Red
	Since                                                                        time.Time
	LastError                                                                    string
	LastErrorAt                                                                  time.Time
	ClusterNode                                                                  string // CLUSTER_NODE it is pinned to; "" for any
	Running                                                                      bool   // its goroutine runs on this node
	Polls, Reads, ReadErrors, Published, Writes, WriteErrors, Connects, Failures uint64
	Tags                                                                         []TagView
}

// TagView is one tag's latest reading on this node.
type TagView struct {
	Name, Topic, Type, Unit string
	Writable                bool
	WriteTopic              string
	Value                   string // "" before the first reading
	At                      time.Time
	Error                   string
}

// connectorState is the word (and style) of a connector's state, as the
// LoT page says it.
func connectorState(cv ConnectorView) string {
	switch {
	case cv.Connection == "Invalid":
		return "failed"
	case !cv.Running || cv.Connection == "Stopped":
		return "standby"
	case cv.Health == "Red":
		return "failed"
	case cv.Health == "Yellow":
		return "degraded"
	}
	return "running"
}

func pinnedText(cv ConnectorView) string {
	if cv.ClusterNode == "" {
		return "not pinned (the cluster picks the node)"
	}
	return "pinned to " + cv.ClusterNode
}

// tagValueText is a tag's value with its unit, or a dash before the
// first reading.
func tagValueText(t TagView) string {
	switch {
	case t.Value == "":
		return "—"
	case t.Unit != "":
		return t.Value + " " + t.Unit
	}
	return t.Value
}

func readAt(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("15:04:05.000")
}

func (c *Console) connectorViews() ([]ConnectorView, bool) {
	if c.o.Connectors == nil {
		return nil, false
	}
	return c.o.Connectors(), true
}

func (c *Console) serveConnectors(w http.ResponseWriter, r *http.Request, rq *req) {
	list, ok := c.connectorViews()
	f := c.frame(rq, "Connectors", "connectors")
	f.Back = prefix + "connectors"
	c.render(w, r, http.StatusOK, ConnectorsPage(f, list, ok))
}

// serveConnectorsLive is the page's live part, refreshed by htmx; without
// a session it answers 204, which htmx does not swap.
func (c *Console) serveConnectorsLive(w http.ResponseWriter, r *http.Request) {
	if ss, _ := c.current(r); ss == nil || c.setupPending() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	list, ok := c.connectorViews()
	c.render(w, r, http.StatusOK, ConnectorsLive(list, ok))
}
