package modbus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/goburrow/serial"
)

// errClosed is returned by a transport used after Close.
var errClosed = errors.New("modbus: connection closed")

// tcpTransport is a goburrow Transporter over a connection this package
// owns, so that a cancelled context closes the socket at once (goburrow's
// own keeps dead sockets and cannot be interrupted) and a reply's length is
// read from its MBAP header, bounded.
type tcpTransport struct {
	mu      sync.Mutex // guards conn
	conn    net.Conn
	timeout time.Duration // per request
}

const (
	mbapHeader = 7
	maxADU     = 260
)

func (t *tcpTransport) dial(ctx context.Context, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return nil
}

func (t *tcpTransport) close() error {
	t.mu.Lock()
	c := t.conn
	t.conn = nil
	t.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

// Send implements modbus.Transporter.
func (t *tcpTransport) Send(req []byte) ([]byte, error) {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return nil, errClosed
	}
	if err := c.SetDeadline(time.Now().Add(t.timeout)); err != nil {
		return nil, err
	}
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	var buf [maxADU]byte
	if _, err := io.ReadFull(c, buf[:mbapHeader]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(buf[4:6]))
	if n < 2 || mbapHeader-1+n > maxADU {
		return nil, fmt.Errorf("modbus: reply header gives length %d", n)
	}
	if _, err := io.ReadFull(c, buf[mbapHeader:mbapHeader-1+n]); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf[:mbapHeader-1+n]...), nil
}

// rtuTransport is a goburrow Transporter over a serial port: it reads a
// reply frame by its function code (an exception is 5 bytes), which
// goburrow's own gets wrong for exceptions split across reads.
type rtuTransport struct {
	cfg  serial.Config
	mu   sync.Mutex // guards port
	port io.ReadWriteCloser
	// frameDelay is the silence (3.5 characters) before a request.
	frameDelay time.Duration
}

func (t *rtuTransport) open() error {
	p, err := serial.Open(&t.cfg)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.port = p
	t.mu.Unlock()
	return nil
}

func (t *rtuTransport) close() error {
	t.mu.Lock()
	p := t.port
	t.port = nil
	t.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Close()
}

// Send implements modbus.Transporter. Only the connector's goroutine
// calls it.
func (t *rtuTransport) Send(req []byte) ([]byte, error) {
	t.mu.Lock()
	p := t.port
	t.mu.Unlock()
	if p == nil {
		return nil, errClosed
	}
	time.Sleep(t.frameDelay) // the line's inter-frame silence, 2 ms at 19200 Bd
	if _, err := p.Write(req); err != nil {
		return nil, err
	}
	var buf [256]byte
	if _, err := io.ReadFull(p, buf[:2]); err != nil {
		return nil, err
	}
	want := 5 // exception: address, function|0x80, code, CRC
	if buf[1]&0x80 == 0 {
		want = replyLength(req)
		if want <= 0 {
			if _, err := io.ReadFull(p, buf[2:3]); err != nil {
				return nil, err
			}
			want = 3 + int(buf[2]) + 2
		}
	}
	if want > len(buf) || want < 4 {
		return nil, fmt.Errorf("modbus: reply of %d bytes", want)
	}
	got := 2
	if buf[1]&0x80 == 0 && replyLength(req) <= 0 {
		got = 3
	}
	if _, err := io.ReadFull(p, buf[got:want]); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf[:want]...), nil
}

// replyLength is the length of a normal RTU reply to req, or 0 when it
// is given by the reply's byte count.
func replyLength(req []byte) int {
	switch req[1] {
	case 1, 2, 3, 4:
		return 0
	case 5, 6, 15, 16:
		return 8
	}
	return 0
}
