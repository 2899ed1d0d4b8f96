package webui

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
)

// Sessions lists and disconnects this node's MQTT sessions
// (*broker.Server implements it).
type Sessions interface {
	Sessions(f broker.SessionFilter, limit int) ([]broker.SessionInfo, int)
	Disconnect(clientID string, reason packet.ReasonCode) error
}

// clientsPageSize is how many sessions one page lists: the list is
// searched and paged on the node, never sent whole.
const clientsPageSize = 50

// clientsQuery is the clients page's search, from the URL.
type clientsQuery struct {
	Search        string
	ConnectedOnly bool
	Page          int // from 0
}

func parseClientsQuery(v url.Values) clientsQuery {
	q := clientsQuery{Search: strings.TrimSpace(v.Get("q")), ConnectedOnly: v.Get("connected") == "1"}
	if p, err := strconv.Atoi(v.Get("page")); err == nil && p > 0 && p < 1_000_000 {
		q.Page = p
	}
	return q
}

// values is the query as URL parameters (page p).
func (q clientsQuery) url(path string, page int) string {
	v := url.Values{}
	if q.Search != "" {
		v.Set("q", q.Search)
	}
	if q.ConnectedOnly {
		v.Set("connected", "1")
	}
	if page > 0 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

type clientsView struct {
	Q       clientsQuery
	Rows    []broker.SessionInfo
	Total   int
	From    int // 1-based index of the first row
	HasNext bool
	Flash   string
	Error   string
	Off     bool // no session source wired in
}

func (c *Console) clientsView(q clientsQuery) clientsView {
	v := clientsView{Q: q}
	if c.o.Sessions == nil {
		v.Off = true
		return v
	}
	rows, total := c.o.Sessions.Sessions(broker.SessionFilter{Search: q.Search, ConnectedOnly: q.ConnectedOnly}, (q.Page+1)*clientsPageSize)
	from := min(q.Page*clientsPageSize, len(rows))
	v.Rows, v.Total, v.From = rows[from:], total, from+1
	v.HasNext = total > (q.Page+1)*clientsPageSize
	return v
}

func (c *Console) serveClients(w http.ResponseWriter, r *http.Request, rq *req) {
	v := c.clientsView(parseClientsQuery(r.URL.Query()))
	v.Flash = r.URL.Query().Get("done")
	f := c.frame(rq, "Clients", "clients")
	f.Back = prefix + "clients"
	c.render(w, r, http.StatusOK, ClientsPage(f, v))
}

// serveClientRows is the table's body alone, for its periodic refresh;
// without a session it answers 204, which htmx does not swap.
func (c *Console) serveClientRows(w http.ResponseWriter, r *http.Request) {
	ss, u := c.current(r)
	if ss == nil || c.setupPending() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rq := &req{sess: ss, user: u, theme: themeOf(r)}
	c.render(w, r, http.StatusOK, ClientRows(c.frame(rq, "", ""), c.clientsView(parseClientsQuery(r.URL.Query()))))
}

// postDisconnect disconnects a client: an MQTT 5 client is told why
// (DISCONNECT 0x98, administrative action). Its session stays.
func (c *Console) postDisconnect(w http.ResponseWriter, r *http.Request, rq *req) {
	id := r.PostFormValue("client")
	q := parseClientsQuery(url.Values{"q": {r.PostFormValue("q")}, "connected": {r.PostFormValue("connected")}})
	var err error
	if c.o.Sessions == nil {
		err = errors.New("this node's console has no access to its sessions")
	} else {
		err = c.o.Sessions.Disconnect(id, packet.AdministrativeAction)
	}
	if err != nil {
		v := c.clientsView(q)
		v.Error = "Client " + strconv.Quote(id) + " was not disconnected: " + err.Error()
		if errors.Is(err, broker.ErrNotConnected) {
			v.Error = "Client " + strconv.Quote(id) + " is not connected to this node (it may have gone already, or be on another node)."
		}
		f := c.frame(rq, "Clients", "clients")
		f.Back = prefix + "clients"
		c.render(w, r, http.StatusUnprocessableEntity, ClientsPage(f, v))
		return
	}
	c.log.Info("client disconnected from the console", "client", id, "by", rq.user.Name)
	back := q.url(prefix+"clients", 0)
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"done="+urlQuery("Disconnected "+id+"."), http.StatusSeeOther)
}

// Formatting helpers of the clients page.

func protocolName(v byte) string {
	switch v {
	case 5:
		return "MQTT 5"
	case 4:
		return "MQTT 3.1.1"
	case 3:
		return "MQTT 3.1"
	}
	return "—"
}

func sessionState(s broker.SessionInfo) string {
	switch {
	case s.InProcess:
		return "running"
	case s.Connected:
		return "alive"
	}
	return "standby"
}

func sessionStateText(s broker.SessionInfo) string {
	switch {
	case s.InProcess:
		return "in process"
	case s.Connected:
		return "connected"
	}
	return "offline"
}

func expiryText(s broker.SessionInfo) string {
	switch {
	case s.Expiry == 0xFFFFFFFF:
		return "never expires"
	case s.Expiry == 0:
		return "ends with the connection"
	}
	return (time.Duration(s.Expiry) * time.Second).String()
}

func sinceText(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return uptime(time.Since(t)) + " ago"
}
