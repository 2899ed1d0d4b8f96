package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gantry/broker/packet"
	"gantry/cluster/wire"
)

// Link timing. A link pings every linkPingEvery whatever else it writes,
// and counts as down once the peer has answered nothing (no PUBACK, no
// PINGRESP) for linkSilentMax: a half-open connection (the peer frozen,
// or the network cut without a FIN) ends there, not at the write
// deadline. Its CONNECT asks for a keep alive of linkKeepAlive, so the
// peer's broker closes this node's link into it after 1.5 times that
// without a packet, and the peer then takes this node's interest for
// stale (it sends it everything) instead of routing by filters this node
// can no longer update. A write that takes longer than linkSilentMax (the
// peer reads nothing) ends the connection too.
const (
	linkKeepAlive  = 2 * time.Second
	linkPingEvery  = time.Second
	linkSilentMax  = 3 * time.Second
	linkDialWait   = 2 * time.Second
	linkBackoffMin = 100 * time.Millisecond
	linkBackoffMax = 5 * time.Second
	// maxFrameRecords is the bytes of records one frame carries at most;
	// the peer's Maximum Packet Size lowers it.
	maxFrameRecords = 256 << 10
	// maxRecordBytes is the largest message that crosses to other nodes:
	// one record alone in a frame, under a peer's Maximum Packet Size of
	// at least maxFrameRecords.
	maxRecordBytes = maxFrameRecords - 1024
	// maxInflightFrames bounds reliable frames waiting for confirmation;
	// the peer's Receive Maximum lowers it.
	maxInflightFrames = 32
)

// link is this node's MQTT connection to one peer, as the cluster user:
// one goroutine dials and writes frames from the queue, another reads the
// peer's acknowledgements. It reconnects with backoff until stopped.
type link struct {
	p    *Plane
	peer string
	ps   *peerStream

	addr atomic.Pointer[string] // the peer's MQTT address, host:port

	connected  atomic.Bool
	sentFrames atomic.Uint64
	connects   atomic.Uint64
	lastErr    atomic.Pointer[string]
	// lastWrite is when a packet was last written on the current
	// connection (unix nanoseconds); peerKeepAlive the keep alive the
	// peer's broker applies to it. Once the connection is down the peer
	// may still route by this node's interest until it notices the
	// silence (staleBy).
	lastWrite     atomic.Int64
	peerKeepAlive atomic.Int64
	// heard is when the peer last sent a packet (unix nanoseconds).
	heard atomic.Int64
	// caughtDropped is the peer's dropped records its last catch-up covered.
	caughtDropped atomic.Uint64

	cancel context.CancelFunc
	done   chan struct{}
}

func (l *link) setAddr(addr string) { l.addr.Store(&addr) }

// staleBy is when the peer, if this link is down, has surely noticed it
// (its broker's keep alive after the last packet written) and no longer
// routes by what this node announced on it; zero while the link is up or
// was never up.
func (l *link) staleBy() time.Time {
	if l.connected.Load() || l.lastWrite.Load() == 0 {
		return time.Time{}
	}
	return time.Unix(0, l.lastWrite.Load()).Add(time.Duration(l.peerKeepAlive.Load()) * 3 / 2)
}

// run connects, serves the connection until it fails, and reconnects,
// until ctx ends.
func (l *link) run(ctx context.Context) {
	defer close(l.done)
	backoff := linkBackoffMin
	for ctx.Err() == nil {
		start := time.Now()
		err := l.serve(ctx)
		l.connected.Store(false) // first: the waits setUp ends see the link down
		l.p.out.setUp(l.ps, false)
		if ctx.Err() != nil {
			return
		}
		msg := err.Error()
		l.lastErr.Store(&msg)
		l.p.warn(l.peer, "link to "+l.peer+" down", err)
		if time.Since(start) > linkBackoffMax {
			backoff = linkBackoffMin // it had been up: try again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, linkBackoffMax)
	}
}

// serve runs one connection.
func (l *link) serve(ctx context.Context) error {
	addr := *l.addr.Load()
	dctx, cancel := context.WithTimeout(ctx, linkDialWait)
	nc, err := l.p.dial(dctx, addr)
	cancel()
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	br := bufio.NewReaderSize(nc, 4096)
	limits, err := l.handshake(nc, br)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	l.connects.Add(1)
	now := time.Now().UnixNano()
	l.lastWrite.Store(now)
	l.heard.Store(now)
	l.connected.Store(true)
	l.p.linkUp(l.ps) // the interest snapshot goes first
	l.catchUpIfDropped()
	var wg sync.WaitGroup
	readErr := make(chan error, 1)
	acked := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		readErr <- l.readAcks(br, acked)
		nc.Close()
	}()
	werr := l.writeFrames(ctx, nc, l.p.linkConns.Add(1), limits, readErr, acked)
	nc.Close()
	wg.Wait()
	return werr
}

// peerLimits are what the peer's CONNACK allows.
type peerLimits struct {
	inflight int
	maxBytes int
}

// handshake sends CONNECT as the cluster user and reads the CONNACK.
func (l *link) handshake(nc net.Conn, br *bufio.Reader) (peerLimits, error) {
	c := packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true,
		KeepAlive: uint16(linkKeepAlive / time.Second), ClientID: linkClientPrefix + l.p.opts.NodeName,
		UsernameFlag: true, Username: l.p.opts.Username, PasswordFlag: true, Password: l.p.token(l.peer)}
	nc.SetDeadline(time.Now().Add(linkDialWait))
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(c.Append(nil)); err != nil {
		return peerLimits{}, err
	}
	h, body, err := readPacket(br)
	if err != nil {
		return peerLimits{}, err
	}
	var ack packet.Connack
	if h.Type != packet.CONNACK {
		return peerLimits{}, fmt.Errorf("got %v, want CONNACK", h.Type)
	}
	if err := packet.DecodeConnack(h, body, packet.V5, &ack); err != nil {
		return peerLimits{}, err
	}
	if ack.ReasonCode.IsError() {
		return peerLimits{}, fmt.Errorf("refused: %w", ack.ReasonCode)
	}
	lim := peerLimits{inflight: maxInflightFrames, maxBytes: maxFrameRecords}
	if ack.Props.IsSet(packet.PropReceiveMaximum) && int(ack.Props.ReceiveMaximum) < lim.inflight {
		lim.inflight = int(ack.Props.ReceiveMaximum)
	}
	if ack.Props.IsSet(packet.PropMaximumPacketSize) {
		// Room for the PUBLISH header, topic and the signing envelope.
		lim.maxBytes = min(lim.maxBytes, int(ack.Props.MaximumPacketSize)-1024)
	}
	ka := linkKeepAlive
	if ack.Props.IsSet(packet.PropServerKeepAlive) && ack.Props.ServerKeepAlive > 0 {
		ka = time.Duration(ack.Props.ServerKeepAlive) * time.Second
	}
	l.peerKeepAlive.Store(int64(ka))
	if lim.maxBytes < 1024 {
		return peerLimits{}, fmt.Errorf("peer's Maximum Packet Size %d is too small for the data plane", ack.Props.MaximumPacketSize)
	}
	return lim, nil
}

// writeFrames writes the queue's records as frames until the connection
// fails or ctx ends.
// conn numbers the connection in the frames' headers (wire.Header.Conn).
func (l *link) writeFrames(ctx context.Context, nc net.Conn, conn uint64, lim peerLimits, readErr <-chan error, acked <-chan struct{}) error {
	tick := time.NewTicker(linkPingEvery / 4)
	defer tick.Stop()
	lastPing := time.Now()
	// ping writes a PINGREQ: the peer's PINGRESP shows it alive even
	// while only unconfirmed (QoS 0) frames travel.
	ping := func() error {
		nc.SetWriteDeadline(time.Now().Add(linkSilentMax))
		if _, err := nc.Write(packet.AppendPingreq(nil)); err != nil {
			return err
		}
		lastPing = time.Now()
		l.lastWrite.Store(lastPing.UnixNano())
		return nil
	}
	var pid uint16
	var frame, signed, out []byte
	want := func(topic string) bool { return l.p.wants(l.peer, topic) }
	nextPID := func() uint16 {
		if pid++; pid == 0 {
			pid = 1
		}
		return pid
	}
	for {
		if l.p.out.inflight(l.ps) < lim.inflight {
			frame = frame[:0]
			head := func(decided uint64, refused []uint64) {
				frame = wire.AppendHeaderDecided(frame, l.p.opts.NodeName, l.p.boot, conn, decided, refused)
			}
			fpid, n := l.p.out.take(l.ps, lim.maxBytes, head, want, func(seq uint64, msg []byte, groups []string, rep *wire.Rep) int {
				frame = wire.AppendRecordRep(frame, seq, msg, groups, rep)
				return wire.RecordSizeRep(seq, msg, groups, rep)
			}, nextPID)
			if n > 0 {
				signed = l.p.opts.Signer.AppendSign(signed[:0], frame)
				pub := packet.Publish{Topic: []byte(frameTopic), Payload: signed}
				if fpid != 0 {
					pub.QoS, pub.PacketID = 1, fpid
				}
				out = pub.Append(out[:0], packet.V5)
				nc.SetWriteDeadline(time.Now().Add(linkSilentMax))
				if _, err := nc.Write(out); err != nil {
					return err
				}
				l.sentFrames.Add(1)
				l.lastWrite.Store(time.Now().UnixNano())
				if err := l.silence(); err != nil {
					return err
				}
				if time.Since(lastPing) >= linkPingEvery {
					if err := ping(); err != nil {
						return err
					}
				}
				continue // more may be pending
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			return err
		case <-l.ps.wake:
		case <-acked:
		case <-tick.C:
			if err := l.silence(); err != nil {
				return err
			}
			if time.Since(lastPing) >= linkPingEvery {
				if err := ping(); err != nil {
					return err
				}
			}
		}
	}
}

// silence fails once the peer has sent nothing for linkSilentMax.
func (l *link) silence() error {
	if silent := time.Since(time.Unix(0, l.heard.Load())); silent > linkSilentMax {
		return fmt.Errorf("peer silent for %v (frozen, or the network cut)", silent.Round(time.Millisecond))
	}
	return nil
}

// readAcks reads the peer's packets: PUBACKs confirm frames.
func (l *link) readAcks(br *bufio.Reader, acked chan<- struct{}) error {
	var ack packet.Ack
	for {
		h, body, err := readPacket(br)
		if err != nil {
			return err
		}
		l.heard.Store(time.Now().UnixNano())
		switch h.Type {
		case packet.PUBACK:
			if err := packet.DecodeAck(h, body, packet.V5, &ack); err != nil {
				return err
			}
			// 0x97: delivered and stored, but the frame held a copy written
			// in an epoch the peer knows is over; it counts for none of
			// the frame's quorum writes.
			stale := ack.ReasonCode == errStaleCopy
			if ack.ReasonCode.IsError() && !stale {
				return fmt.Errorf("peer refused a frame: %w", ack.ReasonCode)
			}
			if l.p.out.confirm(l.peer, l.ps, ack.PacketID, stale) {
				select {
				case acked <- struct{}{}:
				default:
				}
			}
		case packet.PINGRESP:
		case packet.DISCONNECT:
			var d packet.Disconnect
			packet.DecodeDisconnect(h, body, packet.V5, &d)
			return fmt.Errorf("peer disconnected the link: %w", d.ReasonCode)
		default:
			return fmt.Errorf("unexpected %v on a link", h.Type)
		}
	}
}

// readPacket reads one MQTT packet; the body is a fresh slice.
func readPacket(br *bufio.Reader) (packet.FixedHeader, []byte, error) {
	var hdr [5]byte
	n := 0
	for {
		b, err := br.ReadByte()
		if err != nil {
			return packet.FixedHeader{}, nil, err
		}
		hdr[n] = b
		n++
		if n >= 2 && (b&0x80 == 0 || n == 5) {
			break
		}
	}
	h, _, err := packet.DecodeFixedHeader(hdr[:n])
	if err != nil {
		return h, nil, err
	}
	if h.Remaining > 1<<20 {
		return h, nil, errors.New("link: packet too large")
	}
	body := make([]byte, h.Remaining)
	if _, err := io.ReadFull(br, body); err != nil {
		return h, nil, err
	}
	return h, body, nil
}
