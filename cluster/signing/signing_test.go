package signing

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixedClock returns a clock that reads *at.
func fixedClock(at *time.Time) func() time.Time { return func() time.Time { return *at } }

func TestRoundTrip(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		name   string
		secret string
		msg    string
		signed bool
	}{
		{"signed", "a-long-random-secret", "hello", true},
		{"signed empty payload", "s", "", true},
		{"unsigned", "", "hello", false},
		{"unsigned empty payload", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New([]byte(tc.secret), &Options{Now: fixedClock(&now)})
			env := s.Sign([]byte(tc.msg))
			wantLen := HeaderSize + len(tc.msg)
			if tc.signed {
				wantLen += MACSize
			}
			if len(env) != wantLen {
				t.Fatalf("envelope is %d bytes, want %d", len(env), wantLen)
			}
			m, err := s.Verify(env)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if string(m.Payload) != tc.msg || m.Signed != tc.signed || !m.SentAt.Equal(now) {
				t.Fatalf("got %+v, want payload %q signed %v sent %v", m, tc.msg, tc.signed, now)
			}
			if s.Enabled() != tc.signed {
				t.Fatalf("Enabled() = %v, want %v", s.Enabled(), tc.signed)
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	now := t0
	clock := &Options{Now: fixedClock(&now)}
	good := New([]byte("secret-1"), clock)
	env := good.Sign([]byte("announcement"))
	flip := func(i int) []byte {
		b := bytes.Clone(env)
		b[i] ^= 0x01
		return b
	}
	unsigned := New(nil, clock).Sign([]byte("announcement"))
	for _, tc := range []struct {
		name     string
		verifier *Signer
		in       []byte
		want     error
	}{
		{"other secret", New([]byte("secret-2"), clock), env, ErrBadSignature},
		{"payload bit flipped", good, flip(HeaderSize + 3), ErrBadSignature},
		{"timestamp bit flipped", good, flip(11), ErrBadSignature},
		{"MAC bit flipped", good, flip(len(env) - 1), ErrBadSignature},
		{"truncated MAC", good, env[:len(env)-1], ErrBadSignature},
		{"signed flag cleared", good, flipFlag(env), ErrUnsigned},
		{"unsigned to a node with a secret", good, unsigned, ErrUnsigned},
		{"signed to a node without a secret", New(nil, clock), env, ErrUnexpectedSignature},
		{"bad magic", good, flip(0), ErrMalformed},
		{"bad version", good, flip(2), ErrMalformed},
		{"unknown flag", good, flipBit(env, 3, 0x80), ErrMalformed},
		{"empty", good, nil, ErrMalformed},
		{"header only, signed flag", good, env[:HeaderSize], ErrMalformed},
		{"header plus half a MAC", good, env[:HeaderSize+MACSize/2], ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.verifier.Verify(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", m, err, tc.want)
			}
		})
	}
}

func flipFlag(env []byte) []byte { return flipBit(env, 3, flagSigned) }

func flipBit(env []byte, i int, bit byte) []byte {
	b := bytes.Clone(env)
	b[i] ^= bit
	return b
}

func TestWindow(t *testing.T) {
	sent := t0
	sender := New([]byte("k"), &Options{Now: fixedClock(&sent)})
	env := sender.Sign([]byte("x"))
	for _, tc := range []struct {
		name    string
		window  time.Duration
		at      time.Duration // receiver's clock minus the send time
		wantErr bool
	}{
		{"just sent", 0, 0, false},
		{"at the default window", 0, DefaultWindow, false},
		{"beyond the default window", 0, DefaultWindow + time.Millisecond, true},
		{"from the future within", 0, -DefaultWindow, false},
		{"from the future beyond", 0, -DefaultWindow - time.Millisecond, true},
		{"custom window", 5 * time.Second, 6 * time.Second, true},
		{"check off", -1, 1000 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := sent.Add(tc.at)
			r := New([]byte("k"), &Options{Window: tc.window, Now: fixedClock(&now)})
			_, err := r.Verify(env)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				var se *StaleError
				if !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.Skew != tc.at {
					t.Fatalf("error %v, want a StaleError with skew %v", err, tc.at)
				}
			}
		})
	}
}

func TestSignTimestampsStrictlyIncrease(t *testing.T) {
	now := t0 // a clock that never moves: every Sign must still differ
	s := New([]byte("k"), &Options{Now: fixedClock(&now), Window: -1})
	const workers, each = 4, 200
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				m, err := s.Verify(s.Sign(nil))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[m.SentAt.UnixNano()] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("%d distinct timestamps from %d Sign calls", len(seen), workers*each)
	}
}

func TestSum(t *testing.T) {
	a, b, none := New([]byte("a"), nil), New([]byte("b"), nil), New(nil, nil)
	data := []byte("cluster=line-1\nnode=gw-1")
	sum := a.Sum(data)
	for _, tc := range []struct {
		name string
		s    *Signer
		data []byte
		sum  []byte
		want error
	}{
		{"same secret", a, data, sum, nil},
		{"other secret", b, data, sum, ErrBadSignature},
		{"other data", a, []byte("cluster=line-2\nnode=gw-1"), sum, ErrBadSignature},
		{"truncated", a, data, sum[:16], ErrBadSignature},
		{"missing with a secret", a, data, nil, ErrUnsigned},
		{"present without a secret", none, data, sum, ErrUnexpectedSignature},
		{"absent without a secret", none, data, nil, nil},
		{"nil signer", nil, data, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.CheckSum(tc.data, tc.sum); !errors.Is(err, tc.want) {
				t.Fatalf("CheckSum = %v, want %v", err, tc.want)
			}
		})
	}
	// The envelope key and the value key differ: a Sum is not an envelope MAC.
	env := a.Sign(data)
	if bytes.Equal(env[len(env)-MACSize:], a.Sum(env[:len(env)-MACSize])) {
		t.Fatal("Sum and the envelope MAC use the same key")
	}
}

func TestNilSigner(t *testing.T) {
	var s *Signer
	if s.Enabled() {
		t.Fatal("nil Signer enabled")
	}
	m, err := s.Verify(s.Sign([]byte("x")))
	if err != nil || string(m.Payload) != "x" || m.Signed {
		t.Fatalf("nil Signer round trip: %+v, %v", m, err)
	}
}

func TestPeekDoesNotVerify(t *testing.T) {
	env := New([]byte("a"), nil).Sign([]byte("payload"))
	env[len(env)-1] ^= 1
	m, err := Peek(env)
	if err != nil || string(m.Payload) != "payload" || !m.Signed {
		t.Fatalf("Peek = %+v, %v", m, err)
	}
	// Payload must not reach into the MAC when appended to.
	_ = append(m.Payload, 'x')
	if env[HeaderSize+len("payload")] == 'x' {
		t.Fatal("appending to Payload overwrote the MAC")
	}
}

// TestAppendSignKeepsWhatPrecedes: AppendSign appends the envelope after
// what dst holds, and envelopes signed and verified from many goroutines
// at once (the MACs are pooled) all verify, and a changed one does not.
func TestAppendSignKeepsWhatPrecedes(t *testing.T) {
	s := New([]byte("secret"), nil)
	out := s.AppendSign([]byte("prefix"), []byte("payload"))
	if string(out[:6]) != "prefix" {
		t.Fatalf("prefix overwritten: %q", out[:6])
	}
	if m, err := s.Verify(out[6:]); err != nil || string(m.Payload) != "payload" {
		t.Fatalf("Verify: %q, %v", m.Payload, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 200 {
				msg := fmt.Appendf(nil, "goroutine %d message %d", g, i)
				buf = s.AppendSign(buf[:0], msg)
				if m, err := s.Verify(buf); err != nil || !bytes.Equal(m.Payload, msg) {
					errs <- fmt.Errorf("verify %s: %q, %v", msg, m.Payload, err)
					return
				}
				buf[len(buf)-1] ^= 1
				if _, err := s.Verify(buf); !errors.Is(err, ErrBadSignature) {
					errs <- fmt.Errorf("a changed MAC: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkSignVerify is one link frame of 64 KB signed into a reused
// buffer and verified.
func BenchmarkSignVerify(b *testing.B) {
	s := New([]byte("secret"), nil)
	frame := bytes.Repeat([]byte("f"), 64<<10)
	var buf []byte
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendSign(buf[:0], frame)
		if _, err := s.Verify(buf); err != nil {
			b.Fatal(err)
		}
	}
}
