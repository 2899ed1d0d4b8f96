package boot

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Cpio writes a gzip-compressed cpio archive in the kernel's "newc"
// format, the format of an initramfs.
type Cpio struct {
	gz   *gzip.Writer
	ino  uint32
	err  error
	dirs map[string]bool
}

// NewCpio starts an archive on w.
func NewCpio(w io.Writer) *Cpio {
	return &Cpio{gz: gzip.NewWriter(w), ino: 1, dirs: map[string]bool{}}
}

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
)

func (c *Cpio) entry(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.ino++
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for i := len(data); i%4 != 0; i++ {
		b.WriteByte(0)
	}
	_, c.err = c.gz.Write(b.Bytes())
}

// Dir adds a directory and its parents.
func (c *Cpio) Dir(name string) {
	name = strings.Trim(name, "/")
	if name == "" || name == "." || c.dirs[name] {
		return
	}
	c.Dir(filepath.Dir(name))
	c.dirs[name] = true
	c.entry(name, modeDir|0o755, nil)
}

// File adds a regular file with permission bits perm.
func (c *Cpio) File(name string, perm uint32, data []byte) {
	name = strings.Trim(name, "/")
	c.Dir(filepath.Dir(name))
	c.entry(name, modeFile|perm, data)
}

// HostFile adds the host file from under name.
func (c *Cpio) HostFile(name string, perm uint32, from string) {
	data, err := os.ReadFile(from)
	if err != nil && c.err == nil {
		c.err = err
	}
	c.File(name, perm, data)
}

// Symlink adds a symbolic link name pointing at target.
func (c *Cpio) Symlink(name, target string) {
	name = strings.Trim(name, "/")
	c.Dir(filepath.Dir(name))
	c.entry(name, modeSymlink|0o777, []byte(target))
}

// Close writes the trailer and flushes the compressor.
func (c *Cpio) Close() error {
	c.entry("TRAILER!!!", 0, nil)
	if c.err != nil {
		return c.err
	}
	return c.gz.Close()
}

// TinyInit is the /init of the tiny initramfs: it loads the virtio
// modules, configures QEMU's user network statically, creates the test
// user and runs gantry on the appliance's first-boot defaults. It prints
// marker lines the harness reads from the serial console.
const TinyInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || echo "insmod $m failed"; done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
export COREFLUX_DATA_DIR=/data COREFLUX_DURABILITY_ENABLED=true
/gantry -addUser "$(cat /etc/boot-user)" "$(cat /etc/boot-password)"
echo "GANTRY-TINY-START $(/gantry -version)"
/gantry
echo "GANTRY-TINY-EXIT $?"
poweroff -f
`

// TinyInitramfs writes the initramfs of the tiny boot to path: busybox,
// the modules of k, the gantry binary and TinyInit. user and password are
// the MQTT login the init script creates.
func TinyInitramfs(path string, k Kernel, gantry, user, password string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	c := NewCpio(f)
	for _, d := range []string{"bin", "proc", "sys", "dev", "data", "tmp", "etc"} {
		c.Dir(d)
	}
	c.HostFile("bin/busybox", 0o755, k.Busybox)
	c.Symlink("bin/sh", "busybox")
	c.File("init", 0o755, []byte(TinyInit))
	c.HostFile("gantry", 0o755, gantry)
	c.File("etc/boot-user", 0o600, []byte(user))
	c.File("etc/boot-password", 0o600, []byte(password))
	var order []string
	for _, m := range k.Modules {
		name := strings.TrimSuffix(filepath.Base(m), ".ko")
		c.HostFile("lib/modules/"+name+".ko", 0o644, m)
		order = append(order, name)
	}
	c.File("lib/modules/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
