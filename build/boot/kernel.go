package boot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// TinyModules are the kernel modules the tiny initramfs loads, in
// dependency order. Those a kernel has built in are simply absent.
var TinyModules = []string{
	"virtio_ring", "virtio", "failover", "net_failover", "virtio_mmio",
	"virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "virtio_net",
}

// Kernel is a Debian kernel with what the tiny initramfs takes from the
// same release: busybox and the virtio modules.
type Kernel struct {
	Dir     string   // cache directory holding the files below
	Vmlinuz string   // kernel image
	Busybox string   // static busybox for the same architecture
	Modules []string // module files, in TinyModules order
}

// CacheDir is where fetched kernels are kept: $GANTRY_CACHE, or
// gantry/ under the user's cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv("GANTRY_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("boot: no cache directory (set GANTRY_CACHE): %w", err)
	}
	return filepath.Join(d, "gantry"), nil
}

// TinyKernel returns the cached kernel of a, fetching it with mmdebstrap
// (variant extract: the packages are unpacked, not configured) the first
// time. Fetching takes 5-10 s and about 200 MB of scratch space.
func TinyKernel(a Arch) (Kernel, error) {
	cache, err := CacheDir()
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(cache, "tiny-"+a.Name)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Kernel{}, fmt.Errorf("boot: cache %s: %w", cache, err)
	}
	unlock, err := lockFile(filepath.Join(cache, "tiny-"+a.Name+".lock"))
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()
	if k, err := loadKernel(dir); err == nil {
		return k, nil
	}
	if err := fetchKernel(a, cache, dir); err != nil {
		return Kernel{}, err
	}
	return loadKernel(dir)
}

func loadKernel(dir string) (Kernel, error) {
	k := Kernel{Dir: dir, Vmlinuz: filepath.Join(dir, "vmlinuz"), Busybox: filepath.Join(dir, "busybox")}
	for _, p := range []string{k.Vmlinuz, k.Busybox, filepath.Join(dir, "complete")} {
		if _, err := os.Stat(p); err != nil {
			return Kernel{}, err
		}
	}
	for _, m := range TinyModules {
		p := filepath.Join(dir, "modules", m+".ko")
		if _, err := os.Stat(p); err == nil {
			k.Modules = append(k.Modules, p)
		}
	}
	return k, nil
}

func fetchKernel(a Arch, cache, dir string) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errors.New("boot: mmdebstrap not installed (apt-get install mmdebstrap)")
	}
	scratch, err := os.MkdirTemp(cache, "extract-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	root := filepath.Join(scratch, "root")
	cmd := exec.Command("mmdebstrap", "--quiet", "--variant=extract", "--architectures="+a.DebArch,
		"--include="+a.KernelPkg+",busybox-static", "bookworm", root, "http://deb.debian.org/debian")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("boot: mmdebstrap for %s: %w\n%s", a.Name, err, out)
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return err
	}
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return fmt.Errorf("boot: %s: want one boot/vmlinuz-* in %s, found %d", a.KernelPkg, a.Name, len(kernels))
	}
	if err := copyFile(kernels[0], filepath.Join(dir, "vmlinuz"), 0o644); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(root, "bin", "busybox"), filepath.Join(dir, "busybox"), 0o755); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, m := range TinyModules {
		want[m+".ko"] = true
	}
	err = filepath.WalkDir(filepath.Join(root, "lib", "modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !want[d.Name()] {
			return err
		}
		return copyFile(p, filepath.Join(dir, "modules", d.Name()), 0o644)
	})
	if err != nil {
		return err
	}
	version := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
	return os.WriteFile(filepath.Join(dir, "complete"), []byte(version+"\n"), 0o644)
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lockFile takes an exclusive flock on path; the returned func releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
