// Package opcua is the OPC UA device of the connectors (type OPCUA), on
// github.com/gopcua/opcua.
//
// Open asks the server for its endpoints, picks the one of the configured
// security mode and policy (None, Sign, SignAndEncrypt), replaces the URL
// it advertises with the configured one, and opens a session (anonymous
// or user name; with security, the configured client certificate or one
// made at connect). The library's AutoReconnect is off: the engine closes
// and reopens the session after any error, so nothing of a dead session
// is taken for a current value.
//
// Read sends one Read request for all the batch's tags; a bad status is
// that tag's error. Subscribe (drivers.Subscriber) creates one
// subscription per mapping, with a monitored item per tag whose client
// handle is the tag's index, and checks the session every second with a
// read of the server's clock (a subscription alone says nothing when the
// server is gone). Write sends the tag's DATA_TYPE.
//
// Server (OPCUA_SERVER) serves tags as variables of namespace 1 on
// gopcua's server package. gopcua's NodeNameSpace has no write hook, so a
// namespace of this package (tagSpace) is registered as ns=1 and hands
// its nodes to a NodeNameSpace registered after it; a client's write of a
// writable tag goes to the engine instead of into the node. gopcua's
// listener shares a port in use, so Start binds the port plainly first to
// report a conflict. Server.mu guards the values and the live server.
//
// A Device is used by the connector's goroutine, and by one subscription
// goroutine per mapping while subscribed; mu guards the client, which
// gopcua allows to be shared.
package opcua
