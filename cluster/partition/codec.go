package partition

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// binaryFormat is the first byte of the binary encoding.
const binaryFormat = 1

// AppendBinary appends the compact binary encoding of m to b (the form
// for the Raft log; layout in doc.go). It refuses a map that fails
// Validate.
func (m Map) AppendBinary(b []byte) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return b, err
	}
	var names []string
	for _, a := range m.Partitions {
		names = append(names, a.Replicas...)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	b = append(b, binaryFormat)
	b = binary.AppendUvarint(b, m.Version)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Partitions)))
	for _, a := range m.Partitions {
		b = binary.AppendUvarint(b, a.Epoch)
		owner := uint64(0)
		if a.Owner != "" {
			owner = uint64(nameIndex(names, a.Owner)) + 1
		}
		b = binary.AppendUvarint(b, owner)
		b = binary.AppendUvarint(b, uint64(len(a.Replicas)))
		for _, r := range a.Replicas {
			v := uint64(nameIndex(names, r)) << 1
			if slices.Contains(a.Syncing, r) {
				v |= 1
			}
			b = binary.AppendUvarint(b, v)
		}
	}
	return b, nil
}

func nameIndex(names []string, n string) int {
	i, _ := slices.BinarySearch(names, n)
	return i
}

// MarshalBinary is AppendBinary(nil).
func (m Map) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

// UnmarshalBinary sets *m to Decode(b).
func (m *Map) UnmarshalBinary(b []byte) error {
	d, err := Decode(b)
	if err != nil {
		return err
	}
	*m = d
	return nil
}

// Decode decodes a map written by AppendBinary. Bad bytes, trailing bytes
// or an unknown format give an error wrapping ErrCorrupt, a decoded map
// that breaks an invariant one wrapping ErrInvalid; Decode never panics
// and bounds every allocation by the input's length.
func Decode(b []byte) (Map, error) {
	d := decoder{b: b}
	if f := d.byte(); d.err == nil && f != binaryFormat {
		return Map{}, fmt.Errorf("%w: format %d, this build reads %d", ErrCorrupt, f, binaryFormat)
	}
	m := Map{Version: d.uvarint()}
	names := make([]string, d.count(2)) // a name takes at least 2 bytes
	for i := range names {
		names[i] = string(d.bytes(MaxNodeName))
		if d.err == nil && (names[i] == "" || (i > 0 && names[i-1] >= names[i])) {
			d.fail("name table is not distinct non-empty names in order")
		}
	}
	count := d.count(3) // a partition takes at least 3 bytes
	if d.err == nil && count > MaxCount {
		d.fail(fmt.Sprintf("%d partitions, want at most %d", count, MaxCount))
	}
	if count > 0 && d.err == nil {
		m.Partitions = make([]Assignment, count)
	}
	for p := 0; p < count && d.err == nil; p++ {
		m.Partitions[p] = d.assignment(names)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return Map{}, d.err
	}
	if err := m.Validate(); err != nil {
		return Map{}, err
	}
	return m, nil
}

// decoder reads from b and remembers the first error; once it has one,
// every read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, msg)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length whose elements take at least min bytes each, and
// refuses one the remaining input cannot hold.
func (d *decoder) count(min int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.fail(fmt.Sprintf("count %d exceeds the remaining %d bytes", v, len(d.b)))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(max int) []byte {
	n := d.uvarint()
	if d.err == nil && (n > uint64(max) || n > uint64(len(d.b))) {
		d.fail(fmt.Sprintf("length %d exceeds %d or the remaining %d bytes", n, max, len(d.b)))
	}
	if d.err != nil {
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) name(names []string, i uint64) string {
	if d.err == nil && i >= uint64(len(names)) {
		d.fail(fmt.Sprintf("name index %d, table has %d", i, len(names)))
	}
	if d.err != nil {
		return ""
	}
	return names[i]
}

func (d *decoder) assignment(names []string) Assignment {
	a := Assignment{Epoch: d.uvarint()}
	if o := d.uvarint(); o > 0 {
		a.Owner = d.name(names, o-1)
	}
	n := d.count(1)
	if n > 0 && d.err == nil {
		a.Replicas = make([]string, 0, n)
	}
	for range n {
		v := d.uvarint()
		r := d.name(names, v>>1)
		if d.err != nil {
			break
		}
		a.Replicas = append(a.Replicas, r)
		if v&1 == 1 {
			a.Syncing = append(a.Syncing, r)
		}
	}
	return a
}

// jsonMap and jsonAssignment are the JSON form of a Map, as GET /cluster
// shows it; the field names are a stable interface.
type jsonMap struct {
	Version    uint64           `json:"version"`
	Partitions []jsonAssignment `json:"partitions"`
}

type jsonAssignment struct {
	Partition int      `json:"partition"`
	Owner     string   `json:"owner"`
	Replicas  []string `json:"replicas"`
	Syncing   []string `json:"syncing"`
	Epoch     uint64   `json:"epoch"`
}

// MarshalJSON writes {"version":…,"partitions":[{"partition":0,
// "owner":"a","replicas":["a","b"],"syncing":["b"],"epoch":3},…]};
// empty lists are [], never null.
func (m Map) MarshalJSON() ([]byte, error) {
	out := jsonMap{Version: m.Version, Partitions: make([]jsonAssignment, len(m.Partitions))}
	for p, a := range m.Partitions {
		out.Partitions[p] = jsonAssignment{
			Partition: p,
			Owner:     a.Owner,
			Replicas:  nonNil(a.Replicas),
			Syncing:   nonNil(a.Syncing),
			Epoch:     a.Epoch,
		}
	}
	return json.Marshal(out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// UnmarshalJSON reads what MarshalJSON writes. It refuses unknown fields,
// a "partition" that is not the entry's position, and a map that fails
// Validate.
func (m *Map) UnmarshalJSON(b []byte) error {
	var in jsonMap
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("partition: map JSON: %w", err)
	}
	out := Map{Version: in.Version}
	if len(in.Partitions) > 0 {
		out.Partitions = make([]Assignment, len(in.Partitions))
	}
	for p, a := range in.Partitions {
		if a.Partition != p {
			return fmt.Errorf("%w: entry %d says partition %d", ErrInvalid, p, a.Partition)
		}
		out.Partitions[p] = Assignment{Owner: a.Owner, Replicas: nilIfEmpty(a.Replicas), Syncing: nilIfEmpty(a.Syncing), Epoch: a.Epoch}
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*m = out
	return nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
