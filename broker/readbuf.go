package broker

import (
	"io"
	"sync"
)

// readBufSize is the size of the pooled read buffers, and the largest
// packet read without a copy.
const readBufSize = 4096

// readBufs holds the read buffers that idle connections (see idleProbe)
// gave back.
var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// readBuf is a connection's input buffer. After idle, it reads into
// small, which holds a keep-alive packet whole; it takes a pooled buffer
// when more bytes are needed at once, and keeps it until idle is called
// again with no byte left in it. Only the reader goroutine uses it.
type readBuf struct {
	small  [8]byte
	pooled *[readBufSize]byte // nil while buf is small
	buf    []byte             // small[:] or pooled[:]; nil before the first read
	r, w   int                // buf[r:w] is read and not yet consumed
}

// idle gives the pooled buffer back when no byte waits in it, so that a
// connection that waits for its next packet holds none.
func (b *readBuf) idle() {
	if b.r < b.w {
		return
	}
	b.r, b.w = 0, 0
	b.buf = b.small[:]
	if b.pooled != nil {
		readBufs.Put(b.pooled)
		b.pooled = nil
	}
}

// buffered returns the number of bytes read and not yet consumed.
func (b *readBuf) buffered() int { return b.w - b.r }

// release gives the pooled buffer back whatever it holds (connection
// closed).
func (b *readBuf) release() {
	b.r, b.w = 0, 0
	b.idle()
}

// ensure reads from src until at least n bytes (n <= readBufSize) are
// buffered, contiguous at buf[r:]. An error is returned only when fewer
// than n bytes could be read; EOF after some of them is
// io.ErrUnexpectedEOF.
func (b *readBuf) ensure(src io.Reader, n int) error {
	if b.buf == nil {
		b.buf = b.small[:]
	}
	if b.r == b.w {
		b.r, b.w = 0, 0 // read into the whole buffer
	}
	for b.w-b.r < n {
		if len(b.buf)-b.r < n || b.w == len(b.buf) {
			b.makeRoom(n)
		}
		got, err := src.Read(b.buf[b.w:])
		b.w += got
		if err != nil && b.w-b.r < n {
			if err == io.EOF && b.w > b.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// makeRoom moves the buffered bytes to the start of a buffer that holds
// n bytes and has room to read more, taking a pooled one if needed.
func (b *readBuf) makeRoom(n int) {
	if b.pooled == nil && (n > len(b.small) || b.w-b.r == len(b.small)) {
		p := readBufs.Get().(*[readBufSize]byte)
		b.w = copy(p[:], b.buf[b.r:b.w])
		b.r = 0
		b.pooled, b.buf = p, p[:]
		return
	}
	b.w = copy(b.buf, b.buf[b.r:b.w])
	b.r = 0
}

// take consumes n buffered bytes (ensured before) and returns them; they
// stay valid until the next ensure.
func (b *readBuf) take(n int) []byte {
	p := b.buf[b.r : b.r+n : b.r+n]
	b.r += n
	return p
}

// readFull fills p with the buffered bytes, then reads the rest from src
// directly.
func (b *readBuf) readFull(src io.Reader, p []byte) (int, error) {
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	if n == len(p) {
		return n, nil
	}
	m, err := io.ReadFull(src, p[n:])
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n + m, err
}
