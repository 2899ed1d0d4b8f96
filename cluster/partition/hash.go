package partition

// FNV-1a, 32 bit (http://www.isthe.com/chongo/tech/comp/fnv/).
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// For returns the partition of a publisher among count partitions: the
// 32-bit FNV-1a hash of the bytes of its client id, modulo count. It is
// part of the wire contract: every node, of every version, must map a
// client id to the same partition, so this function never changes. A
// count below 1 yields 0.
func For(clientID string, count int) int {
	if count <= 1 {
		return 0
	}
	h := uint32(fnvOffset32)
	for i := 0; i < len(clientID); i++ {
		h ^= uint32(clientID[i])
		h *= fnvPrime32
	}
	return int(uint64(h) % uint64(count))
}
