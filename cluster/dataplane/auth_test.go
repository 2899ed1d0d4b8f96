package dataplane

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"gantry/broker"
	"gantry/broker/packet"
	"gantry/cluster/signing"
)

const tokenSecret = "a shared secret of the token test"

// shiftedSigner signs with tokenSecret on a clock offset from the wall
// clock by *offset: moving it forward stands for the time a restart takes.
func shiftedSigner(offset *atomic.Int64) *signing.Signer {
	return signing.New([]byte(tokenSecret), &signing.Options{Now: func() time.Time {
		return time.Now().Add(time.Duration(offset.Load()))
	}})
}

// tokenReceiver is node "b": a real broker that admits links through b's
// data plane as the appliance wires it (no other login), on a loopback
// port.
func tokenReceiver(t *testing.T, signer *signing.Signer) (*Plane, string) {
	t.Helper()
	srv, err := broker.New(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{NodeName: "b", ClusterID: "c1", Username: "cluster", Broker: srv, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAuthenticator(p.Authenticator(nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l, broker.ListenerConfig{Name: "tcp"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		p.Stop()
	})
	return p, l.Addr().String()
}

// linkLogin sends a link's CONNECT from node "a" with password and
// returns the CONNACK's reason code.
func linkLogin(t *testing.T, addr string, password []byte) packet.ReasonCode {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	c := packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, KeepAlive: 2, ClientID: linkClientPrefix + "a",
		UsernameFlag: true, Username: "cluster", PasswordFlag: true, Password: password}
	if _, err := nc.Write(c.Append(nil)); err != nil {
		t.Fatal(err)
	}
	h, body, err := readPacket(bufio.NewReader(nc))
	if err != nil {
		t.Fatalf("no CONNACK: %v", err)
	}
	var ack packet.Connack
	if h.Type != packet.CONNACK || packet.DecodeConnack(h, body, packet.V5, &ack) != nil {
		t.Fatalf("got %v, want a CONNACK", h.Type)
	}
	return ack.ReasonCode
}

// TestLinkTokenAdmitsOnce: a link token read off the wire (a link without
// UseTls) admits nobody once its link logged in with it, and is counted
// with the replayed frames; the sender's next dial, with a fresh token, is
// admitted, and a token for another receiver is refused as forged.
func TestLinkTokenAdmitsOnce(t *testing.T) {
	var offset atomic.Int64
	b, addr := tokenReceiver(t, shiftedSigner(&offset))
	a, err := New(Options{NodeName: "a", ClusterID: "c1", Username: "cluster", Broker: nopBroker{}, Signer: shiftedSigner(&offset)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	captured := a.token("b")
	if rc := linkLogin(t, addr, captured); rc != packet.Success {
		t.Fatalf("the link's own login: %v", rc)
	}
	if rc := linkLogin(t, addr, captured); rc != packet.BadUserNameOrPassword {
		t.Fatalf("the captured token again: %v, want %v", rc, packet.BadUserNameOrPassword)
	}
	if rc := linkLogin(t, addr, a.token("b")); rc != packet.Success {
		t.Fatalf("a reconnect with a fresh token: %v", rc)
	}
	if rc := linkLogin(t, addr, a.token("c")); rc != packet.BadUserNameOrPassword {
		t.Fatalf("a token for node c: %v, want %v", rc, packet.BadUserNameOrPassword)
	}
	if r := b.Status().Received; r.Replayed != 1 || r.Forged != 1 {
		t.Fatalf("b counted %d replayed, %d forged; want 1 and 1", r.Replayed, r.Forged)
	}
}

// TestLinkTokenSignedBeforeStartRefused: the ids taken are in memory, so
// a restarted receiver refuses a token signed before it started, though
// within the signing window; the sender's next token is admitted.
func TestLinkTokenSignedBeforeStartRefused(t *testing.T) {
	var offset atomic.Int64
	a, err := New(Options{NodeName: "a", ClusterID: "c1", Username: "cluster", Broker: nopBroker{}, Signer: shiftedSigner(&offset)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	captured := a.token("b") // used by the link into b's previous process
	offset.Store(int64(time.Second))
	b, addr := tokenReceiver(t, shiftedSigner(&offset)) // restarted a second later
	if rc := linkLogin(t, addr, captured); rc != packet.BadUserNameOrPassword {
		t.Fatalf("a token signed before b started: %v, want %v", rc, packet.BadUserNameOrPassword)
	}
	if rc := linkLogin(t, addr, a.token("b")); rc != packet.Success {
		t.Fatalf("the link's next token: %v", rc)
	}
	if r := b.Status().Received; r.Replayed != 1 || r.Forged != 0 {
		t.Fatalf("b counted %d replayed, %d forged; want 1 and 0", r.Replayed, r.Forged)
	}
}
