package broker

import (
	"net/http"

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
		s.ServeConn(websocket.NetConn(s.ctx, ws, websocket.MessageBinary), lc)
	})
}
