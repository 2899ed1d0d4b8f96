// Package appliance is Gantry's composition root: it turns a
// config.Config into a running node — the broker and its listeners (TCP,
// TLS, WebSocket) and the operations HTTP server — and stops it again.
// It is the only package that wires the domains (broker, cluster, LoT,
// drivers, web console) together; adapters between them live in files
// named for what they join.
//
// A Node is started once and shut down once; Start and Shutdown are
// called from one goroutine (main, or a test).
package appliance
