package boot

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needBoot skips the test unless GANTRY_BOOT names its tier ("tiny" for
// the per-commit checks, "image" for the full image) or is "all".
func needBoot(t *testing.T, tier string) {
	t.Helper()
	v := os.Getenv("GANTRY_BOOT")
	if v != "all" && !strings.Contains(","+v+",", ","+tier+",") {
		t.Skipf("boot tests of tier %q run with GANTRY_BOOT=%s (make boot-smoke, make image-test)", tier, tier)
	}
}

func password() string { return fmt.Sprintf("pw-%016x", rand.Uint64()) }

// TestQemuUser runs each cross-built binary on the host (arm64 and armv7
// through qemu-user, amd64 natively) and checks that it answers MQTT and
// /health, reports its version, and shuts down cleanly on SIGTERM.
func TestQemuUser(t *testing.T) {
	needBoot(t, "tiny")
	for _, a := range Arches {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			bin, err := Gantry(a, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			run := func(args ...string) *exec.Cmd {
				if a.QemuUser == "" {
					return exec.Command(bin, args...)
				}
				if _, err := exec.LookPath(a.QemuUser); err != nil {
					t.Fatalf("%s not installed (apt-get install qemu-user-static)", a.QemuUser)
				}
				return exec.Command(a.QemuUser, append([]string{bin}, args...)...)
			}
			ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
			env := append(os.Environ(), "COREFLUX_DATA_DIR="+t.TempDir(), "COREFLUX_MQTT_BIND_IP="+ip,
				"COREFLUX_MQTT_WEBSOCKET_PORT=0", "COREFLUX_DURABILITY_ENABLED=true")
			pw := password()
			add := run("-addUser", "boot", pw)
			add.Env = env
			if out, err := add.CombinedOutput(); err != nil {
				t.Fatalf("-addUser: %v\n%s", err, out)
			}
			ver := run("-version")
			out, err := ver.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "gantry ") {
				t.Fatalf("-version: %v: %q", err, out)
			}
			if v := os.Getenv("GANTRY_VERSION"); v != "" && strings.TrimSpace(string(out)) != "gantry "+v {
				t.Fatalf("-version printed %q, want the stamp %q", out, "gantry "+v)
			}
			srv := run()
			srv.Env = env
			logf := filepath.Join(t.TempDir(), "gantry.log")
			lf, _ := os.Create(logf)
			srv.Stdout, srv.Stderr = lf, lf
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- srv.Wait() }()
			defer func() {
				srv.Process.Kill()
				if t.Failed() {
					b, _ := os.ReadFile(logf)
					t.Logf("gantry log:\n%s", Tail(string(b), 30))
				}
			}()
			checkNode(t, ip+":1883", ip+":9100", "boot", pw, 60*time.Second)
			srv.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("after SIGTERM: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("gantry did not exit within 30 s of SIGTERM")
			}
		})
	}
}

// checkNode checks a running node from the host: /health and
// /health/ready answer through curl, and an MQTT message published by one
// client reaches another.
func checkNode(t *testing.T, mqttAddr, opsAddr, user, pw string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	var body string
	if err := Eventually(timeout, func() (err error) {
		body, err = Curl("http://" + opsAddr + "/health")
		return err
	}); err != nil {
		t.Fatalf("/health: %v", err)
	}
	if !strings.Contains(body, `"ok"`) {
		t.Fatalf("/health answered %q", body)
	}
	if err := Eventually(timeout, func() (err error) {
		_, err = Curl("http://" + opsAddr + "/health/ready")
		return err
	}); err != nil {
		t.Fatalf("/health/ready: %v", err)
	}
	t.Logf("/health answered after %.1f s", time.Since(start).Seconds())
	if err := MQTTRoundTrip(mqttAddr, user, pw, 20*time.Second); err != nil {
		t.Fatalf("MQTT: %v", err)
	}
	if err := MQTTRoundTrip(mqttAddr, user, "wrong-"+pw, 20*time.Second); err == nil {
		t.Fatal("MQTT with a wrong password was accepted")
	}
}

// TestTinyBoot boots each architecture's Debian kernel under
// qemu-system with an initramfs of busybox and gantry, then checks MQTT
// and /health from the host through loopback-only forwarded ports.
func TestTinyBoot(t *testing.T) {
	needBoot(t, "tiny")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not installed")
	}
	for _, a := range Arches {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin, err := Gantry(a, dir)
			if err != nil {
				t.Fatal(err)
			}
			k, err := TinyKernel(a)
			if err != nil {
				t.Fatal(err)
			}
			pw := password()
			initrd := filepath.Join(dir, "initrd.gz")
			if err := TinyInitramfs(initrd, k, bin, "boot", pw); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			vm, err := Start(VMConfig{Arch: a, MemoryMB: 512, Kernel: k.Vmlinuz, Initrd: initrd,
				Append: "panic=-1 quiet", GuestPorts: []int{1883, 9100},
				Log: filepath.Join(dir, "console.log"), NoReboot: true})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				vm.Stop()
				if t.Failed() {
					t.Logf("console:\n%s", Tail(vm.Console(), 40))
				}
			}()
			if err := vm.WaitConsole("GANTRY-TINY-START gantry "+os.Getenv("GANTRY_VERSION"), 150*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: gantry started %.1f s after qemu", a.Name, time.Since(start).Seconds())
			checkNode(t, vm.Ports[1883], vm.Ports[9100], "boot", pw, 60*time.Second)
			t.Logf("%s: boot, /health and MQTT round trip took %.1f s", a.Name, time.Since(start).Seconds())
		})
	}
}
