package interp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Options bound and parameterise the interpreter. Compile and CompileModel
// take a *Options; nil means DefaultOptions(). A zero field means its
// default.
type Options struct {
	// MaxLoopIterations bounds one LOOP ... UNTIL: a loop whose UNTIL is
	// still false after this many runs of its body stops the run with
	// ErrLoopLimit. Default 10,000.
	MaxLoopIterations int
	// MaxSteps bounds the statements one run executes, loops and called
	// actions included, so that nested loops cannot run for hours.
	// Default 1,000,000.
	MaxSteps int
	// MaxCallDepth bounds nested CALL ACTION, which stops recursion.
	// Default 16.
	MaxCallDepth int
	// MaxValueBytes bounds a text or JSON value built by a run
	// (concatenation, REPLACE, JSON literals, models). Default 1 MiB, the
	// default payload bound of the topic cache.
	MaxValueBytes int
	// MaxRegexBytes bounds the source of a FILTER regular expression.
	// Default 1024.
	MaxRegexBytes int
	// MaxExplodeTopics bounds the topics one JSON explosion of a model
	// topic publishes. Default 1,000.
	MaxExplodeTopics int
	// Clock returns the current time for TIMESTAMP. Default time.Now.
	Clock func() time.Time
	// Location is the time zone of custom TIMESTAMP patterns; the
	// built-in formats are UTC. Default time.Local.
	Location *time.Location
	// Random is the source of RANDOM. It is called from every goroutine
	// that runs a program, so it must be safe for concurrent use. Default
	// math/rand/v2's global source.
	Random Random
	// ModelRootKey nests the JSON of PUBLISH MODEL for a model without
	// COLLAPSED under a key named after the model ({"Reading":{...}}), as
	// older brokers did; by default the object is flat (LOT.md §5.5).
	ModelRootKey bool
}

// Random is a source of random numbers for RANDOM UUID, INT and DOUBLE.
type Random interface {
	Uint64() uint64
}

type globalRandom struct{}

func (globalRandom) Uint64() uint64 { return rand.Uint64() }

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		MaxLoopIterations: 10_000,
		MaxSteps:          1_000_000,
		MaxCallDepth:      16,
		MaxValueBytes:     1 << 20,
		MaxRegexBytes:     1024,
		MaxExplodeTopics:  1000,
		Clock:             time.Now,
		Location:          time.Local,
		Random:            globalRandom{},
	}
}

// Validate reports the first field out of range, naming it.
func (o *Options) Validate() error {
	checks := []struct {
		name    string
		v, min  int64
		maximum int64
	}{
		{"MaxLoopIterations", int64(o.MaxLoopIterations), 1, 1 << 30},
		// MaxSteps is an int: on a 32-bit target it cannot exceed math.MaxInt32.
		{"MaxSteps", int64(o.MaxSteps), 1, min(1<<40, int64(math.MaxInt))},
		{"MaxCallDepth", int64(o.MaxCallDepth), 1, 1000},
		{"MaxValueBytes", int64(o.MaxValueBytes), 1, 1 << 30},
		{"MaxRegexBytes", int64(o.MaxRegexBytes), 1, 1 << 20},
		{"MaxExplodeTopics", int64(o.MaxExplodeTopics), 1, 1 << 24},
	}
	for _, c := range checks {
		if c.v < c.min || c.v > c.maximum {
			return fmt.Errorf("interp: Options.%s = %d, want %d..%d", c.name, c.v, c.min, c.maximum)
		}
	}
	return nil
}

// withDefaults returns a copy of o (nil for the defaults) with every zero
// field set to its default, validated.
func (o *Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o == nil {
		return d, nil
	}
	c := *o
	setInt(&c.MaxLoopIterations, d.MaxLoopIterations)
	setInt(&c.MaxSteps, d.MaxSteps)
	setInt(&c.MaxCallDepth, d.MaxCallDepth)
	setInt(&c.MaxValueBytes, d.MaxValueBytes)
	setInt(&c.MaxRegexBytes, d.MaxRegexBytes)
	setInt(&c.MaxExplodeTopics, d.MaxExplodeTopics)
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Location == nil {
		c.Location = d.Location
	}
	if c.Random == nil {
		c.Random = d.Random
	}
	return c, c.Validate()
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}
