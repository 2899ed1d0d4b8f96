package boot

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// VM is one running qemu-system process. Its serial console goes to a
// log file the harness reads.
type VM struct {
	Arch    Arch
	Log     string         // serial console log
	Ports   map[int]string // guest TCP port -> host 127.0.0.1:port
	Started time.Time      // when qemu was started
	monitor string         // unix socket of the QEMU monitor, if any
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// VMConfig says what to boot.
type VMConfig struct {
	Arch       Arch
	MemoryMB   int
	Kernel     string // direct kernel boot when set
	Initrd     string
	Append     string   // kernel command line (console= is added)
	Disk       string   // raw disk image attached as virtio-blk, booted first
	Media      string   // a second raw disk (removable media: an update stick)
	Firmware   []string // pflash files for UEFI: code (read-only), vars (writable copy)
	GuestPorts []int    // guest TCP ports forwarded from 127.0.0.1
	Log        string
	Monitor    string // when set, a unix socket for the QEMU monitor (info registers on a hung guest)
	NoReboot   bool
	Extra      []string
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start launches qemu. The forwarded ports listen on 127.0.0.1 only.
func Start(c VMConfig) (*VM, error) {
	if _, err := exec.LookPath(c.Arch.QemuSys); err != nil {
		return nil, fmt.Errorf("boot: %s not installed (apt-get install qemu-system-x86 qemu-system-arm)", c.Arch.QemuSys)
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = 512
	}
	vm := &VM{Arch: c.Arch, Log: c.Log, Ports: map[int]string{}, done: make(chan struct{}), monitor: c.Monitor}
	netdev := "user,id=n0"
	for _, gp := range c.GuestPorts {
		hp, err := FreePort()
		if err != nil {
			return nil, err
		}
		netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", hp, gp)
		vm.Ports[gp] = "127.0.0.1:" + strconv.Itoa(hp)
	}
	args := append([]string{}, c.Arch.Machine...)
	monitor := "none"
	if c.Monitor != "" {
		monitor = "unix:" + c.Monitor + ",server=on,wait=off"
	}
	args = append(args, "-smp", "1", "-m", strconv.Itoa(c.MemoryMB),
		"-display", "none", "-monitor", monitor, "-serial", "file:"+c.Log,
		"-netdev", netdev, "-device", c.Arch.NetDevice+",netdev=n0")
	if c.NoReboot {
		args = append(args, "-no-reboot")
	}
	for i, fw := range c.Firmware {
		ro := ""
		if i == 0 {
			ro = ",readonly=on"
		}
		args = append(args, "-drive", "if=pflash,format=raw"+ro+",file="+fw)
	}
	if c.Kernel != "" {
		args = append(args, "-kernel", c.Kernel, "-append", "console="+c.Arch.Console+" "+c.Append)
		if c.Initrd != "" {
			args = append(args, "-initrd", c.Initrd)
		}
	}
	if c.Disk != "" {
		blk := "virtio-blk-pci"
		if c.Arch.NetDevice == "virtio-net-device" {
			blk = "virtio-blk-device"
		}
		args = append(args, "-drive", "file="+c.Disk+",if=none,id=d0,format=raw", "-device", blk+",drive=d0,bootindex=0")
		if c.Media != "" {
			args = append(args, "-drive", "file="+c.Media+",if=none,id=d1,format=raw", "-device", blk+",drive=d1")
		}
	}
	args = append(args, c.Extra...)
	vm.cmd = exec.Command(c.Arch.QemuSys, args...)
	var stderr bytes.Buffer
	vm.cmd.Stderr = &stderr
	if err := vm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("boot: start %s: %w", c.Arch.QemuSys, err)
	}
	vm.Started = time.Now()
	go func() {
		err := vm.cmd.Wait()
		if stderr.Len() > 0 {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
		}
		vm.waitErr = err
		close(vm.done)
	}()
	return vm, nil
}

// Exited reports whether qemu has exited, and with what.
func (vm *VM) Exited() (bool, error) {
	select {
	case <-vm.done:
		return true, vm.waitErr
	default:
		return false, nil
	}
}

// Console returns the serial output so far.
func (vm *VM) Console() string {
	b, _ := os.ReadFile(vm.Log)
	return string(b)
}

// WaitConsole polls the console until it contains s, qemu exits or the
// timeout passes.
func (vm *VM) WaitConsole(s string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(vm.Console(), s) {
			return nil
		}
		if done, err := vm.Exited(); done {
			return fmt.Errorf("boot: qemu exited (%v) before the console showed %q", err, s)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("boot: the console did not show %q within %v", s, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills qemu and waits for it.
func (vm *VM) Stop() {
	vm.once.Do(func() {
		if vm.cmd.Process != nil {
			vm.cmd.Process.Kill()
		}
		<-vm.done
	})
}

// Wait waits for qemu to exit by itself, up to timeout.
func (vm *VM) Wait(timeout time.Duration) error {
	select {
	case <-vm.done:
		return vm.waitErr
	case <-time.After(timeout):
		return fmt.Errorf("boot: qemu still running after %v", timeout)
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// MonitorCommand runs one command on the QEMU monitor (VMConfig.Monitor)
// and returns what it printed.
func (vm *VM) MonitorCommand(cmd string) (string, error) {
	if vm.monitor == "" {
		return "", fmt.Errorf("boot: the VM has no monitor socket")
	}
	c, err := net.DialTimeout("unix", vm.monitor, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	prompts := 0
	sent := false
	for prompts < 2 {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out), err
		}
		prompts = bytes.Count(out, []byte("(qemu) "))
		if prompts >= 1 && !sent {
			if _, err := c.Write([]byte(cmd + "\n")); err != nil {
				return string(out), err
			}
			sent = true
		}
	}
	s := string(out)
	if i := strings.Index(s, "(qemu) "); i >= 0 {
		s = s[i+len("(qemu) "):]
	}
	return strings.TrimSuffix(strings.TrimSpace(s), "(qemu)"), nil
}

// CPUSeconds is the CPU time qemu has used so far (user + system), or -1.
func (vm *VM) CPUSeconds() float64 {
	if vm.cmd.Process == nil {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", vm.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}
