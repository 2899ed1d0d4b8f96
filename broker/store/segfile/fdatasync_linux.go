package segfile

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data, and the metadata needed to read it back,
// to the disk.
func Fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
