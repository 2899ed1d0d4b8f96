package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gantry/cluster"
)

// healthView is one refresh of the health page: this node's counters,
// its rates since the previous refresh, and the cluster as GET /cluster
// serves it.
type healthView struct {
	Node    NodeStats
	InRate  float64
	OutRate float64
	Cluster cluster.Status
	Extras  []extraSection // the rest of GET /cluster (cluster_extra.go)
	At      time.Time
}

func (c *Console) healthNow() healthView {
	h := healthView{Node: c.o.Stats(), Cluster: c.o.Status(), At: time.Now()}
	if c.o.ClusterJSON != nil {
		h.Extras = clusterExtras(c.o.ClusterJSON())
	}
	return h
}

func (c *Console) serveHealth(w http.ResponseWriter, r *http.Request, rq *req) {
	f := c.frame(rq, "Health", "health")
	f.Back = prefix + "health"
	c.render(w, r, http.StatusOK, HealthPage(f, c.healthNow()))
}

func (c *Console) serveMember(w http.ResponseWriter, r *http.Request, rq *req) {
	name := r.PathValue("name")
	st := c.o.Status()
	for _, m := range st.Members {
		if m.Name == name {
			f := c.frame(rq, "Node "+name, "health")
			f.Back = r.URL.Path
			c.render(w, r, http.StatusOK, MemberPage(f, m, st))
			return
		}
	}
	if name == st.NodeName {
		f := c.frame(rq, "Node "+name, "health")
		c.render(w, r, http.StatusOK, MemberPage(f, cluster.Member{Name: name, Self: true, State: cluster.MemberAlive}, st))
		return
	}
	http.Error(w, fmt.Sprintf("No member %q in this node's view of the cluster.", name), http.StatusNotFound)
}

// serveHealthEvents streams the health page: a "tiles" event (the page's
// live part as HTML) and a "rate" event (messages per second in and out,
// JSON for the chart) every Interval, until the browser goes away or the
// node shuts down.
func (c *Console) serveHealthEvents(w http.ResponseWriter, r *http.Request, rq *req) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // the operations server's WriteTimeout would cut the stream
	rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "retry: 2000\n\n")
	if hist := c.rates.recent(time.Now()); len(hist) > 0 {
		b, _ := json.Marshal(hist)
		writeEvent(w, "history", string(b))
	}
	t := time.NewTicker(c.o.Interval)
	defer t.Stop()
	prev := c.healthNow()
	var buf bytes.Buffer
	for {
		cur := c.healthNow()
		if dt := cur.At.Sub(prev.At).Seconds(); dt > 0 {
			cur.InRate = float64(cur.Node.MessagesIn-prev.Node.MessagesIn) / dt
			cur.OutRate = float64(cur.Node.MessagesOut-prev.Node.MessagesOut) / dt
		}
		buf.Reset()
		HealthLive(cur).Render(r.Context(), &buf)
		writeEvent(w, "tiles", buf.String())
		pt := ratePoint{T: cur.At.Unix(), In: cur.InRate, Out: cur.OutRate}
		c.rates.add(pt)
		rate, _ := json.Marshal(pt)
		writeEvent(w, "rate", string(rate))
		if err := rc.Flush(); err != nil {
			return
		}
		prev = cur
		select {
		case <-r.Context().Done():
			return
		case <-c.done():
			return
		case <-t.C:
		}
		if _, ok := c.o.Users.Lookup(rq.user.Name); !ok || !c.sessions.alive(rq.sess.id) {
			return // logged out, expired or removed: the page finds out and goes to the login
		}
	}
}

func (c *Console) done() <-chan struct{} {
	if c.o.Done == nil {
		return context.Background().Done()
	}
	return c.o.Done
}

// writeEvent writes one server-sent event; every line of data gets its
// own "data:" field.
func writeEvent(w io.Writer, name, data string) {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimSuffix(line, "\r") + "\n")
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// Formatting helpers of the health templates.

func itoa[T ~int | ~int64 | ~uint64](v T) string { return fmt.Sprint(v) }

func rate(v float64) string { return fmt.Sprintf("%.1f", v) }

func uptime(d time.Duration) string {
	d = d.Truncate(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, (d%time.Hour)/time.Minute)
	}
	return d.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func memberURL(name string) string { return prefix + "health/node/" + name }

func replicas(r []string) string { return orDash(strings.Join(r, ", ")) }

// ownerSummary counts the partitions of each owner: "gw-a 11, gw-b 11,
// none 2".
func ownerSummary(st cluster.Status) string {
	counts := map[string]int{}
	var names []string
	for _, p := range st.Partitions.Partitions {
		o := p.Owner
		if o == "" {
			o = "none"
		}
		if counts[o] == 0 {
			names = append(names, o)
		}
		counts[o]++
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, counts[n])
	}
	return strings.Join(parts, ", ")
}

// ratePoint is one second of the throughput chart.
type ratePoint struct {
	T   int64   `json:"t"` // Unix seconds
	In  float64 `json:"in"`
	Out float64 `json:"out"`
}

// rateHistory keeps the last two minutes of rates the live streams
// computed, so that a page opened (or reloaded) starts with a chart.
type rateHistory struct {
	mu  sync.Mutex // guards pts
	pts []ratePoint
}

const rateHistoryLen = 120

// add keeps p unless a stream already gave a point for that second.
func (h *rateHistory) add(p ratePoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.pts); n > 0 && h.pts[n-1].T >= p.T {
		return
	}
	h.pts = append(h.pts, p)
	if len(h.pts) > rateHistoryLen {
		h.pts = slices.Delete(h.pts, 0, len(h.pts)-rateHistoryLen)
	}
}

// recent returns the points of the last two minutes before now.
func (h *rateHistory) recent(now time.Time) []ratePoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	from := now.Add(-rateHistoryLen * time.Second).Unix()
	i, _ := slices.BinarySearchFunc(h.pts, from, func(p ratePoint, t int64) int { return int(p.T - t) })
	return slices.Clone(h.pts[i:])
}
