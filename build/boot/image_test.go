package boot

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// imageEnv is what make image-test hands the image test.
type imageEnv struct {
	image, rootfs, rootExt4, key, bin, version, repo string
}

func needImageEnv(t *testing.T) imageEnv {
	t.Helper()
	needBoot(t, "image")
	e := imageEnv{image: os.Getenv("GANTRY_IMAGE"), rootfs: os.Getenv("GANTRY_ROOTFS"),
		rootExt4: os.Getenv("GANTRY_ROOT_EXT4"), key: os.Getenv("GANTRY_SIGNING_KEY"),
		bin: os.Getenv("GANTRY_BIN"), version: os.Getenv("GANTRY_VERSION")}
	for name, v := range map[string]string{"GANTRY_IMAGE": e.image, "GANTRY_ROOTFS": e.rootfs,
		"GANTRY_ROOT_EXT4": e.rootExt4, "GANTRY_SIGNING_KEY": e.key, "GANTRY_BIN": e.bin, "GANTRY_VERSION": e.version} {
		if v == "" {
			t.Fatalf("%s not set: run make image-test", name)
		}
	}
	var err error
	if e.repo, err = ModuleRoot(); err != nil {
		t.Fatal(err)
	}
	return e
}

type readyBody struct{ Status, Version, Slot string }

func ready(opsAddr string) (readyBody, error) {
	body, err := Curl("http://" + opsAddr + "/health/ready")
	if err != nil {
		return readyBody{}, err
	}
	var rd readyBody
	err = json.Unmarshal([]byte(body), &rd)
	return rd, err
}

// waitReady polls /health/ready until it reports slot and version.
func waitReady(t *testing.T, vm *VM, slot, version string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	err := Eventually(timeout, func() error {
		if done, err := vm.Exited(); done {
			return fmt.Errorf("qemu exited: %v", err)
		}
		rd, err := ready(vm.Ports[9100])
		if err != nil {
			return err
		}
		if rd.Slot != slot || rd.Version != version {
			return fmt.Errorf("ready on slot %q version %q, want slot %q version %q", rd.Slot, rd.Version, slot, version)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("/health/ready: %v\nconsole:\n%s\n%s", err, Tail(vm.Console(), 60), hangReport(vm))
	}
	t.Logf("slot %s, version %s ready after %.1f s of waiting, %.1f s after qemu started", slot, version,
		time.Since(start).Seconds(), time.Since(vm.Started).Seconds())
}

// imageDisk is a decompressed image ready to boot, with its data
// partition provisioned.
type imageDisk struct {
	arch  Arch
	disk  string
	parts map[string]Partition
	pw    string // password of MQTT user "boot"
	fw    []string
	dir   string
	slow  time.Duration // 1 for amd64; the arm arches emulate slower
}

// grownBy is how much larger than the image the test's disk is: the
// medium a gateway is flashed onto is usually larger than the image, and
// the data partition must grow into the rest on first boot.
const grownBy = 512 << 20

// prepareImage checks the artefact's checksum, decompresses it and writes
// a data partition holding the MQTT user "boot", as a factory line would
// provision it. The OS partitions stay as built.
func prepareImage(t *testing.T, e imageEnv, a Arch, image string) *imageDisk {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("GANTRY_IMAGE_WORK"); keep != "" {
		// Kept after the test: the consoles of every boot, the disk.
		dir = filepath.Join(keep, a.Name)
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("consoles and disk in %s", dir)
	}
	if _, err := Run("sh", "-c", fmt.Sprintf("cd %s && sha256sum -c %s.sha256", filepath.Dir(image), filepath.Base(image))); err != nil {
		t.Fatal(err)
	}
	d := &imageDisk{arch: a, disk: filepath.Join(dir, "disk.img"), pw: password(), dir: dir,
		fw: []string{a.FirmwareCode, filepath.Join(dir, "vars.fd")}, slow: 1}
	if a.Name != "amd64" {
		d.slow = 2
	}
	if _, err := Run("zstd", "-q", "-d", "--long=30", image, "-o", d.disk); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(d.disk); err != nil {
		t.Fatal(err)
	} else if err := os.Truncate(d.disk, st.Size()+grownBy); err != nil {
		t.Fatal(err)
	}
	var err error
	if d.parts, err = Partitions(d.disk); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"esp", "root-a", "root-b", "data"} {
		if _, ok := d.parts[n]; !ok {
			t.Fatalf("partition %s missing: %v", n, d.parts)
		}
	}
	seedData(t, e, d.disk, d.parts["data"], "boot", d.pw)
	if _, err := Run("cp", a.FirmwareVars, d.fw[1]); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *imageDisk) boot(t *testing.T, name, media string) *VM {
	t.Helper()
	vm, err := Start(VMConfig{Arch: d.arch, MemoryMB: 1024, Disk: d.disk, Media: media, Firmware: d.fw,
		GuestPorts: []int{1883, 9100, 80}, Log: filepath.Join(d.dir, name+".console"),
		Monitor: filepath.Join(d.dir, name+".monitor")})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// identityLine is what gantry-identity prints on every boot.
var identityLine = regexp.MustCompile(`gantry-identity: hostname (\S+), machine id ([0-9a-f]{32}), root (\w+), GANTRY_SLOT=([ab])`)

// identities returns what gantry-identity said on each boot of vm so
// far: hostname, machine id, root mount mode, slot.
func identities(vm *VM) [][]string {
	var ids [][]string
	for _, m := range identityLine.FindAllStringSubmatch(vm.Console(), -1) {
		ids = append(ids, m[1:])
	}
	return ids
}

// checkIdentity waits for gantry-identity's line of the nth boot of vm
// (0-based) and checks that it booted slot from a read-only root with the
// machine id want (any when empty). It returns the machine id.
func checkIdentity(t *testing.T, vm *VM, nth int, slot, want string, timeout time.Duration) string {
	t.Helper()
	var id []string
	if err := Eventually(timeout, func() error {
		ids := identities(vm)
		if len(ids) <= nth {
			return fmt.Errorf("gantry-identity printed %d identity lines, want boot %d", len(ids), nth+1)
		}
		id = ids[nth]
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
	}
	t.Logf("boot %d: hostname %s, machine id %s, root %s, slot %s", nth+1, id[0], id[1], id[2], id[3])
	if id[2] != "ro" {
		t.Errorf("boot %d: root mounted %q, want ro", nth+1, id[2])
	}
	if id[3] != slot {
		t.Errorf("boot %d: slot %s, want %s", nth+1, id[3], slot)
	}
	if want != "" && id[1] != want {
		t.Errorf("boot %d (slot %s): machine id %s, want the factory boot's %s", nth+1, slot, id[1], want)
	}
	if wantHost := "gantry-" + id[1][:6]; id[0] != wantHost {
		t.Errorf("boot %d: hostname %s, want %s (from the machine id)", nth+1, id[0], wantHost)
	}
	return id[1]
}

// checkDataGrown checks, from the host after the VM stopped, that the
// data partition and its file system reach the end of the disk.
func checkDataGrown(t *testing.T, d *imageDisk) {
	t.Helper()
	parts, err := Partitions(d.disk)
	if err != nil {
		t.Fatal(err)
	}
	before, after := d.parts["data"], parts["data"]
	st, err := os.Stat(d.disk)
	if err != nil {
		t.Fatal(err)
	}
	// GPT keeps 33 sectors at the end for its backup copy; repart aligns to 1 MiB.
	if after.Offset != before.Offset || after.Offset+after.Size < st.Size()-(2<<20) {
		t.Fatalf("data partition %d+%d bytes after the first boot (was %d+%d), want it to reach the end of the %d-byte disk",
			after.Offset, after.Size, before.Offset, before.Size, st.Size())
	}
	out, err := Run("dumpe2fs", "-h", fmt.Sprintf("%s?offset=%d", d.disk, after.Offset))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && err == nil {
			fields[k] = n
		}
	}
	fs := fields["Block count"] * fields["Block size"]
	if fs < after.Size-(1<<20) {
		t.Fatalf("data file system is %d bytes, its partition %d", fs, after.Size)
	}
	t.Logf("data partition grew from %d to %d MiB, its ext4 is %d MiB", before.Size>>20, after.Size>>20, fs>>20)
	d.parts = parts
}

// factoryBoot boots the image as flashed and checks the broker, the
// setup page on port 80, the first-boot security defaults, a read-only
// root and the data partition grown to fill the disk. It returns the
// machine id of the first boot.
func factoryBoot(t *testing.T, d *imageDisk, version string) string {
	vm := d.boot(t, "factory", "")
	defer func() {
		vm.Stop()
		if !t.Failed() {
			checkDataGrown(t, d)
		}
	}()
	waitReady(t, vm, "a", version, 8*time.Minute*d.slow)
	id := checkIdentity(t, vm, 0, "a", "", time.Minute)
	if err := vm.WaitConsole("gantry-grow-data: partition", time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
	}
	// Port 80 is socket-activated: the first request starts the proxy,
	// which under emulation can take longer than one curl waits.
	var page string
	if err := Eventually(2*time.Minute, func() (err error) {
		if page, err = Curl("http://" + vm.Ports[80] + "/"); err == nil && !strings.Contains(page, `href="/ui/"`) {
			err = fmt.Errorf("no link to /ui/ in %q", page)
		}
		return err
	}); err != nil {
		t.Fatalf("port 80: %v", err)
	}
	checkNode(t, vm.Ports[1883], vm.Ports[9100], "boot", d.pw, time.Minute)
	if err := MQTTRoundTrip(vm.Ports[1883], "", "", 20*time.Second); err == nil {
		t.Fatal("an anonymous MQTT client was accepted on first boot")
	}
	if err := vm.WaitConsole("gantry-boot-check: broker ready, console answers", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(vm.Console(), "\n") {
		if strings.Contains(l, "gantry-grow-data:") || strings.Contains(l, "now boots with machine id") {
			t.Log(strings.TrimSpace(l))
		}
	}
	return id
}

// TestImageBoot boots the images of the arches in GANTRY_IMAGE_ARCHES
// (build/out/gantry-VERSION-ARCH.img.zst) under their UEFI firmware to a
// working broker: make image-test ARCH=arm64|armv7.
func TestImageBoot(t *testing.T) {
	e := needImageEnv(t)
	for _, name := range strings.Fields(os.Getenv("GANTRY_IMAGE_ARCHES")) {
		t.Run(name, func(t *testing.T) {
			a, err := ArchByName(name)
			if err != nil {
				t.Fatal(err)
			}
			image := filepath.Join(filepath.Dir(e.image), "gantry-"+e.version+"-"+name+".img.zst")
			factoryBoot(t, prepareImage(t, e, a, image), e.version)
		})
	}
}

// TestImage boots the appliance image GANTRY_IMAGE under its UEFI
// firmware and walks through its life: the factory boot to a working
// broker and console, a good update from an update stick that is tried
// and blessed (same machine id, read-only root), the watchdog restarting
// a frozen broker, and a broken update that fails its three tries and
// rolls back by itself.
func TestImage(t *testing.T) {
	e := needImageEnv(t)
	name := strings.TrimSuffix(e.image, ".img.zst")
	a, err := ArchByName(name[strings.LastIndex(name, "-")+1:])
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Run("systemd-analyze", "security", "--offline=true", "--root="+e.rootfs, "gantry.service"); err != nil {
		t.Logf("systemd-analyze security (offline): %v", err)
	} else {
		t.Logf("systemd-analyze security --offline=true gantry.service: %s", lastLine(out))
	}
	d := prepareImage(t, e, a, e.image)
	dir, disk, parts, pw := d.dir, d.disk, d.parts, d.pw
	boot := func(name, media string) *VM { return d.boot(t, name, media) }
	slow := d.slow

	var machineID string
	t.Run("factory boot", func(t *testing.T) { machineID = factoryBoot(t, d, e.version) })
	if t.Failed() {
		return
	}

	// Every arch counts three tries (armv7 boots systemd-boot 254, whose
	// counters 32-bit ARM does not garble: build/image/loader.sh).
	const tries, trialEntry, brokenEntry = 3, "gantry-2-b+2-1.conf", "gantry-3-a+0-3.conf"

	v2 := e.version + "-good"
	t.Run("good update is blessed; watchdog restarts a frozen broker", func(t *testing.T) {
		root := filepath.Join(dir, "root-v2.ext4")
		bin := filepath.Join(dir, "gantry-v2")
		buildStamped(t, e, a, bin, v2)
		os.WriteFile(filepath.Join(dir, "version-v2"), []byte(v2+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "freeze.service"), []byte(freezeUnit), 0o644)
		copyExt4(t, e.rootExt4, root)
		if err := Debugfs(root,
			"rm /usr/bin/gantry", "write "+bin+" /usr/bin/gantry", "sif /usr/bin/gantry mode 0100755",
			"rm /etc/gantry/version", "write "+filepath.Join(dir, "version-v2")+" /etc/gantry/version",
			"write "+filepath.Join(dir, "freeze.service")+" /etc/systemd/system/gantry-test-freeze.service",
			"symlink /etc/systemd/system/multi-user.target.wants/gantry-test-freeze.service /etc/systemd/system/gantry-test-freeze.service",
		); err != nil {
			t.Fatal(err)
		}
		media := updateStick(t, e, a, dir, "v2", v2, root)
		vm := boot("update-v2", media)
		defer vm.Stop()
		start := time.Now()
		if err := vm.WaitConsole("entry gantry-2-b+3.conf boots it next", 15*time.Minute*slow); err != nil {
			t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
		}
		t.Logf("update installed into slot b %.1f s after qemu started", time.Since(start).Seconds())
		checkIdentity(t, vm, 0, "a", machineID, time.Minute)
		waitReady(t, vm, "b", v2, 10*time.Minute*slow)
		checkIdentity(t, vm, 1, "b", machineID, time.Minute)
		if err := vm.WaitConsole("gantry-bless: "+trialEntry+" is good: now gantry-2-b.conf", 3*time.Minute*slow); err != nil {
			t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
		}
		t.Logf("trial boot blessed %.1f s after qemu started", time.Since(start).Seconds())
		if err := vm.WaitConsole("GANTRY-TEST froze gantry pid", 3*time.Minute*slow); err != nil {
			t.Fatal(err)
		}
		frozen := time.Now()
		if err := vm.WaitConsole("GANTRY-TEST watchdog restarted gantry", 3*time.Minute*slow); err != nil {
			t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
		}
		t.Logf("frozen broker restarted by the watchdog %.1f s after SIGSTOP", time.Since(frozen).Seconds())
		for _, l := range strings.Split(vm.Console(), "\n") {
			if strings.Contains(l, "GANTRY-TEST") {
				t.Log(strings.TrimSpace(l))
			}
		}
		// The journal of the factory boot and of the boot that installed
		// the update (slot a) is there on slot b: one machine id, /var on /data.
		if m := regexp.MustCompile(`GANTRY-TEST journal boots: (\d+)`).FindStringSubmatch(vm.Console()); m == nil {
			t.Error("the test unit did not report the journal's boots")
		} else if n, _ := strconv.Atoi(m[1]); n < 3 {
			t.Errorf("journal on slot b lists %d boots, want the 2 boots of slot a too", n)
		}
		if !strings.Contains(vm.Console(), "GANTRY-TEST root is read-only") {
			t.Error("the root file system of slot b is writable")
		}
		waitReady(t, vm, "b", v2, 2*time.Minute*slow)
		checkNode(t, vm.Ports[1883], vm.Ports[9100], "boot", pw, time.Minute)
	})
	if t.Failed() {
		return
	}

	t.Run("broken update rolls back", func(t *testing.T) {
		root := filepath.Join(dir, "root-v3.ext4")
		broken := filepath.Join(dir, "gantry-broken")
		os.WriteFile(broken, []byte("#!/bin/sh\necho 'gantry: broken on purpose by make image-test' >&2\nexit 1\n"), 0o755)
		copyExt4(t, e.rootExt4, root)
		if err := Debugfs(root, "rm /usr/bin/gantry", "write "+broken+" /usr/bin/gantry", "sif /usr/bin/gantry mode 0100755"); err != nil {
			t.Fatal(err)
		}
		media := updateStick(t, e, a, dir, "v3", e.version+"-broken", root)
		vm := boot("update-v3", media)
		start := time.Now()
		if err := vm.WaitConsole("entry gantry-3-a+3.conf boots it next", 15*time.Minute*slow); err != nil {
			vm.Stop()
			t.Fatalf("%v\n%s", err, Tail(vm.Console(), 40))
		}
		t.Logf("broken update installed into slot a %.1f s after qemu started", time.Since(start).Seconds())
		if err := waitTries(t, vm, tries, start, 25*time.Minute*slow, 6*time.Minute*slow); err != nil {
			vm.Stop()
			t.Fatal(err)
		}
		waitReady(t, vm, "b", v2, 10*time.Minute*slow)
		ids := identities(vm)
		for i := range ids {
			slot := "a" // the broken slot's tries
			if i == 0 || i == len(ids)-1 {
				slot = "b"
			}
			checkIdentity(t, vm, i, slot, machineID, time.Minute)
		}
		t.Logf("rolled back to slot b (%s) %.1f s after qemu started", v2, time.Since(start).Seconds())
		vm.Stop()
		entries, err := ESPEntries(disk, parts["esp"])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("boot entries after the rollback: %v", entries)
		want := map[string]bool{"gantry-2-b.conf": true, brokenEntry: true}
		for _, n := range entries {
			delete(want, n)
		}
		if len(want) != 0 {
			t.Fatalf("boot entries %v, missing %v", entries, want)
		}
	})
}

// waitTries waits until the console shows n failed trial boots, logging
// when each one failed (seconds after start). It gives up after timeout,
// or early when the console stays silent for quiet: a boot that hangs
// (there is no watchdog device in the VM to reset it) prints nothing more.
func waitTries(t *testing.T, vm *VM, n int, start time.Time, timeout, quiet time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(timeout)
	seen, size, changed := 0, 0, time.Now()
	for seen < n {
		if done, err := vm.Exited(); done {
			return fmt.Errorf("qemu exited (%v) after %d failed tries", err, seen)
		}
		console := vm.Console()
		if len(console) != size {
			size, changed = len(console), time.Now()
		}
		for c := strings.Count(console, "trial boot failed; rebooting"); seen < c; {
			seen++
			t.Logf("try %d failed %.1f s after qemu started", seen, time.Since(start).Seconds())
		}
		switch {
		case seen >= n:
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d tries failed within %v\n%s", seen, n, timeout, Tail(console, 40))
		case time.Since(changed) > quiet:
			return fmt.Errorf("after %d failed tries the console was silent for %v: the VM hangs\n%s\n%s",
				seen, quiet, Tail(console, 40), hangReport(vm))
		default:
			time.Sleep(2 * time.Second)
		}
	}
	return nil
}

// hangReport says what a silent VM is doing: whether qemu still uses CPU
// (a guest spinning) or not (a guest waiting, or qemu stuck), and the
// monitor's view of the vCPU.
func hangReport(vm *VM) string {
	cpu0 := vm.CPUSeconds()
	time.Sleep(10 * time.Second)
	r := fmt.Sprintf("qemu used %.2f s of CPU in the last 10 s", vm.CPUSeconds()-cpu0)
	for _, cmd := range []string{"info status", "info registers"} {
		out, err := vm.MonitorCommand(cmd)
		if err != nil {
			out += fmt.Sprintf(" (monitor: %v)", err)
		}
		// The first line echoes the command; general registers come first.
		lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
		if len(lines) > 1 {
			lines = lines[1:]
		}
		if len(lines) > 12 {
			lines = lines[:12]
		}
		r += "\n" + cmd + ":\n" + strings.Join(lines, "\n")
	}
	return r
}

// freezeUnit is a test-only unit (in the image test's update bundle, never
// in the shipped image): after the trial boot is blessed it stops the
// broker with SIGSTOP and reports when systemd's watchdog restarted it.
const freezeUnit = `[Unit]
Description=image-test: freeze gantry once, the watchdog must restart it
After=gantry-bless.service gantry.service
[Service]
Type=oneshot
StandardOutput=journal+console
ExecStart=/bin/bash -c 'echo "GANTRY-TEST security: $(systemd-analyze security gantry.service | tail -1)"; \
echo "GANTRY-TEST failed units: [$(systemctl list-units --failed --plain --no-legend | cut -d" " -f1 | tr "\n" " ")]"; \
echo "GANTRY-TEST journal boots: $(journalctl --list-boots --no-pager | wc -l)"; \
if touch /usr/gantry-test 2>/dev/null; then echo "GANTRY-TEST root is writable"; else echo "GANTRY-TEST root is read-only"; fi; \
pid=$(systemctl show -P MainPID gantry); echo "GANTRY-TEST froze gantry pid $pid"; kill -STOP $pid; \
for i in $(seq 1 150); do n=$(systemctl show -P NRestarts gantry); now=$(systemctl show -P MainPID gantry); \
if [ "$n" -ge 1 ] && [ "$now" != "$pid" ] && [ "$now" != 0 ]; then \
echo "GANTRY-TEST watchdog restarted gantry: NRestarts=$n MainPID $pid -> $now; $(journalctl -u gantry -o cat | grep -m1 Watchdog.timeout)"; exit 0; fi; sleep 1; done; \
echo "GANTRY-TEST watchdog did not restart gantry"; exit 1'
[Install]
WantedBy=multi-user.target
`

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// seedData writes a data partition holding an MQTT user into disk.
func seedData(t *testing.T, e imageEnv, disk string, data Partition, user, pw string) {
	t.Helper()
	tree := filepath.Join(t.TempDir(), "data")
	state := filepath.Join(tree, "gantry", "state")
	cmd := exec.Command(filepath.Join(e.bin, "gantry-amd64"), "-addUser", user, pw)
	cmd.Env = append(os.Environ(), "COREFLUX_DATA_DIR="+state)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("-addUser: %v\n%s", err, out)
	}
	if _, err := Run("chown", "-R", "901:901", filepath.Join(tree, "gantry")); err != nil {
		t.Fatal(err)
	}
	ext4 := filepath.Join(t.TempDir(), "data.ext4")
	if _, err := Run("mkfs.ext4", "-q", "-F", "-L", "data", "-d", tree, ext4, fmt.Sprintf("%dK", data.Size/1024)); err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(disk, data.Offset, ext4); err != nil {
		t.Fatal(err)
	}
}

func buildStamped(t *testing.T, e imageEnv, a Arch, out, version string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -X gantry/appliance.Version="+version, "-o", out, "./appliance/cmd/gantry")
	cmd.Dir = e.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+a.GOARCH, "GOARM="+a.GOARM)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
}

func copyExt4(t *testing.T, from, to string) {
	t.Helper()
	if _, err := Run("cp", "--sparse=always", from, to); err != nil {
		t.Fatal(err)
	}
}

// updateStick signs a bundle of root with make bundle's script and puts
// it on a FAT "USB stick" labelled GANTRY-UPD.
func updateStick(t *testing.T, e imageEnv, a Arch, dir, name, version, root string) string {
	t.Helper()
	bundle := filepath.Join(dir, "gantry-"+name+".bundle")
	if out, err := Run(filepath.Join(e.repo, "build/image/mkbundle.sh"), a.Name, version, root, e.key, bundle); err != nil {
		t.Fatal(err)
	} else {
		t.Log(strings.TrimSpace(out))
	}
	st, err := os.Stat(bundle)
	if err != nil {
		t.Fatal(err)
	}
	stick := filepath.Join(dir, "stick-"+name+".img")
	if _, err := Run("mkfs.vfat", "-n", "GANTRY-UPD", "-C", stick, fmt.Sprint(st.Size()/1024+32*1024)); err != nil {
		t.Fatal(err)
	}
	if _, err := Run("mcopy", "-i", stick, bundle, "::/gantry-"+name+".bundle"); err != nil {
		t.Fatal(err)
	}
	return stick
}
