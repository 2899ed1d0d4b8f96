package drivers

import (
	"context"
	"errors"
	"time"
)

// Device is one protocol's connection to one device. The engine calls it
// from one goroutine at a time (the connector's), except Close, which may
// come from another goroutine to interrupt a call in progress.
//
// Any error from Open, Read or Write that is not a TagError means the
// connection is no longer trusted: the engine calls Close and opens it
// again after a backoff, so that a late reply is never read as the answer
// to the next request (the client libraries keep dead sockets and stale
// replies).
type Device interface {
	// Open connects; ctx bounds the dial.
	Open(ctx context.Context) error
	// Read reads every tag of b, filling b.Results; a tag the device
	// refuses (wrong address) gets a TagError in its result, the others
	// are still read.
	Read(ctx context.Context, b *Batch) error
	// Write writes one value (already checked: Tag.Encode accepted it).
	Write(ctx context.Context, t *Tag, v Value) error
	// Close drops the connection; it is idempotent and interrupts a call
	// in progress.
	Close() error
}

// Batch is the tags of one mapping, read together.
type Batch struct {
	Tags    []*Tag
	Results []Result // one per tag, filled by Read
	// Plan is the device's own plan of requests for these tags (adjacent
	// registers merged), built on the first Read and kept.
	Plan any
}

// NewBatch makes a batch of tags.
func NewBatch(tags []*Tag) *Batch { return &Batch{Tags: tags, Results: make([]Result, len(tags))} }

// Result is one tag's outcome of a Read.
type Result struct {
	Value Value
	Err   error // a TagError: the device refused this tag
}

// TagError is a problem of one tag (the device refused its address); the
// connection stays up.
type TagError struct{ Err error }

func (e *TagError) Error() string { return e.Err.Error() }
func (e *TagError) Unwrap() error { return e.Err }

// IsTagError reports whether err concerns one tag only.
func IsTagError(err error) bool {
	var te *TagError
	return errors.As(err, &te)
}

// Subscriber is an optional capability of a Device whose protocol pushes
// changes (OPC UA monitored items): the engine then subscribes instead of
// polling. Subscribe delivers readings through fn (on its own goroutine)
// until ctx ends or the connection fails (it returns the error).
type Subscriber interface {
	Subscribe(ctx context.Context, b *Batch, every time.Duration, fn func(i int, r Result)) error
}
