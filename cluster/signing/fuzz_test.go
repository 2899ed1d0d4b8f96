package signing

import (
	"bytes"
	"testing"
	"time"
)

// FuzzVerify checks that Verify never panics, and that whatever it accepts
// is exactly an envelope the same secret could have produced: a payload
// between the header and the MAC, the MAC of everything before it.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_740_830_400, 0)
	opts := &Options{Now: func() time.Time { return now }}
	signed, unsigned := New([]byte("fuzz-secret"), opts), New(nil, opts)
	f.Add(signed.Sign([]byte("hello")))
	f.Add(signed.Sign(nil))
	f.Add(unsigned.Sign([]byte("hello")))
	f.Add([]byte("GS\x01\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, s := range []*Signer{signed, unsigned} {
			orig := bytes.Clone(in)
			m, err := s.Verify(in)
			if !bytes.Equal(in, orig) {
				t.Fatal("Verify modified its input")
			}
			if err != nil {
				continue
			}
			want := len(in) - HeaderSize
			if m.Signed {
				want -= MACSize
			}
			if len(m.Payload) != want || !bytes.Equal(m.Payload, in[HeaderSize:HeaderSize+want]) {
				t.Fatalf("payload %q, want the %d bytes after the header", m.Payload, want)
			}
			if m.Signed != s.Enabled() {
				t.Fatalf("accepted signed=%v with a signer enabled=%v", m.Signed, s.Enabled())
			}
		}
	})
}
