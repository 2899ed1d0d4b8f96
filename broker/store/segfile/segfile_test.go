package segfile

import (
	"errors"
	"os"
	"slices"
	"strings"
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
	for _, body := range []string{"one", "two", "three"} {
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
	if !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("frames %q", got)
	}
	if _, _, err := CutFrame(make([]byte, 100)); !errors.Is(err, ErrEnd) {
		t.Fatalf("zeros after the frames: %v", err)
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

// TestReserve: frames written into reserved space read back up to the
// zeros after them (ErrEnd, not a torn frame), and the file holds written
// bytes past the last frame (up to ReserveStep beyond it), so that an
// fdatasync of the next frames finds no size to commit.
func TestReserve(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, 1, []byte("HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off, reserved := int64(4), int64(4)
	var want []string
	for i := range 40 {
		body := strings.Repeat("x", 1+i*1000)
		var b []byte
		b, start := BeginFrame(b)
		b = append(b, body...)
		frame := SealFrame(b, start)
		if err := Reserve(f, &reserved, off+int64(len(frame))); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(frame, off); err != nil {
			t.Fatal(err)
		}
		off += int64(len(frame))
		want = append(want, body)
		if reserved < off {
			t.Fatalf("reserved up to %d, frames up to %d", reserved, off)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != reserved || reserved < off || reserved > off+ReserveStep+40000 {
		t.Fatalf("file of %d bytes, reserved %d, frames end at %d", fi.Size(), reserved, off)
	}
	raw, err := os.ReadFile(Path(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rest := raw[4:]
	for {
		body, next, err := CutFrame(rest)
		if errors.Is(err, ErrEnd) {
			break
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(got), err)
		}
		got, rest = append(got, string(body)), next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d frames back, wrote %d", len(got), len(want))
	}
}
