package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"gantry/broker/packet"
	"gantry/broker/rawsock"
)

// version is the protocol level every client speaks.
const version = packet.V311

// handshakeTimeout bounds CONNECT/CONNACK and SUBSCRIBE/SUBACK.
const handshakeTimeout = 15 * time.Second

// Buffer sizes: active clients read in large chunks; idle clients drop
// their buffer after the handshake.
const (
	activeBuffer = 64 << 10
	idleBuffer   = 256
)

// conn is one raw MQTT client (or sink) connection. Reads go through a
// buffer that holds whole packets; a decoded body is valid until the next
// read. conn is not safe for concurrent use, except that one goroutine
// may read while another writes through its own buffer.
type conn struct {
	nc      net.Conn
	rw      io.ReadWriter // the data path's reads and writes: nc, or its rawsock.Sock
	in      []byte        // read buffer; unread bytes are in[r:w]
	r, w    int
	out     []byte // encoded packets waiting for flush (reader side)
	present bool   // CONNACK's session present flag
}

func newConn(nc net.Conn, size int) *conn {
	c := &conn{nc: nc, rw: nc, in: make([]byte, size)}
	// Raw system calls spare the generator the scheduler's hand-offs
	// around each one (see rawsock.Sock), which cost it as much CPU as
	// they cost a broker, and so stalls of its own.
	if s := rawsock.New(nc); s != nil {
		c.rw = s
	}
	return c
}

// dialer opens client connections from a set of local source addresses.
type dialer struct {
	addr       string
	sources    []net.IP
	persistent bool // clean session 0: the broker keeps the session
}

// dial connects client number i (its source address is sources[i mod n])
// and completes the MQTT handshake, with a clean session unless the
// dialer is persistent.
func (d dialer) dial(ctx context.Context, i int, clientID string, keepAlive uint16, bufSize int) (*conn, error) {
	nd := net.Dialer{Timeout: handshakeTimeout}
	if len(d.sources) > 0 {
		nd.LocalAddr = &net.TCPAddr{IP: d.sources[i%len(d.sources)]}
	}
	nc, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	c := newConn(nc, bufSize)
	if err := c.connect(clientID, keepAlive, !d.persistent); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", clientID, err)
	}
	return c, nil
}

// connect sends CONNECT and waits for a successful CONNACK.
func (c *conn) connect(clientID string, keepAlive uint16, clean bool) error {
	c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	cp := packet.Connect{Version: version, CleanStart: clean, KeepAlive: keepAlive, ClientID: clientID}
	if _, err := c.nc.Write(cp.Append(nil)); err != nil {
		return err
	}
	h, body, err := c.next()
	if err != nil {
		return err
	}
	var ack packet.Connack
	if err := packet.DecodeConnack(h, body, version, &ack); err != nil {
		return fmt.Errorf("CONNACK: %w", err)
	}
	if ack.ReasonCode != packet.Success {
		return fmt.Errorf("connection refused: %v", ack.ReasonCode)
	}
	c.present = ack.SessionPresent
	return nil
}

// subscribe subscribes to filter and waits for the SUBACK. It must be
// called before the connection's reader starts.
func (c *conn) subscribe(filter string, qos byte) error {
	c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	sp := packet.Subscribe{PacketID: 1, Subscriptions: []packet.Subscription{{Filter: filter, Options: packet.SubOptions{QoS: qos}}}}
	if _, err := c.nc.Write(sp.Append(nil, version)); err != nil {
		return err
	}
	h, body, err := c.next()
	if err != nil {
		return err
	}
	var ack packet.Suback
	if err := packet.DecodeSuback(h, body, version, &ack); err != nil {
		return fmt.Errorf("SUBACK: %w", err)
	}
	if ack.ReasonCodes[0] != packet.ReasonCode(qos) {
		return fmt.Errorf("subscription %q refused or downgraded: %v", filter, ack.ReasonCodes[0])
	}
	return nil
}

// buffered returns the next whole packet already in the buffer; ok is
// false when more bytes must be read first (see fill).
func (c *conn) buffered() (h packet.FixedHeader, body []byte, ok bool, err error) {
	h, n, err := packet.DecodeFixedHeader(c.in[c.r:c.w])
	if errors.Is(err, packet.ErrShort) {
		return h, nil, false, nil
	}
	if err != nil {
		return h, nil, false, err
	}
	end := c.r + n + h.Remaining
	if end > c.w {
		if n+h.Remaining > len(c.in) {
			c.grow(n + h.Remaining)
		}
		return h, nil, false, nil
	}
	body = c.in[c.r+n : end]
	c.r = end
	return h, body, true, nil
}

// grow enlarges the read buffer to hold at least size bytes.
func (c *conn) grow(size int) {
	b := make([]byte, max(size, 2*len(c.in)))
	c.w = copy(b, c.in[c.r:c.w])
	c.r = 0
	c.in = b
}

// fill reads more bytes, moving the unread ones to the front first.
func (c *conn) fill() error {
	if c.r > 0 {
		c.w = copy(c.in, c.in[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.in) {
		c.grow(2 * len(c.in))
	}
	n, err := c.rw.Read(c.in[c.w:])
	c.w += n
	if n > 0 {
		return nil
	}
	return err
}

// next returns the next packet, reading as needed.
func (c *conn) next() (packet.FixedHeader, []byte, error) {
	for {
		h, body, ok, err := c.buffered()
		if err != nil || ok {
			return h, body, err
		}
		if err := c.fill(); err != nil {
			return h, nil, err
		}
	}
}

// flush writes the packets queued in out.
func (c *conn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.rw.Write(c.out)
	c.out = c.out[:0]
	return err
}

// queueAck appends an acknowledgement of type t to out.
func (c *conn) queueAck(t packet.Type, pid uint16) {
	a := packet.Ack{Type: t, PacketID: pid}
	c.out = a.Append(c.out, version)
}

// close sends DISCONNECT (best effort) and closes the socket.
func (c *conn) close() {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	var d packet.Disconnect
	c.nc.Write(d.Append(nil, version))
	c.nc.Close()
}
