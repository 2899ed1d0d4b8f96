package store

// SetWriteFault makes every write transaction that carries operations call
// f after applying them; a non-nil error fails (rolls back) the
// transaction. nil removes the hook.
func SetWriteFault(s *Store, f func() error) {
	if f == nil {
		s.writeFault.Store(nil)
		return
	}
	s.writeFault.Store(&f)
}

// WithMaxSize returns o with the file capped at n bytes: a write that
// would grow it further fails as on a full disk.
func WithMaxSize(o Options, n int) Options {
	o.maxSize = n
	return o
}
