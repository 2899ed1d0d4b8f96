package appliance

import (
	"encoding/json"
	"net/http"
	"time"

	"gantry/cluster"
	"gantry/cluster/dataplane"
)

// opsHandler serves the operations endpoints.
func (n *Node) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("GET /health/ready", n.serveReady)
	mux.HandleFunc("GET /{$}", n.serveSetupPage)
	mux.HandleFunc("GET /info", n.serveInfo)
	mux.HandleFunc("GET /cluster", n.serveCluster)
	if n.Cluster != nil {
		peer := n.Cluster.PeerHandler()
		mux.Handle(cluster.PeerPath, peer)
		mux.Handle(cluster.JoinPath, peer)
		mux.Handle(cluster.UsersPath, peer)
		mux.Handle(cluster.LoTPath, peer)
		mux.Handle(cluster.CaughtUpPath, peer)
		mux.HandleFunc("GET /cluster/lot", n.serveLoTSelf) // wire_cluster_lot.go
		if n.keptSync != nil {
			mux.HandleFunc("POST "+keptPath, n.keptSync.serveKept) // wire_cluster_kept.go
			mux.HandleFunc("POST "+keptAllPath, n.keptSync.serveKeptAll)
		}
		mux.HandleFunc("GET /cluster/trace", n.serveTrace) // wire_dataplane.go
		if n.sessions != nil {
			h := n.sessions.Handler() // wire_sessions.go
			mux.Handle(dataplane.SessionsPath, h)
			mux.Handle(dataplane.SessionsPath+"/", h)
		}
	}
	mux.Handle("GET /metrics", n.metricsHandler())
	mux.Handle("/ui/", n.consoleHandler())
	return mux
}

// info is the body of GET /info.
type info struct {
	Version       string            `json:"version"`
	NodeName      string            `json:"nodeName"`
	UptimeSeconds int64             `json:"uptimeSeconds"`
	Listeners     map[string]string `json:"listeners"`
	Connections   int64             `json:"connections"`
	Sessions      int               `json:"sessions"`
	Subscriptions int               `json:"subscriptions"`
	Retained      int               `json:"retained"`
	MessagesIn    uint64            `json:"messagesIn"`
	MessagesOut   uint64            `json:"messagesOut"`
	Cluster       clusterSummary    `json:"cluster"`
}

func (n *Node) serveInfo(w http.ResponseWriter, r *http.Request) {
	st := n.Broker.Stats()
	in := info{
		Version:       Version,
		NodeName:      n.cfg.Cluster.NodeName,
		UptimeSeconds: int64(time.Since(n.started) / time.Second),
		Listeners:     map[string]string{},
		Connections:   st.Connections.Load(),
		Sessions:      n.Broker.SessionCount(),
		Subscriptions: n.Broker.SubscriptionCount(),
		Retained:      n.Broker.RetainedCount(),
		MessagesIn:    st.MessagesIn.Load(),
		MessagesOut:   st.MessagesOut.Load(),
		Cluster:       n.clusterInfo(),
	}
	n.mu.Lock()
	for name, l := range n.listeners {
		in.Listeners[name] = l.Addr().String()
	}
	n.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(in)
}
