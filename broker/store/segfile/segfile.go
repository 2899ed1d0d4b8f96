// Package segfile is the file side of a write-ahead log kept as numbered
// segment files in a directory beside its database: naming, listing,
// durable creation and removal of segments, and the checksummed frames
// inside them. broker/store's log and the cluster data plane's log share
// it; each decides its own segment header and what a frame's body holds.
//
// A segment is named by its number, zero-padded to 20 digits, with the
// suffix ".log", so that names sort as numbers. A frame is a little-endian
// u32 body length, a u32 CRC-32C of the body, then the body; a body is
// never empty, so that zeros after the last frame (Reserve) end a segment.
//
// Reserve writes zeros ahead of the frames, a ReserveStep at a time: an
// fdatasync of a file that grew must commit the file system's journal
// (the new size), and ext4 has one journal for the whole file system, so
// with the broker's and the data plane's logs, and on a loopback cluster
// three nodes', fsyncing at once each waited for the others' commits. A
// frame written inside space already written needs no journal commit
// (see the commit that added Reserve for the measurement; no benchmark
// here repeats it).
package segfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	// Suffix ends every segment's name.
	Suffix = ".log"
	digits = 20
	// FrameHead is the size of a frame's head: length, then checksum.
	FrameHead = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrTorn marks a frame cut short or with a bad checksum.
var ErrTorn = errors.New("torn or damaged frame")

// ErrEnd marks the end of a segment's frames: a head of zeros, the space
// Reserve wrote ahead of them.
var ErrEnd = errors.New("end of the frames")

// ReserveStep is how much space Reserve writes ahead of the frames.
const ReserveStep = 1 << 20

var zeros [64 << 10]byte

// Reserve makes sure f holds written bytes (zeros, beyond its frames) up
// to end, writing from *reserved on, ReserveStep past end, and moving
// *reserved; the caller's next fdatasync makes them durable with its
// frame. On failure (a full disk, which may still take the frame alone)
// it cuts f back to *reserved and returns the error: the caller writes
// its frame all the same.
func Reserve(f *os.File, reserved *int64, end int64) error {
	if end <= *reserved {
		return nil
	}
	to := end + ReserveStep
	for off := *reserved; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			_ = f.Truncate(*reserved)
			return err
		}
		off += n
	}
	*reserved = to
	return nil
}

// Dir is the log directory of the database file at dbPath.
func Dir(dbPath string) string { return dbPath + ".wal" }

// Path is segment n's file in dir.
func Path(dir string, n uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s", digits, n, Suffix))
}

// List returns the numbers of dir's segments in ascending order; a
// missing dir has none.
func List(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log directory %s: %w", dir, err)
	}
	var ns []uint64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), Suffix)
		if !ok || len(name) != digits {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 64); err == nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// RemoveUpTo deletes the segments numbered up to and including upTo,
// oldest first, and stops at the first it cannot delete: the segments
// left are always a run up to the newest, which replays in order.
func RemoveUpTo(dir string, upTo uint64) error {
	ns, err := List(dir)
	if err != nil {
		return err
	}
	for _, n := range ns {
		if n > upTo {
			break
		}
		if err := os.Remove(Path(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Create starts segment n in dir (creating dir, durably, when missing):
// it writes header and makes the file and its directory entry durable
// before any frame depends on them. The file is open for writing.
func Create(dir string, n uint64, header []byte) (*os.File, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create log directory: %w", err)
		}
		if err := SyncDir(filepath.Dir(dir)); err != nil { // the directory's own entry
			return nil, fmt.Errorf("create log directory: %w", err)
		}
	}
	path := Path(dir, n)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log segment: %w", err)
	}
	if _, err = f.WriteAt(header, 0); err == nil {
		err = Fdatasync(f)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create log segment %s: %w", path, err)
	}
	return f, nil
}

// SyncDir makes a creation, rename or removal in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// BeginFrame appends room for a frame's head to dst and returns where the
// frame starts; the body is appended after it, then SealFrame fills the
// head.
func BeginFrame(dst []byte) ([]byte, int) {
	start := len(dst)
	return append(dst, make([]byte, FrameHead)...), start
}

// SealFrame fills the head of the frame that starts at start in b (its
// body is the rest of b, never empty) and returns the frame, head
// included.
func SealFrame(b []byte, start int) []byte {
	body := b[start+FrameHead:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, castagnoli))
	return b[start:]
}

// CutFrame splits the first frame's checked body off b; ErrTorn when it
// is cut short or damaged, ErrEnd at the zeros after the last frame.
func CutFrame(b []byte) (body, rest []byte, err error) {
	if len(b) < FrameHead {
		return nil, nil, ErrTorn
	}
	n := binary.LittleEndian.Uint32(b)
	sum := binary.LittleEndian.Uint32(b[4:])
	if n == 0 && sum == 0 {
		return nil, nil, ErrEnd
	}
	if uint64(n) > uint64(len(b)-FrameHead) {
		return nil, nil, ErrTorn
	}
	body = b[FrameHead : FrameHead+int(n)]
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, nil, ErrTorn
	}
	return body, b[FrameHead+int(n):], nil
}
