package dataplane

// deque is a sequence kept oldest first, appended at the end and cut at
// the front, in chunks of dequeChunk that are never copied. The outbox's
// records and a partition's copies in memory were slices cut at their
// front: each time append outgrew the capacity left, the slice was copied
// whole (thousands of records, some 100 bytes each), and under load that
// was the largest single cost of a node (a third of a copy's CPU). The
// chunks the front drops are used again.
type deque[T any] struct {
	chunks [][]T // each dequeChunk long
	spare  [][]T // dropped chunks, cleared, for the next pushes
	head   int   // index of the oldest element in chunks[0]
	n      int
}

const dequeChunk = 256

func (d *deque[T]) len() int { return d.n }

// at is element i, 0 the oldest.
func (d *deque[T]) at(i int) *T {
	i += d.head
	return &d.chunks[i/dequeChunk][i%dequeChunk]
}

func (d *deque[T]) push(v T) {
	if d.head+d.n == len(d.chunks)*dequeChunk {
		if k := len(d.spare); k > 0 {
			d.chunks = append(d.chunks, d.spare[k-1])
			d.spare = d.spare[:k-1]
		} else {
			d.chunks = append(d.chunks, make([]T, dequeChunk))
		}
	}
	*d.at(d.n) = v
	d.n++
}

// dropOldest removes the k oldest elements.
func (d *deque[T]) dropOldest(k int) {
	var zero T
	for i := range k {
		*d.at(i) = zero // what they point to goes to the collector
	}
	d.head += k
	d.n -= k
	if c := d.head / dequeChunk; c > 0 {
		d.spare = append(d.spare, d.chunks[:c]...)
		d.chunks = append(d.chunks[:0], d.chunks[c:]...)
		d.head -= c * dequeChunk
	}
}
