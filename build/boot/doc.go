// Package boot is the boot-test harness of the appliance: it runs the
// cross-built gantry binaries under qemu-user, and boots them under
// qemu-system (software emulation: KVM does not work nested on the build
// machines) either from a tiny initramfs or from the full disk image, then
// checks from the host, through loopback-only hostfwd ports, that the
// broker answers MQTT and the operations port answers /health.
//
// What it needs from the host: qemu-user-static, qemu-system-x86,
// qemu-system-arm, mmdebstrap (to fetch Debian 12's kernels and busybox
// once into a cache directory), curl and, for the UEFI image tests, ovmf.
// .ci/run installs them.
//
// The tests here are slow by the measure of unit tests (seconds to minutes
// of emulated boot) and need those tools, so they run only when
// GANTRY_BOOT is set: "make boot-smoke" (part of make test) sets
// GANTRY_BOOT=tiny, "make image-test" sets GANTRY_BOOT=image. Without it,
// go test ./... skips them and says how to run them.
//
// Concurrency: a VM is one qemu process owned by the test that started it;
// Stop kills and reaps it. Nothing here is shared between tests except the
// kernel cache, which is filled under a lock file.
package boot
