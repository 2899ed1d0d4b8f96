package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"
	"time"
)

// Envelope layout constants (see the package documentation).
const (
	HeaderSize = 12 // magic, version, flags, timestamp
	MACSize    = sha256.Size

	version     = 1
	flagSigned  = 1 << 0
	knownFlags  = flagSigned
	envelopeKey = "gantry/signing/envelope/v1"
	valueKey    = "gantry/signing/value/v1"
)

var magic = [2]byte{'G', 'S'}

// DefaultWindow is how far an envelope's timestamp may be from the
// receiver's clock, in either direction, when Options.Window is 0.
const DefaultWindow = time.Minute

// Errors of Verify and CheckSum.
var (
	ErrMalformed           = errors.New("signing: malformed envelope")
	ErrBadSignature        = errors.New("signing: bad signature (forged, or signed with another SharedSecret)")
	ErrUnsigned            = errors.New("signing: unsigned message, but this node has a SharedSecret (set the same SharedSecret on every node)")
	ErrUnexpectedSignature = errors.New("signing: signed message, but this node has no SharedSecret (set the same SharedSecret on every node)")
	ErrStale               = errors.New("signing: timestamp outside the accepted window")
)

// Options tune a Signer; nil means the defaults.
type Options struct {
	// Window is how far an envelope's timestamp may be from this node's
	// clock: 0 means DefaultWindow, a negative value turns the check off.
	Window time.Duration
	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
}

// Signer signs and verifies envelopes with one secret.
type Signer struct {
	envKey   []byte // derived MAC key of envelopes; nil without a secret
	valKey   []byte // derived MAC key of Sum; nil without a secret
	window   time.Duration
	now      func() time.Time
	lastSent atomic.Int64 // last timestamp Sign wrote, Unix ns
	// macs are HMACs keyed with envKey, reset and reused: a new one per
	// envelope was two hashes' setup and an allocation per frame.
	macs sync.Pool
}

// Message is a verified (or, from Peek, merely parsed) envelope.
type Message struct {
	Payload []byte    // aliases the envelope passed in: copy it before reusing that buffer
	SentAt  time.Time // the sender's clock when it signed
	Signed  bool      // a MAC was present (and, from Verify, valid)
}

// New returns a Signer for secret. An empty secret gives a Signer that
// writes and accepts only unsigned envelopes.
func New(secret []byte, opts *Options) *Signer {
	s := &Signer{window: DefaultWindow, now: time.Now}
	if opts != nil {
		if opts.Window != 0 {
			s.window = opts.Window
		}
		if opts.Now != nil {
			s.now = opts.Now
		}
	}
	if len(secret) > 0 {
		s.envKey = derive(secret, envelopeKey)
		s.valKey = derive(secret, valueKey)
		s.macs.New = func() any { return hmac.New(sha256.New, s.envKey) }
	}
	return s
}

// envMAC appends the envelope MAC of msg to dst.
func (s *Signer) envMAC(dst, msg []byte) []byte {
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(msg)
	dst = m.Sum(dst)
	s.macs.Put(m)
	return dst
}

func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Enabled reports whether the Signer has a secret, that is whether it
// signs and requires signatures.
func (s *Signer) Enabled() bool { return s != nil && s.envKey != nil }

// Window returns the accepted distance between an envelope's timestamp and
// this node's clock; negative means unchecked.
func (s *Signer) Window() time.Duration {
	if s == nil {
		return DefaultWindow
	}
	return s.window
}

// Sign returns msg wrapped in an envelope stamped with the current time
// (strictly later than any earlier Sign of this Signer) and, with a
// secret, its MAC.
func (s *Signer) Sign(msg []byte) []byte {
	size := HeaderSize + len(msg)
	if s.Enabled() {
		size += MACSize
	}
	return s.AppendSign(make([]byte, 0, size), msg)
}

// AppendSign is Sign appending the envelope to dst, for a writer that
// reuses its buffer (a link's frames: a new buffer per frame was zeroed
// whole, up to a frame's 256 KB, before the copy filled it).
func (s *Signer) AppendSign(dst, msg []byte) []byte {
	var now time.Time
	if s == nil {
		now = time.Now()
	} else {
		now = s.now()
	}
	ts := now.UnixNano()
	if s != nil {
		ts = s.nextTimestamp(ts)
	}
	start := len(dst)
	dst = append(dst, magic[0], magic[1], version, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	dst = append(dst, msg...)
	if s.Enabled() {
		dst[start+3] = flagSigned
		dst = s.envMAC(dst, dst[start:])
	}
	return dst
}

// nextTimestamp returns max(ts, last+1) and records it.
func (s *Signer) nextTimestamp(ts int64) int64 {
	for {
		last := s.lastSent.Load()
		next := max(ts, last+1)
		if s.lastSent.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Peek parses an envelope without checking its MAC or timestamp. Use it
// only to classify what Verify rejected (for a log line); never trust the
// payload it returns.
func Peek(signed []byte) (Message, error) {
	if len(signed) < HeaderSize || signed[0] != magic[0] || signed[1] != magic[1] {
		return Message{}, ErrMalformed
	}
	if signed[2] != version {
		return Message{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, signed[2], version)
	}
	flags := signed[3]
	if flags&^knownFlags != 0 {
		return Message{}, fmt.Errorf("%w: unknown flags %#x", ErrMalformed, flags)
	}
	m := Message{
		SentAt: time.Unix(0, int64(binary.BigEndian.Uint64(signed[4:12]))),
		Signed: flags&flagSigned != 0,
	}
	end := len(signed)
	if m.Signed {
		end -= MACSize
		if end < HeaderSize {
			return Message{}, fmt.Errorf("%w: %d bytes, too short for its MAC", ErrMalformed, len(signed))
		}
	}
	m.Payload = signed[HeaderSize:end:end]
	return m, nil
}

// Verify checks an envelope's MAC (or its absence, without a secret) and
// timestamp, and returns its payload. Errors wrap ErrMalformed,
// ErrBadSignature, ErrUnsigned, ErrUnexpectedSignature or ErrStale.
func (s *Signer) Verify(signed []byte) (Message, error) {
	m, err := Peek(signed)
	if err != nil {
		return Message{}, err
	}
	switch {
	case m.Signed && !s.Enabled():
		return Message{}, ErrUnexpectedSignature
	case !m.Signed && s.Enabled():
		return Message{}, ErrUnsigned
	case m.Signed:
		body := signed[:len(signed)-MACSize]
		var sum [MACSize]byte
		if !hmac.Equal(s.envMAC(sum[:0], body), signed[len(body):]) {
			return Message{}, ErrBadSignature
		}
	}
	if err := s.checkTime(m.SentAt); err != nil {
		return Message{}, err
	}
	return m, nil
}

func (s *Signer) checkTime(sentAt time.Time) error {
	window, now := DefaultWindow, time.Now
	if s != nil {
		window, now = s.window, s.now
	}
	if window < 0 {
		return nil
	}
	skew := now().Sub(sentAt)
	if skew > window || skew < -window {
		return &StaleError{SentAt: sentAt, Skew: skew, Window: window}
	}
	return nil
}

// StaleError is Verify's error for an envelope outside the window; it
// wraps ErrStale and tells whether the sender's clock is behind or ahead.
type StaleError struct {
	SentAt time.Time
	Skew   time.Duration // receiver's clock minus SentAt: positive = sent in the past
	Window time.Duration
}

func (e *StaleError) Error() string {
	dir := "old"
	skew := e.Skew
	if skew < 0 {
		dir, skew = "in the future", -skew
	}
	return fmt.Sprintf("signing: message timestamp %s is %v %s, beyond the %v window: a replay, or the nodes' clocks differ (synchronise them with NTP)",
		e.SentAt.UTC().Format(time.RFC3339Nano), skew.Round(time.Millisecond), dir, e.Window)
}

func (e *StaleError) Unwrap() error { return ErrStale }

// Sum returns the MAC of data for values that cannot carry an envelope
// (DNS-SD TXT records). It has no timestamp, so it does not protect
// against replay. Without a secret it returns nil.
func (s *Signer) Sum(data []byte) []byte {
	if !s.Enabled() {
		return nil
	}
	m := hmac.New(sha256.New, s.valKey)
	m.Write(data)
	return m.Sum(nil)
}

// CheckSum verifies a MAC made by Sum with the same secret. An empty sum
// is accepted only without a secret, and a non-empty one only with it,
// like Verify's rule for envelopes.
func (s *Signer) CheckSum(data, sum []byte) error {
	switch {
	case len(sum) > 0 && !s.Enabled():
		return ErrUnexpectedSignature
	case len(sum) == 0 && s.Enabled():
		return ErrUnsigned
	case len(sum) == 0:
		return nil
	}
	if !hmac.Equal(s.Sum(data), sum) {
		return ErrBadSignature
	}
	return nil
}
