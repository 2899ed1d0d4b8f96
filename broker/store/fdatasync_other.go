//go:build !linux

package store

import "os"

// fdatasync flushes f to the disk (fsync where fdatasync is missing).
func fdatasync(f *os.File) error { return f.Sync() }
