package segfile

import (
	"errors"
	"os"
	"slices"
	"testing"
)

// TestSegments: segments created in a missing directory are listed in
// order (names sort as numbers), other files are passed over, and a
// removal up to a number leaves the run after it.
func TestSegments(t *testing.T) {
	dir := t.TempDir() + "/db.wal"
	for _, n := range []uint64{10, 2, 9} {
		f, err := Create(dir, n, []byte("HDR1"))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	os.WriteFile(dir+"/notes.txt", nil, 0o600)
	if ns, err := List(dir); err != nil || !slices.Equal(ns, []uint64{2, 9, 10}) {
		t.Fatalf("List = %v, %v", ns, err)
	}
	if raw, _ := os.ReadFile(Path(dir, 9)); string(raw) != "HDR1" {
		t.Fatalf("segment 9 holds %q, want its header", raw)
	}
	if err := RemoveUpTo(dir, 9); err != nil {
		t.Fatal(err)
	}
	if ns, _ := List(dir); !slices.Equal(ns, []uint64{10}) {
		t.Fatalf("after RemoveUpTo(9): %v", ns)
	}
	if ns, err := List(t.TempDir() + "/missing"); err != nil || ns != nil {
		t.Fatalf("a missing directory: %v, %v", ns, err)
	}
}

// TestFrames: sealed frames cut back to their bodies; one cut short or
// with a flipped bit is torn.
func TestFrames(t *testing.T) {
	var b []byte
	for _, body := range []string{"one", "", "three"} {
		var start int
		b, start = BeginFrame(b)
		b = append(b, body...)
		SealFrame(b, start)
	}
	var got []string
	for rest := b; len(rest) > 0; {
		body, next, err := CutFrame(rest)
		if err != nil {
			t.Fatal(err)
		}
		got, rest = append(got, string(body)), next
	}
	if !slices.Equal(got, []string{"one", "", "three"}) {
		t.Fatalf("frames %q", got)
	}
	if _, _, err := CutFrame(b[:FrameHead+2]); !errors.Is(err, ErrTorn) {
		t.Fatalf("a frame cut short: %v", err)
	}
	bad := slices.Clone(b)
	bad[FrameHead] ^= 1
	if _, _, err := CutFrame(bad); !errors.Is(err, ErrTorn) {
		t.Fatalf("a damaged frame: %v", err)
	}
}
