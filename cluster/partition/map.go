package partition

import (
	"errors"
	"fmt"
	"slices"
)

// Limits and defaults of the configuration reference (PartitionCount,
// ReplicationFactor).
const (
	DefaultCount             = 32
	MaxCount                 = 4096
	DefaultReplicationFactor = 3
	MaxReplicationFactor     = 7
	// MaxNodeName bounds a node name in bytes, so that a decoder can
	// refuse absurd input before allocating.
	MaxNodeName = 255
)

// Errors of the package; test for them with errors.Is.
var (
	ErrInvalid    = errors.New("partition: invalid map")
	ErrCorrupt    = errors.New("partition: corrupt map encoding")
	ErrOutOfRange = errors.New("partition: argument out of range")
)

// Map is the partition map: who owns and who holds a copy of every
// partition. It is a value: every function that changes it returns a new
// Map and leaves its input untouched, so a Map read from the FSM may be
// shared between goroutines as long as nobody writes into its slices.
type Map struct {
	// Version increases with every change of the map.
	Version uint64
	// Partitions is indexed by partition id: len(Partitions) is the
	// partition count (0 before the first Rebalance).
	Partitions []Assignment
}

// Assignment is the placement of one partition.
type Assignment struct {
	// Owner is the node that accepts the partition's writes; "" when the
	// partition has none (no live node, or stranded: see doc.go).
	Owner string
	// Replicas are the nodes holding a copy, Owner first and the others in
	// name order. When Owner is "", Replicas lists, in name order, the
	// lost nodes that hold the partition's last caught-up copies.
	Replicas []string
	// Syncing are the Replicas whose copy is still being filled by the data
	// plane, in name order. Never contains Owner: a node owns a partition
	// only once its copy is caught up.
	Syncing []string
	// Epoch is the fencing token of the data plane: it is set to the map's
	// new Version whenever Owner changes, so it only ever increases, and a
	// partition id that is retired and re-created never reuses an epoch.
	Epoch uint64
}

// Count is the number of partitions.
func (m Map) Count() int { return len(m.Partitions) }

// Owner is the owner of partition p, "" when it has none or p is out of
// range.
func (m Map) Owner(p int) string {
	if p < 0 || p >= len(m.Partitions) {
		return ""
	}
	return m.Partitions[p].Owner
}

// Replicas returns a copy of the nodes holding a copy of partition p,
// owner first; nil when p is out of range.
func (m Map) Replicas(p int) []string {
	if p < 0 || p >= len(m.Partitions) {
		return nil
	}
	return slices.Clone(m.Partitions[p].Replicas)
}

// CaughtUp reports whether node holds a caught-up copy of partition p: it
// is a replica and not syncing.
func (m Map) CaughtUp(p int, node string) bool {
	if p < 0 || p >= len(m.Partitions) {
		return false
	}
	a := m.Partitions[p]
	return slices.Contains(a.Replicas, node) && !slices.Contains(a.Syncing, node)
}

// OwnedBy returns the partitions node owns, in increasing order.
func (m Map) OwnedBy(node string) []int {
	var out []int
	for p, a := range m.Partitions {
		if node != "" && a.Owner == node {
			out = append(out, p)
		}
	}
	return out
}

// Clone returns a deep copy of m.
func (m Map) Clone() Map {
	out := Map{Version: m.Version, Partitions: make([]Assignment, len(m.Partitions))}
	for i, a := range m.Partitions {
		out.Partitions[i] = a.clone()
	}
	return out
}

func (a Assignment) clone() Assignment {
	return Assignment{Owner: a.Owner, Replicas: slices.Clone(a.Replicas), Syncing: slices.Clone(a.Syncing), Epoch: a.Epoch}
}

// Equal reports whether m and o are the same map (nil and empty slices
// are equal).
func (m Map) Equal(o Map) bool {
	return m.Version == o.Version && slices.EqualFunc(m.Partitions, o.Partitions, Assignment.equal)
}

func (a Assignment) equal(b Assignment) bool {
	return a.Owner == b.Owner && a.Epoch == b.Epoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.Syncing, b.Syncing)
}

// MarkCaughtUp returns m with node's copy of partition p marked caught up
// (removed from Syncing) and the Version bumped. It reports false, and
// returns m unchanged, when node is not syncing p (a stale or repeated
// report), so that applying the same report twice is harmless.
func (m Map) MarkCaughtUp(p int, node string) (Map, bool) {
	if p < 0 || p >= len(m.Partitions) {
		return m, false
	}
	i := slices.Index(m.Partitions[p].Syncing, node)
	if i < 0 {
		return m, false
	}
	// The other assignments are shared with m: neither is written to.
	next := Map{Version: m.Version + 1, Partitions: slices.Clone(m.Partitions)}
	a := &next.Partitions[p]
	a.Syncing = slices.Delete(slices.Clone(a.Syncing), i, i+1)
	if len(a.Syncing) == 0 {
		a.Syncing = nil
	}
	return next, true
}

// Forget returns m without any copy held by the lost nodes, as if their
// disks were gone: call it when a node leaves the membership for good.
// A partition owned by a lost node gets no owner and keeps its other
// caught-up copies; the next Rebalance promotes one of them, or, when no
// copy at all is left, places the partition afresh (its messages are
// lost: that is what ReplicationFactor 1, or losing every copy, means).
// The Version is bumped, and the Epoch of every partition that lost its
// owner set to it, when anything changed.
func (m Map) Forget(lost ...string) Map {
	next := m.Clone()
	version := m.Version + 1
	changed := false
	gone := func(n string) bool { return slices.Contains(lost, n) }
	for i := range next.Partitions {
		a := &next.Partitions[i]
		if a.Owner != "" && gone(a.Owner) {
			var keep []string
			for _, r := range a.Replicas {
				if !gone(r) && !slices.Contains(a.Syncing, r) {
					keep = append(keep, r)
				}
			}
			slices.Sort(keep)
			*a = Assignment{Replicas: keep, Epoch: version}
			changed = true
			continue
		}
		n := len(a.Replicas) + len(a.Syncing)
		a.Replicas = deleteAll(a.Replicas, gone)
		a.Syncing = deleteAll(a.Syncing, gone)
		changed = changed || len(a.Replicas)+len(a.Syncing) != n
	}
	if !changed {
		return m
	}
	next.Version = version
	return next
}

func deleteAll(s []string, del func(string) bool) []string {
	s = slices.DeleteFunc(s, del)
	if len(s) == 0 {
		return nil
	}
	return s
}

// Validate checks the invariants every map built by this package holds;
// decoders refuse a map that breaks one. The error names the partition
// and the broken rule.
func (m Map) Validate() error {
	if len(m.Partitions) > MaxCount {
		return fmt.Errorf("%w: %d partitions, want at most %d", ErrInvalid, len(m.Partitions), MaxCount)
	}
	for p, a := range m.Partitions {
		if err := a.validate(m.Version); err != nil {
			return fmt.Errorf("%w: partition %d: %s", ErrInvalid, p, err)
		}
	}
	return nil
}

func (a Assignment) validate(version uint64) error {
	if a.Epoch > version {
		return fmt.Errorf("epoch %d is above the map version %d", a.Epoch, version)
	}
	for _, n := range a.Replicas {
		if n == "" || len(n) > MaxNodeName {
			return fmt.Errorf("replica name %q is empty or longer than %d bytes", n, MaxNodeName)
		}
	}
	others := a.Replicas
	if a.Owner != "" {
		if len(a.Replicas) == 0 || a.Replicas[0] != a.Owner {
			return fmt.Errorf("owner %q is not the first replica of %q", a.Owner, a.Replicas)
		}
		others = a.Replicas[1:]
	} else if len(a.Syncing) > 0 {
		return fmt.Errorf("syncing %q without an owner", a.Syncing)
	}
	if !strictlySorted(others) || slices.Contains(others, a.Owner) {
		return fmt.Errorf("replicas %q are not the owner then distinct names in order", a.Replicas)
	}
	if !strictlySorted(a.Syncing) {
		return fmt.Errorf("syncing %q are not distinct names in order", a.Syncing)
	}
	for _, s := range a.Syncing {
		if !slices.Contains(others, s) {
			return fmt.Errorf("syncing %q is not a replica other than the owner", s)
		}
	}
	return nil
}

func strictlySorted(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}
