package broker

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// WebSocketHandler serves MQTT over WebSocket (binary messages, subprotocol
// "mqtt", or "mqttv3.1" for old clients). Mount it at /mqtt. The origin of
// the page is not checked: clients are authenticated by MQTT itself.
func (s *Server) WebSocketHandler(lc ListenerConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols:       []string{"mqtt", "mqttv3.1"},
			InsecureSkipVerify: true,
		})
		if err != nil {
			return // Accept has answered the request
		}
		if ws.Subprotocol() == "" {
			ws.Close(websocket.StatusPolicyViolation, "subprotocol mqtt required")
			return
		}
		ws.SetReadLimit(int64(s.opts.MaxPacketSize) + 5)
		s.ServeConn(newWSConn(s, ws), lc)
	})
}

// wsConn is a WebSocket as the broker's net.Conn. coder/websocket closes
// the whole connection when a read deadline passes or a read is
// cancelled, which would lose the DISCONNECT the broker writes after it
// interrupted its reader (session taken over, shutdown, keep alive
// timeout). Reads therefore come through a net.Pipe, fed by a pump
// goroutine: its deadlines interrupt only the read. Writes, Close and the
// addresses go to the WebSocket. The connection is closed by the broker,
// not by a context, so that its last DISCONNECT still leaves on shutdown.
type wsConn struct {
	net.Conn          // the WebSocket
	r, w     net.Conn // the pipe: the broker reads r, the pump writes w
	srv      *Server
	pump     sync.Once
}

func newWSConn(s *Server, ws *websocket.Conn) *wsConn {
	r, w := net.Pipe()
	return &wsConn{Conn: websocket.NetConn(context.Background(), ws, websocket.MessageBinary), r: r, w: w, srv: s}
}

// Read starts the pump on first use, from the connection's reader
// goroutine: the server is running and tracks the pump until it ends
// with the WebSocket or the pipe.
func (c *wsConn) Read(b []byte) (int, error) {
	c.pump.Do(func() {
		c.srv.goTracked(func() {
			buf := wsPumpBuffers.Get().(*[wsPumpBuffer]byte)
			io.CopyBuffer(c.w, c.Conn, buf[:])
			wsPumpBuffers.Put(buf)
			c.w.Close()
		})
	})
	return c.r.Read(b)
}

// wsPumpBuffer is the pump's copy buffer: io.Copy's default would hold
// 32 KiB per WebSocket connection for its lifetime, most of which waits
// idle. A read of the WebSocket returns at most this much of a message;
// the rest comes with the next read. Buffers are pooled across
// connections.
const wsPumpBuffer = 4 << 10

var wsPumpBuffers = sync.Pool{New: func() any { return new([wsPumpBuffer]byte) }}

func (c *wsConn) SetReadDeadline(t time.Time) error { return c.r.SetReadDeadline(t) }

func (c *wsConn) SetDeadline(t time.Time) error {
	c.r.SetReadDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *wsConn) Close() error {
	c.r.Close()
	return c.Conn.Close()
}
