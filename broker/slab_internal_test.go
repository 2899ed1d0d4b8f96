package broker

import "testing"

// Every pooled payload size gets a buffer that holds it and is at most a
// quarter larger; classes grow with the size, and one class has one
// buffer size.
func TestSlabClasses(t *testing.T) {
	sizes := make(map[int]int)
	last := 0
	for n := 1; n <= maxSlab; n++ {
		class, size := slabClass(n)
		if class < last || class >= numSlabs {
			t.Fatalf("payload %d: class %d after %d (classes: %d)", n, class, last, numSlabs)
		}
		last = class
		if size < n || (n > minSlab && 4*size > 5*n) {
			t.Fatalf("payload %d: buffer of %d bytes", n, size)
		}
		if s, ok := sizes[class]; ok && s != size {
			t.Fatalf("class %d: buffers of %d and %d bytes", class, s, size)
		}
		sizes[class] = size
	}
	if len(sizes) != numSlabs {
		t.Fatalf("%d classes used, %d declared", len(sizes), numSlabs)
	}
	if getSlab(0) != nil || getSlab(maxSlab+1) != nil {
		t.Fatal("an empty or oversized payload got a pooled buffer")
	}
}
