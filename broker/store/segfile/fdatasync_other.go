//go:build !linux

package segfile

import "os"

// Fdatasync flushes f to the disk (fsync where fdatasync is missing).
func Fdatasync(f *os.File) error { return f.Sync() }
