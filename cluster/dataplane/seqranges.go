package dataplane

import "slices"

// seqRange is the record numbers from..to of one stream, both included.
type seqRange struct{ from, to uint64 }

// seqRanges is a set of record numbers as sorted, disjoint and
// non-adjacent ranges: a receiver's records above its watermark that
// frames finished out of order (senderState.done, again). It holds a
// handful of ranges (one per frame in flight when one failed), so its
// operations search linearly.
type seqRanges []seqRange

// add puts from..to in the set, merged with the ranges it touches.
func (rs *seqRanges) add(from, to uint64) {
	if from > to {
		return
	}
	s := *rs
	i := 0
	for i < len(s) && s[i].to+1 < from {
		i++
	}
	j := i
	for j < len(s) && s[j].from <= to+1 {
		from, to = min(from, s[j].from), max(to, s[j].to)
		j++
	}
	*rs = slices.Replace(s, i, j, seqRange{from, to})
}

// has reports whether seq is in the set.
func (rs seqRanges) has(seq uint64) bool {
	for _, r := range rs {
		if seq < r.from {
			return false
		}
		if seq <= r.to {
			return true
		}
	}
	return false
}

// dropTo removes the numbers up to seq.
func (rs *seqRanges) dropTo(seq uint64) {
	s := *rs
	i := 0
	for i < len(s) && s[i].to <= seq {
		i++
	}
	s = slices.Delete(s, 0, i)
	if len(s) > 0 && s[0].from <= seq {
		s[0].from = seq + 1
	}
	*rs = s
}
