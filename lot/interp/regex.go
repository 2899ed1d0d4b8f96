package interp

import (
	"regexp"
	"strings"
	"sync/atomic"
)

// regexCache holds the compiled regular expression of one FILTER node
// whose pattern is computed at run time: the last pattern seen and its
// compilation, swapped atomically so that concurrent runs of the same
// program share it without a lock. A literal pattern is compiled once by
// Compile and never comes here.
type regexCache struct {
	last atomic.Pointer[regexEntry]
}

type regexEntry struct {
	src string
	re  *regexp.Regexp
	err error
}

// get returns the compiled pattern src, compiling it when it differs from
// the last one.
func (c *regexCache) get(src string, maxBytes int) (*regexp.Regexp, error) {
	if e := c.last.Load(); e != nil && e.src == src {
		return e.re, e.err
	}
	src = strings.Clone(src) // the cache outlives the run that computed src
	re, err := compileRegex(src, maxBytes)
	c.last.Store(&regexEntry{src: src, re: re, err: err})
	return re, err
}

// compileRegex compiles a FILTER pattern (RE2 syntax, so matching takes
// time linear in the input) no longer than maxBytes.
func compileRegex(src string, maxBytes int) (*regexp.Regexp, error) {
	if len(src) > maxBytes {
		return nil, errorf(ErrCompile, "the regular expression is %d bytes, over the limit of %d", len(src), maxBytes)
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, errorf(ErrCompile, "bad regular expression %q: %v", src, err)
	}
	return re, nil
}
