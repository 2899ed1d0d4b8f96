//go:build linux && !race

package rawsock

import (
	"syscall"
	"unsafe"
)

// sysRead and sysWrite are the raw read(2) and write(2) of Sock. Under
// the race detector they are syscall.Read and syscall.Write instead (see
// sys_race.go), which tell the detector that the kernel reads or writes
// the buffer: RawSyscall does not, and races on a buffer being sent would
// go unseen.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}
