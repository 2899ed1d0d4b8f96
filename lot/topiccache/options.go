package topiccache

import "fmt"

// Options bound a Cache. The zero value of a field means its default.
type Options struct {
	// MaxTopics bounds the topics held (default 100,000, the figure the
	// documentation promises for kept topics per node).
	MaxTopics int
	// MaxValueBytes bounds one payload (default 1 MiB).
	MaxValueBytes int
	// MaxBytes bounds the memory held: payloads, topic names and a fixed
	// overhead per entry (EntryOverhead). Default 256 MiB: an edge gateway
	// cannot hold MaxTopics values of MaxValueBytes each.
	MaxBytes int64
}

// EntryOverhead is what one entry costs beyond its topic and payload bytes
// in the MaxBytes accounting: the entry, its map slot and list links.
const EntryOverhead = 128

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{MaxTopics: 100_000, MaxValueBytes: 1 << 20, MaxBytes: 256 << 20}
}

// Validate checks the options (after defaults are applied to zero fields).
func (o Options) Validate() error {
	switch {
	case o.MaxTopics < 0:
		return fmt.Errorf("topiccache: Options.MaxTopics = %d, want 0 (default) or more", o.MaxTopics)
	case o.MaxValueBytes < 0:
		return fmt.Errorf("topiccache: Options.MaxValueBytes = %d, want 0 (default) or more", o.MaxValueBytes)
	case o.MaxBytes < 0:
		return fmt.Errorf("topiccache: Options.MaxBytes = %d, want 0 (default) or more", o.MaxBytes)
	case o.MaxBytes > 0 && o.MaxValueBytes > 0 && int64(o.MaxValueBytes) > o.MaxBytes:
		return fmt.Errorf("topiccache: Options.MaxValueBytes = %d exceeds Options.MaxBytes = %d", o.MaxValueBytes, o.MaxBytes)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	d := DefaultOptions()
	if o == nil {
		return d
	}
	out := *o
	if out.MaxTopics == 0 {
		out.MaxTopics = d.MaxTopics
	}
	if out.MaxValueBytes == 0 {
		out.MaxValueBytes = d.MaxValueBytes
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = d.MaxBytes
	}
	return out
}
