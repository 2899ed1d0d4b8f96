module gantry

go 1.26.0

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/eclipse/paho.golang v0.23.0 // indirect
	github.com/eclipse/paho.mqtt.golang v1.5.1 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
)
