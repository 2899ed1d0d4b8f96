package boot

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// efiVar is an efivarfs file: 4 bytes of attributes, then the value, here
// a NUL-terminated UTF-16LE string as systemd-boot writes
// LoaderBootCountPath.
func efiVar(s string) []byte {
	b := []byte{7, 0, 0, 0}
	for _, u := range utf16.Encode([]rune(s + "\x00")) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

// TestBlessScript runs rootfs/usr/lib/gantry/bless on a fake ESP: the
// trial entry loses its counter, also when 32-bit ARM's systemd-boot
// garbled the counters in the variable; a variable that names no loader
// entry renames nothing.
func TestBlessScript(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "rootfs/usr/lib/gantry/bless")
	for _, c := range []struct {
		name, entry, varValue, want string
		fails                       bool
	}{
		{"trial entry blessed", "gantry-2-b+2-1.conf", `\loader\entries\gantry-2-b+2-1.conf`, "gantry-2-b.conf", false},
		{"last try blessed", "gantry-7-a+0-3.conf", `\loader\entries\gantry-7-a+0-3.conf`, "gantry-7-a.conf", false},
		// What systemd-boot 252 wrote on armv7 for gantry-2-b+2-1.conf (make image-test ARCH=armv7).
		{"32-bit ARM's garbled counters", "gantry-2-b+2-1.conf", `\loader\entries\gantry-2-b+0-2(null)`, "gantry-2-b.conf", false},
		{"garbled, and no such entry", "gantry-3-a+2-1.conf", `\loader\entries\gantry-2-b+0-2(null)`, "gantry-3-a+2-1.conf", false},
		{"no counter", "gantry-1-a.conf", `\loader\entries\gantry-1-a.conf`, "gantry-1-a.conf", false},
		{"not an entry", "gantry-2-b+2-1.conf", `\EFI\BOOT\BOOTX64.EFI`, "gantry-2-b+2-1.conf", true},
		{"empty variable", "gantry-2-b+2-1.conf", "", "gantry-2-b+2-1.conf", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			esp := t.TempDir()
			entries := filepath.Join(esp, "loader", "entries")
			os.MkdirAll(entries, 0o755)
			os.WriteFile(filepath.Join(entries, c.entry), []byte("title x\n"), 0o644)
			v := filepath.Join(t.TempDir(), "LoaderBootCountPath")
			os.WriteFile(v, efiVar(c.varValue), 0o644)
			cmd := exec.Command("sh", script)
			cmd.Env = append(os.Environ(), "GANTRY_BLESS_VAR="+v, "GANTRY_ESP="+esp)
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fails {
				t.Fatalf("bless: err %v, want failure %v\n%s", err, c.fails, out)
			}
			names, _ := os.ReadDir(entries)
			if len(names) != 1 || names[0].Name() != c.want {
				var got []string
				for _, n := range names {
					got = append(got, n.Name())
				}
				t.Fatalf("entries after bless: %s, want %s\n%s", strings.Join(got, " "), c.want, out)
			}
		})
	}
}

// TestBootCheckAfterFailure runs rootfs/usr/lib/gantry/boot-check
// --after-failure (gantry-boot-check.service's ExecStopPost) with a fake
// systemctl: a trial boot whose check failed or was killed by its timeout
// reboots; a check that succeeded, or a boot that is no trial, does not.
func TestBootCheckAfterFailure(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "rootfs/usr/lib/gantry/boot-check")
	for _, c := range []struct {
		name, result  string
		trial, reboot bool
	}{
		{"trial check failed", "exit-code", true, true},
		{"trial check killed by its timeout", "timeout", true, true},
		{"trial check succeeded", "success", true, false},
		{"no trial, check failed", "exit-code", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "rebooted")
			os.WriteFile(filepath.Join(dir, "systemctl"), []byte("#!/bin/sh\necho \"$@\" > "+marker+"\n"), 0o755)
			v := filepath.Join(dir, "LoaderBootCountPath")
			if c.trial {
				os.WriteFile(v, efiVar(`\loader\entries\gantry-2-b+2-1.conf`), 0o644)
			}
			cmd := exec.Command("bash", script, "--after-failure")
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SERVICE_RESULT="+c.result, "GANTRY_TRIAL_VAR="+v)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("boot-check --after-failure: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(marker)
			if rebooted := strings.Contains(string(got), "reboot"); rebooted != c.reboot {
				t.Fatalf("rebooted %v, want %v (systemctl %q)\n%s", rebooted, c.reboot, got, out)
			}
			if c.reboot && !strings.Contains(string(out), "trial boot failed; rebooting") {
				t.Errorf("no \"trial boot failed; rebooting\" (make image-test counts it):\n%s", out)
			}
		})
	}
}
